"""Grant the ACLs of a pwevent deployment (jobs/streaming/kafka_acls.py: job, producer, registrar,
analyst, auditor) on a broker with an authorizer; safe to re-run (Kafka keeps one copy of an ACL).

Usage: .venv/bin/python deploy/local/kafka-acls.py --run-dir DIR [--bootstrap HOST:PORT]
       [--job-config FILE] [--job USER] [--producer USER] [--registrar USER] [--analyst USER]
       [--auditor USER]

The admin connection is the local secured broker's (`deploy/local/kafka.sh start --secure`): the
admin password in DIR/secrets/admin, the CA in DIR/tls/ca.pem, the address in DIR/bootstrap unless
--bootstrap is given. Topic names, the group id and the transactional id prefix come from the job's
YAML (--job-config), else the defaults. docs/operations.md, "Security".
Exit status: 0 when every ACL was created (or already existed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourceType,
)

from pwevent.jobs.common.config import ConfigError, load_config, parse_config
from pwevent.jobs.streaming.kafka_acls import Grant, Principals, acl_plan
from pwevent.jobs.streaming.settings import KafkaSettings, stream_settings

_RESOURCES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
              "transactional_id": ResourceType.TRANSACTIONAL_ID}


def local_admin(run_dir: Path) -> dict[str, Any]:
    """kafka-python arguments of the admin user of the local secured broker in `run_dir`."""
    return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "admin",
            "sasl_plain_password": (run_dir / "secrets" / "admin").read_text().strip(),
            "ssl_cafile": str(run_dir / "tls" / "ca.pem")}


def _acl(grant: Grant) -> ACL:
    pattern = ACLResourcePatternType.PREFIXED if grant.prefixed else ACLResourcePatternType.LITERAL
    return ACL(grant.principal, "*", ACLOperation[grant.operation], ACLPermissionType.ALLOW,
               ResourcePattern(_RESOURCES[grant.resource], grant.name, pattern))


def apply_grants(bootstrap: str, admin_options: dict[str, Any], grants: list[Grant]) -> list[str]:
    """Create the ACLs; returns the failures as text (empty when all were created)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="pwevent-acls", **admin_options)
    try:
        result = admin.create_acls([_acl(g) for g in grants])
    finally:
        admin.close()
    return [f"{acl}: {error}" for acl, error in result.get("failed", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-acls.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True, type=Path, help="the secured broker's run dir (kafka.sh)")
    parser.add_argument("--bootstrap", help="default: the run dir's bootstrap file")
    parser.add_argument("--job-config", metavar="FILE", help="the job's YAML (topics, group id, transactional ids)")
    defaults = Principals()
    for role in ("job", "producer", "registrar", "analyst", "auditor"):
        parser.add_argument(f"--{role}", default=getattr(defaults, role), metavar="USER",
                            help=f"the {role}'s user name (default {getattr(defaults, role)})")
    args = parser.parse_args(argv)
    try:
        if args.job_config:
            config = load_config(args.job_config)
            kafka: KafkaSettings = stream_settings(config, str(Path(args.job_config).resolve().parent)).kafka
        else:
            base = {"mechanism": "PBD", "slot": "1s", "origin": 0, "domain": {"type": "binary"}}
            config = parse_config(base)
            kafka = stream_settings(config).kafka
    except ConfigError as err:
        parser.error(str(err))
    bootstrap = args.bootstrap or (args.run_dir / "bootstrap").read_text().strip()
    statistics = tuple(s.name for s in config.statistics if s.name is not None)
    grants = acl_plan(kafka, Principals(args.job, args.producer, args.registrar, args.analyst, args.auditor),
                      statistics)
    failed = apply_grants(bootstrap, local_admin(args.run_dir), grants)
    for line in failed:
        print(f"kafka-acls: {line}", file=sys.stderr)
    print(f"kafka-acls: {len(grants) - len(failed)} of {len(grants)} ACLs in place")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
