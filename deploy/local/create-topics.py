"""Create the pwevent Kafka topics; safe to re-run (existing topics are left as they are).

Usage: .venv/bin/python deploy/local/create-topics.py [--job-config FILE] [--bootstrap HOST:PORT]
       [--<role>-topic NAME] [--<role>-partitions N] [--replication-factor N]
       [--role-retention | --retention-ms MS] [--config KEY=VALUE ...]

Roles and defaults (TOPICS): events (pwevent.events, 2 partitions), requirements (pwevent.requirements,
1), releases (pwevent.releases, 1), dead-letters (pwevent.dead-letters, 1), audit (pwevent.audit, 1).
With --job-config (the job's YAML), the bootstrap address, the topic names and the security settings
(`kafka.security`: protocol, SASL credentials, CA file) come from that file; flags
given explicitly still win; a job with several statistics also gets each statistic's release topic
(`topics.releases` + "." + its name, the releases' partitions and policy). Without it the bootstrap address defaults to $PWEVENT_BOOTSTRAP, else to
the file written by `deploy/local/kafka.sh start` (<repo>/.run/kafka/bootstrap) and the client
connects in plaintext. Needs kafka-python >= 3.0.
Exit status: 0 when every topic exists afterwards, 1 otherwise.

Retention (docs/operations.md, "Retention and erasure"). --role-retention gives each new topic the
topic configuration of its role (TOPICS, jobs/streaming/topic_policies.py, the one declaration; what
the Helm chart's topic Job passes): the raw events 7 days, the dead letters 3 days, the
requirements compacted by user id (no record younger than 7 days compacted), the releases and the
audit topic forever (retention.ms=-1). Without it every new topic keeps its records
(-1, or --retention-ms MS): `pwevent produce` stamps each record with its event time, and Kafka's time
retention judges a segment by its largest record timestamp, so a replayed dataset from 2024 would be
deleted by a 7-day retention within minutes (seen: input records vanished under a running job).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaTimeoutError, TopicAlreadyExistsError, for_code

from pwevent.jobs.streaming.topic_policies import TOPIC_POLICIES, TopicPolicy

#: The job's topics by role, with their names, partitions and topic configuration (the declaration).
TOPICS = TOPIC_POLICIES
DEFAULT_BOOTSTRAP_FILE = Path(__file__).resolve().parents[2] / ".run" / "kafka" / "bootstrap"


def default_bootstrap(bootstrap_file: Path = DEFAULT_BOOTSTRAP_FILE) -> str | None:
    if os.environ.get("PWEVENT_BOOTSTRAP"):
        return os.environ["PWEVENT_BOOTSTRAP"]
    if bootstrap_file.is_file():
        return bootstrap_file.read_text().strip() or None
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="create-topics.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--job-config", metavar="FILE",
                        help="the job's YAML: bootstrap, topic names and kafka.security settings from it")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers, host:port[,host:port]")
    for role, topic in TOPICS.items():
        parser.add_argument(f"--{role}-topic", metavar="NAME", help=f"default {topic.name} (or the job config's)")
        parser.add_argument(f"--{role}-partitions", type=int, default=topic.partitions, metavar="N",
                            help=f"default {topic.partitions}")
    parser.add_argument("--replication-factor", type=int, default=1, metavar="N", help="default 1")
    parser.add_argument("--timeout-ms", type=int, default=30000, metavar="MS", help="default 30000")
    retention = parser.add_mutually_exclusive_group()
    retention.add_argument("--role-retention", action="store_true",
                           help="the topic configuration of each new topic by its role (see above); for live "
                           "deployments")
    retention.add_argument("--retention-ms", type=int, default=-1, metavar="MS",
                           help="retention.ms of every new topic (default -1: keep; see above)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="extra topic configuration for new topics (repeatable)")
    args = parser.parse_args(argv)
    args.client = {}
    args.statistic_releases = []
    if args.job_config:
        from pwevent.jobs.common.config import ConfigError, load_config
        from pwevent.jobs.streaming.settings import stream_settings

        try:
            config = load_config(args.job_config)
            kafka = stream_settings(config, str(Path(args.job_config).resolve().parent)).kafka
        except (ConfigError, OSError) as err:
            parser.error(f"--job-config {args.job_config}: {err}")
        # several statistics: each has its release topic (docs/streaming.md, "Several statistics")
        args.statistic_releases = [kafka.release_topic(s.name) for s in config.statistics if s.name is not None]
        args.bootstrap = args.bootstrap or kafka.bootstrap
        args.client = kafka.client_options()
        for role in TOPICS:
            attr = f"{role.replace('-', '_')}_topic"
            if getattr(args, attr) is None:
                setattr(args, attr, kafka.topics[role.replace("-", "_")])
    for role, topic in TOPICS.items():
        attr = f"{role.replace('-', '_')}_topic"
        if getattr(args, attr) is None:
            setattr(args, attr, topic.name)
    args.bootstrap = args.bootstrap or default_bootstrap()
    if not args.bootstrap:
        parser.error("no bootstrap address: pass --bootstrap, set PWEVENT_BOOTSTRAP or run kafka.sh start")
    return args


def wanted_topics(args: argparse.Namespace) -> dict[str, int]:
    """Topic name -> partition count, from the parsed flags (a statistic's release topic as the releases')."""
    return {
        **{getattr(args, f"{role.replace('-', '_')}_topic"): getattr(args, f"{role.replace('-', '_')}_partitions")
           for role in TOPICS},
        **{name: args.releases_partitions for name in args.statistic_releases},
    }


def retention(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Topic name -> the retention settings of the new topic (its role's with --role-retention, else
    retention.ms alone), from the parsed flags."""
    def of(topic: TopicPolicy) -> dict[str, str]:
        return dict(topic.configs) if args.role_retention else {"retention.ms": str(args.retention_ms)}

    return {**{getattr(args, f"{role.replace('-', '_')}_topic"): of(topic) for role, topic in TOPICS.items()},
            **{name: of(TOPICS["releases"]) for name in args.statistic_releases}}


