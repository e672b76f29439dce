"""Two statistics under one budget in the streaming job (docs/streaming.md, "Several statistics"):
one events topic, each event carrying a value per statistic; the job releases each statistic to its
own topic, equal to `pwevent replay` record for record and line for line, the full audit (each user's
windows summed over both statistics against what it declared) passes, and an independent exact check
of every user's summed windows finds none over its budget."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.common.config import load_config
from pwevent.jobs.common.slots import parse_time_ms
from pwevent.jobs.offline.release_topic import audit_release_topic
from pwevent.jobs.streaming.kafka_io import read_topic
from pwevent.jobs.streaming.produce import produce_files
from pwevent.jobs.streaming.settings import stream_settings
from tests.integration.conftest import (
    PWEVENT,
    SEED,
    full_audit,
    generate,
    load_script,
    make_job,
    replay,
    spend_lines,
)
from tests.jobs.test_statistics import window_breaches

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

SCREENS = ["home", "map", "feed"]
STATISTICS = [
    {"name": "state", "domain": {"type": "binary"}, "value": "value", "share": 0.3},
    {"name": "screen", "domain": {"type": "categories", "values": SCREENS}, "value": "app.screen", "share": 0.7},
]


def two_valued(events: str) -> None:
    """Every event gets a screen (nested), from its user and time; one in 50 an unknown screen (a
    dead letter naming the statistic)."""
    lines = []
    for n, line in enumerate(Path(events).read_text().splitlines()):
        event = json.loads(line)
        screen = "settings" if n % 50 == 7 else SCREENS[(int(event["user"].removeprefix("u")) + n // 7) % 3]
        lines.append(json.dumps({**event, "app": {"screen": screen}}))
    Path(events).write_text("".join(line + "\n" for line in lines))


def statistics_job(streaming_job: Any, mechanism: str, extra: dict[str, Any] | None = None) -> Any:
    """A job of the tests' configuration with `STATISTICS` instead of the binary domain, and the
    statistics' release topics created."""
    job = make_job(streaming_job, mechanism, extra)
    raw = yaml.safe_load(job.config_path.read_text())
    del raw["domain"]
    raw["statistics"] = STATISTICS
    job.config_path.write_text(yaml.safe_dump(raw))
    job.config = load_config(str(job.config_path))
    job.kafka = stream_settings(job.config, str(job.folder)).kafka
    topics = [job.kafka.release_topic(s["name"]) for s in STATISTICS]
    created = load_script("create-topics.py").create_topics(job.kafka.bootstrap, {t: 1 for t in topics})
    assert set(created.values()) == {"created"}, created
    return job


def statistic_releases(job: Any, name: str, slots: int) -> list[dict[str, Any]]:
    """The committed releases of statistic `name`'s topic, once slots 1..`slots` are there."""
    got: list[dict[str, Any]] = []
    for _ in range(240):
        got = [m.json() for m in read_topic(job.kafka, job.kafka.release_topic(name), idle_s=1.0, max_s=90)]
        if len({r["slot"] for r in got}) >= slots:
            break
        assert job.alive(), job.log_tail()
    return got


def check_statistics_equal_replay(job: Any, events: str, requirements: str, slots: int,
                                  dynamic: bool) -> dict[str, list[dict[str, Any]]]:
    """Each statistic's topic holds slots 1..`slots` once each, equal to the replay's; the audit topic
    holds the replay's spend log; the full audit, the audit of the topics as an analyst reads them and
    the independent check of every user's windows summed over both statistics pass."""
    expected = replay(job, events, requirements, slots)
    for statistic in STATISTICS:
        name = statistic["name"]
        got = statistic_releases(job, name, slots)
        by_slot = {r["slot"]: r for r in got}
        assert len(by_slot) == len(got), f"statistic {name}: a slot released twice"
        want = [r for r in expected["releases"] if r["statistic"] == name]
        assert [by_slot[slot] for slot in range(1, slots + 1)] == want[:slots], f"statistic {name}"
    assert job.read("releases", idle_s=1.0) == []  # each statistic has its own topic
    want_lines = [r for r in expected["spend"] if r.get("slot", r.get("since", 0)) <= slots]
    audit = job.wait_records("audit", len(want_lines), lambda r: r.get("slot", r.get("since", 0)) <= slots)
    assert spend_lines(audit) == spend_lines(want_lines)
    full_audit(job, requirements, [r for r in expected["releases"] if r["slot"] <= slots], audit)
    spend_log = job.folder / "audit.jsonl"
    spend_log.write_text("".join(json.dumps(r) + "\n" for r in audit))
    topic_audit = audit_release_topic(job.kafka, job.config, str(spend_log), requirements)
    assert topic_audit.ok, topic_audit.render()  # both statistics' topics, read as an analyst reads them
    clock = job.config.clock
    declared = [json.loads(line) for line in Path(requirements).read_text().splitlines()]
    assert window_breaches(audit, declared, dynamic, slots,
                           lambda rec: clock.slot_of(parse_time_ms(rec["time"], "time"))) == []
    return expected


@pytest.mark.parametrize("mechanism", ["Adaptive", "DPBA"])
def test_two_statistics_job_equals_replay_and_passes_the_audit(streaming_job: Any, mechanism: str) -> None:
    slots = 10
    job = statistics_job(streaming_job, mechanism)
    events, requirements = generate(job.folder, users=30, slots=slots, dynamic=mechanism == "DPBA")
    two_valued(events)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    expected = check_statistics_equal_replay(job, events, requirements, slots, mechanism == "DPBA")
    tail = subprocess.run([*PWEVENT, "tail", "--config", str(job.config_path), "--statistic", "screen",
                           "--max-slots", "3", "--timeout", "60s"], capture_output=True, text=True, timeout=120)
    assert tail.returncode == 0 and len(tail.stdout.strip().splitlines()) == 4, tail.stderr[-2000:]
    rejects = [r for r in expected["rejects"] if r["reason"] == "out_of_domain"]
    assert rejects and all(r["detail"].startswith("statistic screen:") for r in rejects)
    dead = job.wait_records("dead_letters", len(expected["rejects"]))
    assert sorted(d["detail"] for d in dead if d["reason"] == "out_of_domain") == \
        sorted(r["detail"] for r in rejects)


def test_two_statistics_after_a_kill_and_a_restore(streaming_job: Any) -> None:
    """SIGKILL mid-backlog, restore from the latest checkpoint: both statistics' topics hold every
    slot once, equal to the replay (every record any reader sees, aborted ones included, the same
    bytes per slot), and the audits pass."""
    slots = 24
    job = statistics_job(streaming_job, "PBA", {"flink": {"checkpoint_interval": "300ms"}})
    events, requirements = generate(job.folder, users=30, slots=slots, w=5)
    two_valued(events)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    statistic_releases(job, "screen", 5)
    job.stop()  # SIGKILL: no savepoint, open transactions left behind
    job.start(seed=SEED, restore="latest")
    check_statistics_equal_replay(job, events, requirements, slots, False)
