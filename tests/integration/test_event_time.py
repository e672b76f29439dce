"""Event time in the streaming job (docs/streaming.md, "Time"): per-partition watermarks, a read
requirements backlog, far-ahead and invalid records that move no time, a burst after idleness. Each
test runs the real job (PyFlink mini-cluster, local broker) and compares it with `pwevent replay`."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.slots import parse_duration_ms
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SCHEDULE,
    SEED,
    StreamingJob,
    check_equals_replay,
    generate,
    make_job,
    replay,
    slot_time,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def end_in_an_aborted_transaction(job: StreamingJob) -> None:
    """The requirements topic's last offsets: a registration of a user nobody else knows, in a
    transaction that is aborted, then the abort marker (what an exactly-once writer leaves behind)."""
    client = producer(job.kafka, transactional_id=f"{job.topics['requirements']}-writer")
    try:
        client.init_transactions()
        client.begin_transaction()
        client.send(job.topics["requirements"], key=b"intruder", value=json.dumps(
            {"user": "intruder", "time": "2024-01-01T00:00:00Z", "w": 40, "epsilon": 0.6}).encode())
        client.flush()
        client.abort_transaction()
    finally:
        client.close()


@pytest.mark.parametrize("tail", ["records", "aborted-transaction"])
def test_a_read_requirements_backlog_holds_no_slot_back(streaming_job: Any, tail: str) -> None:
    """The requirements partition stops holding event time back once it has read what it held when
    the job started (docs/streaming.md, "Time"), not after flink.source_idleness: with an idleness
    of an hour, every slot is still released, equal to the replay. (Before, the quiet partition held
    the events at slot 1 for the whole idleness: 10 s of every backlog start with the default.)
    "aborted-transaction": the topic ends in an aborted record and its marker, offsets no reader is
    given; the last committed record still counts as the end of the backlog (before, a transaction
    marker at the end disabled the rule), and the aborted registration stays unseen."""
    slots = 6
    job = make_job(streaming_job, "PBD", {"flink": {"source_idleness": "1h"}})
    events, requirements = generate(job.folder, users=20, slots=slots)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    if tail == "aborted-transaction":
        end_in_an_aborted_transaction(job)
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, slots)


def send_partition(job: StreamingJob, events: str, partition: int) -> None:
    """The events of the users of one partition (u0, u2, ... -> 0; u1, u3, ... -> 1), in file order."""
    client = producer(job.kafka)
    for line in Path(events).read_bytes().splitlines():
        if int(json.loads(line)["user"].removeprefix("u")) % 2 == partition:
            client.send(job.topics["events"], value=line, partition=partition)
    client.flush()
    client.close()


@pytest.mark.parametrize("late_start", [False, True], ids=["before-start", "after-start"])
def test_a_partition_read_ahead_drops_nothing(streaming_job: Any, late_start: bool) -> None:
    """All of partition 0 is written before any of partition 1: per-partition watermarks at the
    source keep partition 1's events on time, so nothing is late and the releases equal the replay.
    after-start: partition 1 stays empty until the job has run longer than `source_idleness` (a
    first fetch slowed by start-up or load looks the same): a partition that has never given a
    record does not go idle before `source_start_grace`, so partition 0 closes no slot without it."""
    slots = 10
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=40, slots=slots)
    produce_files(job.kafka, job.config, "/dev/null", requirements, 0.0)
    send_partition(job, events, 0)
    if not late_start:
        send_partition(job, events, 1)
    job.start(seed=SEED)
    if late_start:
        time.sleep(3 * parse_duration_ms(SCHEDULE["flink"]["source_idleness"]) / 1000)
        send_partition(job, events, 1)
    check_equals_replay(job, events, requirements, slots)
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert [d for d in dead if d["reason"] == "late"] == []


def test_an_event_far_ahead_is_a_dead_letter_and_closes_no_slot(streaming_job: Any) -> None:
    """One event 300 slots ahead in the middle of a backlog: a too_far_ahead dead letter; the slots
    after the stream's end are not released and the releases equal the replay of the other records."""
    slots = 10
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=30, slots=slots)
    expected = replay(job, events, requirements, slots)
    lines = Path(events).read_text().splitlines()
    far = json.dumps({"user": "u1", "time": slot_time(5 + 300), "value": 1})
    Path(events).write_text("\n".join(lines[: len(lines) // 2] + [far] + lines[len(lines) // 2:]) + "\n")
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=slots)
    client = producer(job.kafka)  # produce_files stops at the last slot: the far event goes by hand
    client.send(job.topics["events"], value=far.encode(), key=b"u1")
    client.flush()
    client.close()
    job.start(seed=SEED)
    releases = check_equals_replay(job, events, requirements, slots, expected)
    # Slot 10 closed once its partition was quiet, so the far event had been read: a release it caused
    # would be committed by the second checkpoint from now at the latest.
    job.wait_checkpoints(2)
    assert max(m.json()["slot"] for m in job.read("releases")) <= slots
    assert len({r["slot"] for r in releases}) == len(releases)
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert [d["reason"] for d in dead] == ["too_far_ahead"]
    assert json.loads(dead[0]["original"]) == json.loads(far)


def test_events_read_before_their_users_registrations_are_judged_as_if_registered_first(streaming_job: Any) -> None:
    """The requirements' reader is far behind the events' (20,000 registrations of users without
    events come first in its topic): every event reaches ValidTime before its user's registration.
    No event is judged before the requirements' backlog is registered (docs/streaming.md, "Time"),
    so the releases equal the replay and a lone far-ahead event is still a too_far_ahead dead
    letter (judged as it passed, it met a lead guard that had seen no event of a known user)."""
    slots = 10
    job = make_job(streaming_job, "PBD")
    events, real = generate(job.folder, users=30, slots=slots)
    requirements = job.folder / "requirements-after-others.jsonl"
    first = json.loads(Path(real).read_text().splitlines()[0])
    with requirements.open("w") as out:
        for n in range(20_000):
            out.write(json.dumps({**first, "user": f"other{n}"}) + "\n")
        out.write(Path(real).read_text())
    expected = replay(job, events, str(requirements), slots)
    produce_files(job.kafka, job.config, events, str(requirements), 0.0, last_slot=slots)
    far = json.dumps({"user": "u1", "time": slot_time(5 + 300), "value": 1})
    client = producer(job.kafka)
    client.send(job.topics["events"], value=far.encode(), key=b"u1")
    client.flush()
    client.close()
    job.start(seed=SEED)
    check_equals_replay(job, events, str(requirements), slots, expected)
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert [d["reason"] for d in dead] == ["too_far_ahead"]
    assert json.loads(dead[0]["original"]) == json.loads(far)


def _invalid_but_timed(slot: int) -> list[bytes]:
    """Records the parser refuses whose time field reads, all timed 50 minutes into `slot` (within
    `flink.max_lead` of the stream): out of the domain, and a repeated time key (the JVM's reader
    takes the last occurrence; parse_event refuses the record). (An event of a user without a
    requirement is a valid record: it moves time, in the replay as in the job; docs/streaming.md,
    "Which records move time".)"""
    far = slot_time(slot, 50 * 60_000)
    return [json.dumps({"user": "u1", "time": far, "value": -1}).encode(),
            b'{"user": "u2", "time": %d, "value": 1, "time": %d}' % (slot_time(slot, 5), far)]


def test_only_valid_records_move_event_time(streaming_job: Any) -> None:
    """Issue 18's reproduction: 200 users, a backlog of slots 1-5, then live slots 6-11 (1.5 s apart);
    before slot 9's events, on every events partition, records the replay rejects but whose time
    reads, 50 minutes ahead. They move no event time: the releases equal the replay of the valid
    records (which is also the replay of the whole input), no valid event is `late`, and no slot
    after the last valid one is released."""
    slots, live_from, bad_at = 11, 6, 9
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=200, slots=slots)
    expected = replay(job, events, requirements, slots)
    bad = [record for _ in range(2) for record in _invalid_but_timed(bad_at)]
    mixed = job.folder / "mixed-events.jsonl"
    mixed.write_text(Path(events).read_text() + "".join(f"{record.decode()}\n" for record in bad))
    whole = replay(job, str(mixed), requirements, slots)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=live_from - 1)
    job.start(seed=SEED)
    client = producer(job.kafka)

    def before(slot: int, _: float) -> None:
        if slot == bad_at:
            for partition in (0, 1):
                for record in _invalid_but_timed(bad_at):
                    client.send(job.topics["events"], value=record, partition=partition)
            client.flush()

    produce_files(job.kafka, job.config, events, requirements, 1.5, first_slot=live_from, last_slot=slots,
                  before_slot=before)
    client.close()
    releases = check_equals_replay(job, events, requirements, slots, expected)
    assert {r["slot"] for r in releases} == set(range(1, slots + 1))
    dead = job.wait_records("dead_letters", 4)
    reasons = Counter(d["reason"] for d in dead)
    assert reasons == Counter({"out_of_domain": 2, "duplicate_key": 2}), reasons
    assert max(m.json()["slot"] for m in job.read("releases")) == slots


