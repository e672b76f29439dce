"""deploy/local/create-topics.py: where the bootstrap address, topic names and client settings come from."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

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
