"""The release topic as an analyst reads it (jobs/offline/release_topic.py): each slot once or in
byte-identical copies, whatever became of the transactions that wrote them. The messages here are
built by hand, as a read_uncommitted consumer gives them (tests/integration/test_release_topic_audit.py
reads them from a real broker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.files import write_synthetic
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.release_topic import (
    RULE,
    TopicRead,
    audit_release_topic,
    distinct_counts,
    redrawn,
    slot_values,
)
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.kafka_io import Message
from pwevent.jobs.streaming.settings import load_settings

TOPIC = "r"


def message(slot: int | str, release: dict[str, Any], offset: int) -> Message:
    return Message(TOPIC, 0, offset, str(slot).encode(), json.dumps(release, sort_keys=True).encode(), 0)


def release(slot: int, counts: list[int], kind: str = "publish") -> dict[str, Any]:
    return {"slot": slot, "kind": kind, "counts": counts}


def test_each_slot_once_passes() -> None:
    messages = [message(s, release(s, [s, 1]), s) for s in range(1, 5)]
    assert redrawn(messages) == []
    assert distinct_counts(messages) == {"1": 1, "2": 1, "3": 1, "4": 1}


def test_identical_copies_pass() -> None:
    """An aborted transaction's copy of a slot, sent again byte for byte and committed: one draw."""
    first = [message(s, release(s, [s, 1]), s) for s in range(1, 4)]
    again = [message(s, release(s, [s, 1]), 10 + s) for s in range(2, 4)]
    messages = first + again
    assert redrawn(messages) == []
    assert {key: len(v) for key, v in slot_values(messages).items()} == {"1": 1, "2": 1, "3": 1}


def test_a_slot_drawn_twice_is_a_violation_naming_it_and_both_records() -> None:
    messages = [message(1, release(1, [5, 1]), 0), message(2, release(2, [6, 1]), 1),
                message(2, release(2, [9, -3]), 4), message(3, release(3, [6, 1], "skip"), 5)]
    found = redrawn(messages)
    assert [(v.rule, v.slot) for v in found] == [(RULE, 2)]
    assert "2 different records (partition 0 offset 1, partition 0 offset 4)" in str(found[0])


def test_copies_of_aborted_transactions_count() -> None:
    """Nothing tells the checker which records were committed: a slot that only aborted transactions
    wrote, in two different versions, is drawn twice as surely as one committed twice. A publication
    and a skip of one slot differ too (the decision depends on the noise)."""
    aborted = [message(7, release(7, [1, 2]), 3), message(7, release(7, [3, 0]), 8)]
    decided = [message(8, release(8, [1, 2]), 4), message(8, release(8, [1, 2], "skip"), 9)]
    assert [v.slot for v in redrawn(aborted + decided)] == [7, 8]


def test_only_bytes_count() -> None:
    """The same release serialized in another key order is another record: an analyst compares bytes,
    and the job must send the same ones again."""
    a = Message(TOPIC, 0, 0, b"1", b'{"counts": [1], "slot": 1}', 0)
    b = Message(TOPIC, 0, 1, b"1", b'{"slot": 1, "counts": [1]}', 0)
    assert [v.slot for v in redrawn([a, b])] == [1]


def test_a_key_that_is_not_a_slot_is_named() -> None:
    found = redrawn([Message(TOPIC, 0, 0, b"x", b"1", 0), Message(TOPIC, 0, 1, b"x", b"2", 0)])
    assert [(v.slot, v.detail.split(":")[0]) for v in found] == [(0, "key 'x'")]


@pytest.fixture
def replayed(tmp_path: Path) -> dict[str, Any]:
    """A seeded replay of a small stream: its configuration, input files and releases as topic messages."""
    config_path = tmp_path / "run.yaml"
    config_path.write_text("mechanism: PBD\nslot: 60s\norigin: 2024-01-01T00:00:00Z\ndomain: {type: binary}\n"
                           "noise: numpy-fast\ncaps: {max_w: 50}\n"
                           "kafka: {bootstrap: 127.0.0.1:9, topics: {releases: r}}\n")
    config, settings = load_settings(str(config_path))
    events, requirements = write_synthetic(SyntheticStream("Sin", 12, 8, 3), str(tmp_path / "data"), 0.6, 5,
                                           60_000, False, types=2, change_every=4)
    releases, spend = tmp_path / "releases.jsonl", tmp_path / "spend.jsonl"
    run_replay(config, str(events), str(requirements), str(releases), str(spend), seed=1)
    lines = releases.read_text().splitlines()
    messages = [Message(TOPIC, 0, n, str(json.loads(line)["slot"]).encode(), line.encode(), 0)
                for n, line in enumerate(lines)]
    return {"config": config, "kafka": settings.kafka, "path": str(config_path), "requirements": str(requirements),
            "spend": str(spend), "messages": messages}


