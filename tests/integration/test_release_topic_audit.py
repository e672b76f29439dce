"""`pwevent audit --release-topic` against a real broker (jobs/offline/release_topic.py), and the
mutation that shows the failover checks of test_released_once_*.py are not vacuous: the releases and
spend log of a seeded replay are written to a release topic in committed transactions, and pass the
full audit; a second draw of one slot (what a restore that draws fresh noise leaves), written in a
transaction that is then aborted, is invisible to read_committed and fails the checker and the
audit with `release_redrawn`, naming the slot; an aborted byte-identical copy passes."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaProducer

from pwevent.jobs.common.files import iso
from pwevent.jobs.offline.release_topic import RULE, redrawn
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.kafka_io import producer, read_topic
from pwevent.jobs.streaming.settings import load_settings
from tests.integration.conftest import PWEVENT, SEED, TEST_ORIGIN_MS, generate, load_script

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


class Run:
    """A replay's releases and spend log, and a release topic of its own on the broker."""

    def __init__(self, bootstrap: str, folder: Path) -> None:
        name = f"t{uuid.uuid4().hex[:8]}"
        roles = ("events", "requirements", "releases", "dead_letters", "audit")
        self.config_path = folder / "config.yaml"
        self.config_path.write_text(yaml.safe_dump({
            "mechanism": "PBD", "slot": "60s", "origin": iso(TEST_ORIGIN_MS), "domain": {"type": "binary"},
            "noise": "numpy-fast", "caps": {"max_w": 200},
            "kafka": {"bootstrap": bootstrap, "topics": {role: f"{name}.{role}" for role in roles}}}))
        self.config, settings = load_settings(str(self.config_path))
        self.kafka = settings.kafka
        self.topic = self.kafka.topics["releases"]
        assert load_script("create-topics.py").create_topics(bootstrap, {self.topic: 1}) == {self.topic: "created"}
        events, self.requirements = generate(folder, users=20, slots=10, w=5)
        self.spend = str(folder / "spend.jsonl")
        run_replay(self.config, events, self.requirements, str(folder / "releases.jsonl"), self.spend, seed=SEED,
                   through=10)
        self.releases = [json.loads(line) for line in (folder / "releases.jsonl").read_text().splitlines()]
        self.transactional = producer(self.kafka, transactional_id=f"{name}-writer")
        self.transactional.init_transactions()

    def write(self, releases: list[dict[str, Any]], commit: bool = True) -> None:
        """`releases`, each keyed by its slot, in one transaction, committed or aborted."""
        client: KafkaProducer = self.transactional
        client.begin_transaction()
        for release in releases:
            client.send(self.topic, key=str(release["slot"]).encode(), value=json.dumps(release).encode())
        client.flush()
        if commit:
            client.commit_transaction()
        else:
            client.abort_transaction()

    def audit(self, *more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*PWEVENT, "audit", "--config", str(self.config_path), "--release-topic", *more],
                              capture_output=True, text=True, timeout=300)

    def full_audit(self) -> subprocess.CompletedProcess[str]:
        return self.audit("--spend-log", self.spend, "--requirements", self.requirements)


def test_the_topic_audit_sees_what_read_committed_hides(kafka_bootstrap: str, tmp_path: Path) -> None:
    run = Run(kafka_bootstrap, tmp_path)
    try:
        run.write(run.releases)
        clean = run.full_audit()
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert f"{len(run.releases)} records read_uncommitted ({len(run.releases)} committed)" in clean.stdout

        slot = run.releases[4]
        run.write([slot], commit=False)  # an aborted byte-identical copy: one draw
        assert run.full_audit().returncode == 0

        redraw = {**slot, "counts": [c + 3 for c in slot["counts"]]}
        run.write([redraw], commit=False)  # the mutation: a second draw, aborted
        committed = [json.loads(m.value) for m in read_topic(run.kafka, run.topic)]
        assert committed == run.releases  # read_committed shows nothing wrong
        raw = read_topic(run.kafka, run.topic, committed=False)
        assert [(v.rule, v.slot) for v in redrawn(raw)] == [(RULE, slot["slot"])]
        for audited in (run.full_audit(), run.audit()):
            assert audited.returncode == 1, audited.stdout + audited.stderr
            assert f"slot {slot['slot']}: {RULE}: 2 different records" in audited.stdout, audited.stdout
    finally:
        run.transactional.close()


def test_a_committed_second_draw_fails_too(kafka_bootstrap: str, tmp_path: Path) -> None:
    run = Run(kafka_bootstrap, tmp_path)
    try:
        run.write(run.releases)
        slot = run.releases[2]
        run.write([{**slot, "counts": [c - 1 for c in slot["counts"]]}])
        audited = run.full_audit()
        assert audited.returncode == 1, audited.stdout + audited.stderr
        assert f"slot {slot['slot']}: {RULE}" in audited.stdout and "release_duplicate" in audited.stdout
    finally:
        run.transactional.close()


def test_no_broker_or_no_topic_is_exit_4(kafka_bootstrap: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "binary"},
                                      "kafka": {"bootstrap": kafka_bootstrap,
                                                "topics": {"releases": f"missing-{uuid.uuid4().hex[:8]}"}}}))
    missing = subprocess.run([*PWEVENT, "audit", "--config", str(config), "--release-topic"], capture_output=True,
                             text=True, timeout=300)
    assert missing.returncode == 4 and "does not exist" in missing.stderr, missing.stderr[-2000:]
