"""deploy/local/create-topics.py: where the bootstrap address, topic names and client settings come from."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import one, render

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "local" / "create-topics.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("create_topics", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job_config(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({
        "mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "binary"},
        "kafka": {"bootstrap": "broker-1:9093", "topics": {"events": "ev", "audit": "spend"},
                  "security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "username": "admin",
                               "password": "pw"}},
    }))
    return path


def test_the_job_config_gives_bootstrap_topics_and_client_settings(tmp_path: Path) -> None:
    args = _module().parse_args(["--job-config", str(_job_config(tmp_path)), "--releases-topic", "mine"])
    assert args.bootstrap == "broker-1:9093"
    assert args.client == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                           "sasl_plain_username": "admin", "sasl_plain_password": "pw"}
    assert list(_module().wanted_topics(args)) == ["ev", "pwevent.requirements", "mine", "pwevent.dead-letters",
                                                   "spend"]


def test_without_a_job_config_the_defaults_and_plaintext_apply() -> None:
    args = _module().parse_args(["--bootstrap", "127.0.0.1:1"])
    assert args.client == {} and args.events_topic == "pwevent.events"  # kafka-python's default: plaintext


def test_a_bad_job_config_is_a_usage_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("mechanism: PBD\nkafka: {topics: {events: 3}}\n")
    with pytest.raises(SystemExit) as exited:
        _module().parse_args(["--job-config", str(bad)])
    assert exited.value.code == 2
    assert f"--job-config {bad}" in capsys.readouterr().err


def test_locally_every_topic_keeps_its_records_unless_told(tmp_path: Path) -> None:
    """Local topics hold replayed datasets stamped with old event times: kept, or --retention-ms for all."""
    module = _module()
    kept = module.retention(module.parse_args(["--bootstrap", "127.0.0.1:1"])).values()
    assert all(settings == {"retention.ms": "-1"} for settings in kept)
    args = module.parse_args(["--bootstrap", "127.0.0.1:1", "--retention-ms", "5000"])
    assert all(settings == {"retention.ms": "5000"} for settings in module.retention(args).values())
    with pytest.raises(SystemExit):
        module.parse_args(["--bootstrap", "127.0.0.1:1", "--retention-ms", "5000", "--role-retention"])


def test_the_kubernetes_topic_job_gives_each_topic_the_retention_of_its_role(tmp_path: Path) -> None:
    """The Helm chart's topic Job (deploy/helm/pwevent/templates/topics-job.yaml) runs this script with
    --role-retention, so the table of roles (TOPICS) is the one definition: the users' raw records
    (events, dead letters) expire after a week and the dead letters sooner; the requirements are
    compacted by user id; the releases and the audit are never deleted (docs/operations.md,
    "Retention and erasure")."""
    module = _module()
    (container,) = one(render(), "Job")["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    config = command.index("--job-config") + 1
    args = module.parse_args([*command[2:config], str(_job_config(tmp_path)), *command[config + 1:]])
    kept = module.retention(args)
    by_role = dict(zip(module.TOPICS, kept.values(), strict=True))
    assert by_role == {role: dict(topic.configs) for role, topic in module.TOPICS.items()}
    assert by_role["requirements"]["cleanup.policy"] == "compact"
    assert int(by_role["dead-letters"]["retention.ms"]) <= int(by_role["events"]["retention.ms"])
    assert by_role["audit"]["retention.ms"] == by_role["releases"]["retention.ms"] == "-1"


def test_a_job_with_several_statistics_gets_a_release_topic_for_each(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({
        "mechanism": "PBD", "slot": "60s", "origin": 0, "kafka": {"bootstrap": "broker-1:9093"},
        "statistics": [{"name": "cells", "domain": {"type": "cells", "d": 4}, "value": "cell"},
                       {"name": "screen", "domain": {"type": "binary"}, "value": "screen"}]}))
    module = _module()
    args = module.parse_args(["--job-config", str(path), "--role-retention"])
    wanted = module.wanted_topics(args)
    assert wanted["pwevent.releases.cells"] == wanted["pwevent.releases.screen"] == wanted["pwevent.releases"]
    kept = module.retention(args)
    assert kept["pwevent.releases.cells"] == kept["pwevent.releases"] == {"cleanup.policy": "delete",
                                                                           "retention.ms": "-1"}