def create_topics(bootstrap: str, topics: dict[str, int], replication_factor: int = 1,
                  timeout_ms: int = 30000, configs: dict[str, str] | None = None,
                  client: dict[str, object] | None = None,
                  retention_ms: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """Create the missing topics; returns topic -> 'created' | 'exists' | error text.
    `configs`: topic configuration of every new topic; `retention_ms`: topic -> its retention settings
    (default retention.ms "-1", keep; see above); `client`: kafka-python keyword arguments (security
    settings) for the admin client."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="pwevent-create-topics",
                             request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms, **(client or {}))
    try:
        request = {name: {"num_partitions": n, "replication_factor": replication_factor,
                          "configs": {**(retention_ms or {}).get(name, {"retention.ms": "-1"}), **(configs or {})}}
                   for name, n in topics.items()}
        response = admin.create_topics(request, timeout_ms=timeout_ms, raise_errors=False)
        outcome: dict[str, str] = {}
        for topic in response["topics"]:
            error = for_code(topic["error_code"])
            if topic["error_code"] == 0:
                outcome[topic["name"]] = "created"
            elif error is TopicAlreadyExistsError:
                outcome[topic["name"]] = "exists"
            else:
                outcome[topic["name"]] = f"{error.__name__}: {topic.get('error_message') or ''}".rstrip(": ")
        created = [name for name, state in outcome.items() if state == "created"]
        if created:
            admin.wait_for_topics(created)  # leaders assigned, so producers can start right away
        return outcome
    finally:
        admin.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    topics = wanted_topics(args)
    configs = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"create-topics: --config needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        configs[key] = value
    try:
        outcome = create_topics(args.bootstrap, topics, args.replication_factor, args.timeout_ms, configs,
                                args.client, retention(args))
    except KafkaTimeoutError:
        print(f"create-topics: no Kafka broker answered at {args.bootstrap} within {args.timeout_ms} ms "
              "(--timeout-ms)", file=sys.stderr)
        return 4
    ok = True
    kept = retention(args)
    for name, partitions in topics.items():
        state = outcome.get(name, "no answer from the broker")
        settings = " ".join(f"{key}={value}" for key, value in kept[name].items())
        print(f"{name} partitions={partitions} {settings}: {state}")
        ok &= state in ("created", "exists")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