def test_only_valid_requirement_records_move_event_time(streaming_job: Any) -> None:
    """The same for the requirements topic: once the backlog of slots 1-5 is released and the events
    have gone idle (the requirements' time alone then drives Membership and the class join),
    requirement records the replay rejects but whose time reads, 50 minutes ahead: a window of
    w = 0, one over the `max_w` cap and a repeated key; and a valid one two days past the wall clock,
    which the requirements' lead guard does not believe (`too_far_ahead`, from Membership). They are
    dead letters and move no event time: while checkpoints spanning more than `source_idleness`
    complete, no slot after the last valid one is released, and the releases equal the replay of the
    valid records."""
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=60, slots=5)
    expected = replay(job, events, requirements, 5)
    assert len(expected["releases"]) == 5
    far = slot_time(5, 50 * 60_000)
    bad = [json.dumps({"user": "u1", "time": far, "w": 0, "epsilon": 1.0}).encode(),
           json.dumps({"user": "u2", "time": far, "w": 100_000, "epsilon": 1.0}).encode(),
           b'{"user": "u3", "time": %d, "w": 3, "epsilon": 1.0, "w": 4}' % far]
    mixed = job.folder / "mixed-requirements.jsonl"
    mixed.write_text(Path(requirements).read_text() + "".join(f"{record.decode()}\n" for record in bad))
    whole = replay(job, events, str(mixed), 5)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, 5, expected)
    future = json.dumps({"user": "zz", "time": int(time.time() * 1000) + 2 * 86_400_000, "w": 3, "epsilon": 1.0})
    client = producer(job.kafka)
    for record in [*bad, future.encode()]:
        client.send(job.topics["requirements"], value=record)
    client.flush()
    client.close()
    dead = job.wait_records("dead_letters", len(bad) + 1, keep=lambda d: d.get("source") == "requirements")
    assert Counter(d["reason"] for d in dead) == Counter({"invalid_requirement": 2, "duplicate_key": 1,
                                                         "too_far_ahead": 1}), dead
    idleness_ms = parse_duration_ms(SCHEDULE["flink"]["source_idleness"], "source_idleness")
    job.wait_checkpoints(idleness_ms // 400 + 5)  # 400 ms apart: the requirements source goes idle meanwhile
    releases = [m.json() for m in job.read("releases")]
    assert max(r["slot"] for r in releases) == 5, sorted({r["slot"] for r in releases})[:12]


def test_a_burst_after_the_events_went_idle_counts_every_event(streaming_job: Any) -> None:
    """The backlog of slots 1-5 released, the events idle for longer than `source_idleness`, then
    slots 6-8 sent at once; idle again, then slots 9-11 at once. When the events come back, every
    branch into the class join and the Population is active again before any of them carries a
    watermark past the idle point (the events' ValidTime never goes idle: it follows the
    requirements' valid time instead), so each slot is decided after its counts: the releases equal
    the replay and no event is a dead letter (docs/streaming.md, "Time")."""
    slots = 11
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=60, slots=slots)
    expected = replay(job, events, requirements, slots)
    idleness_ms = parse_duration_ms(SCHEDULE["flink"]["source_idleness"], "source_idleness")
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=5)
    job.start(seed=SEED)
    for first, last in ((6, 8), (9, 11)):
        job.wait_releases(first - 1)
        job.wait_checkpoints(idleness_ms // 400 + 5)  # 400 ms apart: the events go idle meanwhile
        produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=first, last_slot=last)
    check_equals_replay(job, events, requirements, slots, expected)
    assert job.read("dead_letters") == []



