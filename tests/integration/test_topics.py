"""deploy/local/create-topics.py against a real broker: with --role-retention (what the Kubernetes
topic Job runs) each topic the broker creates has the retention and cleanup policy of its role (docs/operations.md,
"Retention and erasure")."""

from __future__ import annotations

import subprocess
import sys
import uuid

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
