"""The job against a secured broker (`deploy/local/kafka.sh start --secure`: SASL_SSL, SCRAM-SHA-512,
the StandardAuthorizer), and the broker's port across a stop and a start (docs/operations.md,
"Security" and "Runbook")."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, TopicAuthorizationFailedError

from pwevent.jobs.streaming.kafka_acls import acl_plan
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.kafka_security import KafkaSecurity, parse_security
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    KAFKA_SH,
    SEED,
    StreamingJob,
    check_equals_replay,
    generate,
    load_script,
)

pytestmark = [pytest.mark.kafka]


class SecureBroker:
    def __init__(self, run_dir: Path, bootstrap: str) -> None:
        self.run_dir = run_dir
        self.bootstrap = bootstrap
        self.ca = str(run_dir / "tls" / "ca.pem")

    def password(self, user: str) -> str:
        return (self.run_dir / "secrets" / user).read_text().strip()

    def python(self, user: str) -> dict[str, Any]:
        """kafka-python arguments of `user`."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
                "sasl_plain_password": self.password(user), "ssl_cafile": self.ca}

    def security(self, user: str, password: str | None = None) -> dict[str, Any]:
        """The `kafka.security` section of `user`."""
        return {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": user,
                "password": password or self.password(user), "ca_file": self.ca}


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    run_dir = tmp_path_factory.mktemp("kafka-secure")
    started = subprocess.run([str(KAFKA_SH), "start", "--secure", "--run-dir", str(run_dir)], capture_output=True,
                             text=True, timeout=240)
    assert started.returncode == 0, started.stderr
    try:
        yield SecureBroker(run_dir, started.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)


def _write(bootstrap: str, topic: str, **security: Any) -> None:
    client = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=10_000, request_timeout_ms=10_000, **security)
    try:
        client.send(topic, b'{"user": "intruder"}').get(timeout=20)
    finally:
        client.close()


def _end_offsets(bootstrap: str, topic: str, **security: Any) -> dict[TopicPartition, int]:
    client = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000,
                           **security)
    try:
        return client.end_offsets([TopicPartition(topic, 0)])
    finally:
        client.close()


@pytest.mark.flink
def test_the_job_runs_with_credentials_and_others_are_kept_out(
        secure_broker: SecureBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's password comes from the environment and shows in neither its output nor Flink's
    logs; producers and analysts use their own users; a client without credentials, or with a user
    the ACLs do not name, can neither write the requirements topic nor read the events topic."""
    broker = secure_broker
    password = broker.password("pwevent-job")
    monkeypatch.setenv("PWEVENT_TEST_JOB_PASSWORD", password)
    slots = 4
    job = StreamingJob(broker.bootstrap, tmp_path, "PBD", {
        "kafka": {"security": broker.security("pwevent-job", "${PWEVENT_TEST_JOB_PASSWORD}")},
        "flink": {"close_after": "1s", "source_idleness": "3s"},
    }, admin=broker.python("admin"))
    assert password not in job.config_path.read_text()
    failed = load_script("kafka-acls.py").apply_grants(broker.bootstrap, broker.python("admin"), acl_plan(job.kafka))
    assert failed == []
    events, requirements = generate(job.folder, users=20, slots=slots)
    producer_settings = job.kafka.model_copy(update={"security": _security(broker, "pwevent-producer")})
    produce_files(producer_settings, job.config, events, requirements, 0.0)
    try:
        job.start(seed=SEED)
        # Releases and the spend log read as the auditor (pwevent-analyst: releases and audit only).
        job.kafka = job.kafka.model_copy(update={"security": _security(broker, "pwevent-analyst")})
        check_equals_replay(job, events, requirements, slots)
    finally:
        job.stop()

    # Kept out: no credentials (plaintext, or TLS without SASL) and an authenticated user without the ACL.
    topics = job.topics
    with pytest.raises(KafkaError):
        _write(broker.bootstrap, topics["requirements"])
    with pytest.raises(KafkaError):
        _write(broker.bootstrap, topics["requirements"], security_protocol="SSL", ssl_cafile=broker.ca)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, topics["events"], security_protocol="SSL", ssl_cafile=broker.ca)
    with pytest.raises(TopicAuthorizationFailedError):
        _write(broker.bootstrap, topics["requirements"], **broker.python("pwevent-analyst"))
    with pytest.raises(TopicAuthorizationFailedError):
        _end_offsets(broker.bootstrap, topics["events"], **broker.python("pwevent-analyst"))
    # ... while the same calls succeed for the users the ACLs name (so the refusals are the ACLs').
    assert _end_offsets(broker.bootstrap, topics["events"], **broker.python("pwevent-job"))
    client = producer(producer_settings)
    client.send(topics["requirements"], b"{}").get(timeout=20)
    client.close()

    # The secret is nowhere in what the job printed or Flink logged during the run.
    printed = (job.folder / "job-1.log").read_text()
    run_logs = Path(printed.split("Flink log in ", 1)[1].split()[0])  # each run logs into its own folder
    flink_logs = [log for log in run_logs.glob("flink-*.log") if log.stat().st_size > 0]
    assert flink_logs, f"no Flink log written during the run in {run_logs}: {list(run_logs.iterdir())}"
    for log in [job.folder / "job-1.log", *run_logs.glob("*")]:
        assert password not in log.read_text(errors="replace"), f"the job's password is in {log}"


def _security(broker: SecureBroker, user: str) -> KafkaSecurity:
    return parse_security(broker.security(user), None)


def test_a_restarted_broker_keeps_the_port_of_its_first_start(tmp_path: Path) -> None:
    """The requested port is taken at the first start: the broker moves to a free one, and a later
    start without --port comes back on that one (clients configured with it find it again)."""
    run_dir = tmp_path / "kafka"
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    busy = holder.getsockname()[1]
    try:
        first = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--port", str(busy)],
                               capture_output=True, text=True, timeout=180)
        assert first.returncode == 0, first.stderr
        port = int(first.stdout.strip().splitlines()[-1].rsplit(":", 1)[1])
        assert port != busy
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], check=True, capture_output=True,
                       timeout=60)
        holder.close()
        second = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir)], capture_output=True, text=True,
                                timeout=180)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip().splitlines()[-1] == f"127.0.0.1:{port}"
    finally:
        holder.close()
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)
