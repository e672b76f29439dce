"""`kafka.security` (one section for the job's Java clients and the Python tools), `${ENV_VAR}` in
the configuration, and the ACL plan per principal (docs/operations.md, "Security"). No broker."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pwevent.jobs.cli.main import main as cli_main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.streaming.job import sink_ddl
from pwevent.jobs.streaming.kafka_acls import Grant, acl_plan
from pwevent.jobs.streaming.settings import stream_settings

BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}
SECRET = 'p"a\\ss w0rd'  # a quote and a backslash: the JAAS line must escape them


def settings(kafka: dict, base_dir: str = "/tmp"):  # type: ignore[no-untyped-def]
    return stream_settings(parse_config({**BASE, "kafka": {"bootstrap": "127.0.0.1:1", **kafka}}), base_dir)


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def sasl_ssl(ca: Path) -> dict:
    return {"security": {"protocol": "SASL_SSL", "username": "pwevent-job", "password": "${PWEVENT_T_PASSWORD}",
                         "ca_file": ca.name}}


def test_one_section_drives_the_java_and_the_python_clients(ca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_PASSWORD", SECRET)
    kafka = settings(sasl_ssl(ca), str(ca.parent)).kafka
    assert kafka.jvm_properties() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required '
                            'username="pwevent-job" password="p\\"a\\\\ss w0rd";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka.client_options() == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "pwevent-job",
        "sasl_plain_password": SECRET, "ssl_cafile": str(ca), "ssl_check_hostname": True,
    }
    ddl = sink_ddl("b", "t", "releases", True, settings(sasl_ssl(ca), str(ca.parent)))
    assert "'properties.security.protocol' = 'SASL_SSL'" in ddl and "'properties.sasl.jaas.config'" in ddl


def test_plaintext_is_the_default_and_tuning_properties_pass_through() -> None:
    kafka = settings({"properties": {"fetch.max.bytes": 1048576}}).kafka
    assert kafka.jvm_properties() == {"fetch.max.bytes": "1048576", "security.protocol": "PLAINTEXT"}
    assert kafka.client_options() == {"security_protocol": "PLAINTEXT"}


def test_the_password_shows_in_no_repr_and_no_error(ca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_PASSWORD", SECRET)
    config = parse_config({**BASE, "kafka": sasl_ssl(ca)})
    s = stream_settings(config, str(ca.parent))
    for shown in (repr(config), repr(s), str(s.kafka.security), repr(s.kafka.security.password)):
        assert SECRET not in shown
    monkeypatch.setenv("PWEVENT_T_PASSWORD", "")
    with pytest.raises(ConfigError, match=r"kafka\.security\.password") as err:
        settings(sasl_ssl(ca), str(ca.parent))
    assert SECRET not in str(err.value)


def test_a_password_of_another_type_is_named_not_shown() -> None:
    with pytest.raises(ConfigError, match=r"^kafka\.security\.password: must be a string") as err:
        settings({"security": {"protocol": "SASL_SSL", "username": "u", "password": [SECRET]}})
    assert SECRET not in str(err.value)


def test_print_submit_shows_no_secret(ca: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    jar = tmp_path / "connector.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_KAFKA_CONNECTOR_JAR", str(jar))
    monkeypatch.setenv("PWEVENT_T_PASSWORD", SECRET)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "kafka": {"bootstrap": "127.0.0.1:1", **sasl_ssl(ca)}}))
    assert cli_main(["run", "--config", str(path), "--print-submit"]) == 0
    out = capsys.readouterr()
    assert "flink" in out.out and str(path) in out.out
    assert SECRET not in out.out + out.err and "p\"a" not in out.out + out.err


@pytest.mark.parametrize(("security", "message"), [
    ({"protocol": "SASL_SSH"}, "kafka.security.protocol"),
    ({"protocol": "SASL_SSL", "username": "u"}, "kafka.security.password"),
    ({"protocol": "SASL_SSL", "password": "p"}, "kafka.security.username"),
    ({"protocol": "SASL_SSL", "username": "u", "password": "p", "sasl_mechanism": "GSSAPI"},
     "kafka.security.sasl_mechanism"),
    ({"protocol": "SSL", "username": "u", "password": "p"}, "need a SASL protocol"),
    ({"protocol": "SASL_PLAINTEXT", "username": "u", "password": "p", "ca_file": "x"}, "kafka.security.ca_file"),
    ({"protocol": "SSL", "ca_file": "missing.pem"}, "kafka.security.ca_file"),
    ({"protocol": "SSL", "check_hostname": "no"}, "kafka.security.check_hostname"),
    ({"protocl": "SSL"}, "kafka.security.protocl"),
])
def test_security_errors_name_the_key(security: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        settings({"security": security})


def test_security_has_one_place() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.properties\.sasl\.jaas\.config: .*kafka\.security"):
        settings({"properties": {"sasl.jaas.config": "x"}})
    with pytest.raises(ConfigError, match=r"kafka\.client was replaced by kafka\.security"):
        settings({"client": {"security_protocol": "SSL"}})


def test_environment_variables_resolve_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_BROKER", "broker-1")
    kafka = settings({"bootstrap": "${PWEVENT_T_BROKER}:9093", "group_id": "$${literal}"}).kafka
    assert kafka.bootstrap == "broker-1:9093" and kafka.group_id == "${literal}"
    monkeypatch.delenv("PWEVENT_T_UNSET", raising=False)
    unset = r"^kafka\.security\.password: environment variable PWEVENT_T_UNSET is not set"
    with pytest.raises(ConfigError, match=unset):
        settings({"security": {"protocol": "SASL_SSL", "username": "u", "password": "${PWEVENT_T_UNSET}"}})
    with pytest.raises(ConfigError, match=r"kafka\.topics\.events: \$\{1x\} is not an environment variable"):
        settings({"topics": {"events": "${1x}"}})


def test_the_acl_plan_names_every_principal_and_resource() -> None:
    kafka = settings({"group_id": "g", "transactional_id_prefix": "tx",
                      "topics": {"events": "ev", "requirements": "rq", "releases": "rl", "dead_letters": "dl",
                                 "audit": "au"}}).kafka
    plan = acl_plan(kafka)
    assert len(plan) == len(set(plan))
    allowed = {(g.principal, g.resource, g.name, g.operation, g.prefixed) for g in plan}
    job = "User:pwevent-job"
    for topic, ops in {"ev": {"READ"}, "rq": {"READ"}, "rl": {"READ", "WRITE"}, "dl": {"WRITE"},
                       "au": {"READ", "WRITE"}}.items():
        assert {g.operation for g in plan if g.principal == job and g.name == topic} == ops | {"DESCRIBE"}
    assert (job, "group", "g", "READ", True) in allowed
    assert (job, "transactional_id", "tx", "WRITE", True) in allowed
    producer = {(g.name, g.operation) for g in plan if g.principal == "User:pwevent-producer"}
    assert producer == {("ev", "WRITE"), ("ev", "DESCRIBE"), ("rq", "WRITE"), ("rq", "DESCRIBE")}
    analyst = {(g.name, g.operation) for g in plan if g.principal == "User:pwevent-analyst"}
    assert ("rl", "READ") in analyst and not {n for n, op in analyst if op == "WRITE"}
    assert not any(g.name in ("ev", "rq") for g in plan if g.principal == "User:pwevent-analyst")
    assert Grant("User:pwevent-job", "topic", "ev", "WRITE") not in plan