def test_invalid_requirement_records_far_ahead_are_dead_letters_at_once(streaming_job: Any) -> None:
    """Three invalid requirement records 50 slots (minutes) ahead of a live stream: a dynamic
    requirement under PBD (it parses, but no ledger can run it: Membership refuses it on arrival,
    whatever the user declared before), a duplicate key and a missing epsilon (the reference
    parser's). While the events go on, slot by slot,
    far from the records' slot, all three become dead letters; the releases equal the replay."""
    slots, live_from = 30, 7
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=20, slots=slots)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=live_from - 1)
    job.start(seed=SEED)
    job.wait_releases(live_from - 2, timeout=120)
    ahead = slot_time(live_from + 50)
    records = [json.dumps({"user": "u1", "time": ahead, "backward": {"w": 1, "epsilon": 10.0},
                           "forward": {"w": 6, "epsilon": 1.0}}),
               f'{{"user": "u2", "time": {ahead}, "w": 5, "w": 6, "epsilon": 1.0}}',
               json.dumps({"user": "u3", "time": ahead, "w": 5})]
    client = producer(job.kafka)
    for record in records:
        client.send(job.topics["requirements"], value=record.encode(), key=b"u")
    client.flush()
    client.close()
    seen: list[int] = []  # the live slot being sent when the three dead letters were first read

    def dead_letters_yet(slot: int, _: float) -> None:
        if not seen and len(job.read("dead_letters", idle_s=0.3)) >= 3:
            seen.append(slot)

    produce_files(job.kafka, job.config, events, requirements, 0.5, first_slot=live_from, on_slot=dead_letters_yet)
    assert seen, "no dead letters while the events went on (the records waited for their slot)"
    print(f"\nthe three dead letters were read while slot {seen[0]} was sent")
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert sorted(d["original"] for d in dead) == sorted(records), dead
    assert {d["original"]: d["reason"] for d in dead}[records[0]] == "invalid_requirement"
    check_equals_replay(job, events, requirements, slots - 1)
