"""deploy/local/create-topics.py against a real broker: with --role-retention (what the Kubernetes
topic Job runs) each topic the broker creates has the retention and cleanup policy of its role (docs/operations.md,
"Retention and erasure")."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from tests.integration.conftest import REPO, load_script

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_role_retention_reaches_the_broker(kafka_bootstrap: str) -> None:
    roles = load_script("create-topics.py").TOPICS
    prefix = f"t{uuid.uuid4().hex[:8]}"
    names = {role: f"{prefix}.{role}" for role in roles}
    done = subprocess.run([sys.executable, str(REPO / "deploy" / "local" / "create-topics.py"), "--bootstrap",
                           kafka_bootstrap, "--role-retention",
                           *[arg for role, name in names.items() for arg in (f"--{role}-topic", name)]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in names.values()])
    finally:
        admin.close()
    kept = {name: {key: entries[key]["value"] for key in roles[role].configs}
            for role, name in names.items() for entries in [described["topic"][name]]}
    assert kept == {names[role]: dict(topic.configs) for role, topic in roles.items()}
    kept = {name: settings["retention.ms"] for name, settings in kept.items()}
    assert kept[names["audit"]] == kept[names["releases"]] == "-1" != kept[names["events"]]


def test_a_missing_input_topic_is_named_before_any_work(kafka_bootstrap: str, tmp_path: Path) -> None:
    """`pwevent run` over an events topic that does not exist stops before it builds the job (no Flink
    log folder, no checkpoint folder), exit 4, with a message naming the topic and its key; once the
    topics exist, that check passes (the job is not started here)."""
    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.streaming.kafka_io import require_topics
    from pwevent.jobs.streaming.settings import stream_settings

    name = f"missing{uuid.uuid4().hex[:8]}"
    config = tmp_path / "job.yaml"
    config.write_text("mechanism: PBD\nslot: 60s\norigin: 2024-01-01\ndomain: {type: binary}\n"
                      f"kafka: {{bootstrap: '{kafka_bootstrap}', topics: {{events: {name}.events, "
                      f"requirements: {name}.requirements}}}}\n"
                      f"flink: {{checkpoint_dir: {tmp_path / 'checkpoints'}, log_dir: {tmp_path / 'logs'}}}\n")
    done = subprocess.run([sys.executable, "-m", "pwevent.jobs.cli.main", "run", "--config", str(config)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert (f"no such topic at {kafka_bootstrap}: {name}.events (kafka.topics.events), {name}.requirements "
            "(kafka.topics.requirements)") in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "o4" not in done.stderr
    assert not (tmp_path / "logs").exists() and not (tmp_path / "checkpoints").exists()
    create = load_script("create-topics.py").create_topics
    assert set(create(kafka_bootstrap, {f"{name}.events": 1, f"{name}.requirements": 1}).values()) == {"created"}
    settings = stream_settings(load_config(str(config)), str(tmp_path))
    require_topics(settings.kafka, ("events", "requirements"))