def test_the_topic_audit_checks_the_committed_releases_against_the_spend_log(replayed: dict[str, Any]) -> None:
    messages = replayed["messages"]
    slot = json.loads(messages[3].value)
    other = {**slot, "counts": [c + 1 for c in slot["counts"]]}
    aborted = Message(TOPIC, 0, 99, messages[3].key, json.dumps(other).encode(), 0)
    args = (replayed["kafka"], replayed["config"], replayed["spend"], replayed["requirements"])

    clean = audit_release_topic(*args, read=TopicRead(TOPIC, (*messages, messages[3]), tuple(messages)))
    assert clean.ok and clean.report.skipped is None, clean.render()
    assert f"{len(messages) + 1} records read_uncommitted ({len(messages)} committed)" in clean.render()

    seen = audit_release_topic(*args, read=TopicRead(TOPIC, (*messages, aborted), tuple(messages)))
    assert seen.report.rules() == {RULE} and [v.slot for v in seen.report.violations] == [slot["slot"]]

    # the committed releases are what the spend log is audited against: a changed one is found (slot 4
    # of this replay is a skip, which repeats slot 3's counts)
    assert slot["kind"] == "skip"
    tampered = (*messages[:3], aborted, *messages[4:])
    assert audit_release_topic(*args, read=TopicRead(TOPIC, tampered, tampered)).report.rules() == {"repeat_changed"}

    alone = audit_release_topic(replayed["kafka"], replayed["config"], read=TopicRead(TOPIC, tuple(messages), ()))
    assert alone.ok and alone.report.skipped and "NOT CHECKED" in alone.render()


def test_releases_after_the_spend_logs_last_slot_are_left_to_a_later_audit(replayed: dict[str, Any]) -> None:
    """A running job releases while the auditor reads: the spend log (read first) ends at slot 8, the
    topic (read after it) holds slot 9 too. The audit checks the releases the log covers, says how many
    it left, and still finds a redrawn later slot; a log missing a slot it does cover fails."""
    messages = replayed["messages"]
    last = json.loads(messages[-1].value)
    newer = {**last, "slot": last["slot"] + 1}
    later = Message(TOPIC, 0, 50, str(newer["slot"]).encode(), json.dumps(newer).encode(), 0)
    args = (replayed["kafka"], replayed["config"], replayed["spend"], replayed["requirements"])
    topic = (*messages, later)
    audit = audit_release_topic(*args, read=TopicRead(TOPIC, topic, topic))
    assert audit.ok, audit.render()
    assert f"1 committed releases after slot {last['slot']}, the spend log's last" in audit.render()
    redrawn_later = Message(TOPIC, 0, 51, later.key, json.dumps({**newer, "counts": [9, 9]}).encode(), 0)
    seen = audit_release_topic(*args, read=TopicRead(TOPIC, (*topic, redrawn_later), topic))
    assert seen.report.rules() == {RULE}, seen.render()
    spend = Path(replayed["spend"])
    spend.write_text("".join(line + "\n" for line in spend.read_text().splitlines()
                             if json.loads(line).get("slot") != last["slot"] - 1))
    assert not audit_release_topic(*args, read=TopicRead(TOPIC, topic, topic)).ok


def test_cli_usage(replayed: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--release-topic"]) == 2
    assert "--release-topic reads the releases from the topic of --config" in capsys.readouterr().err
    assert main(["audit", "--release-topic", "--config", replayed["path"], "--releases", replayed["spend"]]) == 2
    assert main(["audit", "--release-topic", "--config", replayed["path"], "--requirements", "x"]) == 2
    assert "needs --spend-log and --requirements together" in capsys.readouterr().err
    assert main(["audit"]) == 2
    assert "--spend-log is required" in capsys.readouterr().err
