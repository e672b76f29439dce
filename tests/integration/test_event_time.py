"""Event time in the streaming job (docs/streaming.md, "Time"): per-partition event time over a
backlog, a read requirements backlog, far-ahead and invalid records that move no time, the release
schedule after the backlog, and the trailing slots the job and the replay release alike. Each test
runs the real job (PyFlink mini-cluster, local broker) and compares it with `pwevent replay` through
the same public horizon."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.files import iso
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.offline.audit import AuditInputs, audit_records
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.produce import produce_files
from pwevent.state.spend_log import last_logged_slot
from tests.integration.conftest import (
    SEED,
    SLOT_MS,
    TEST_ORIGIN_MS,
    StreamingJob,
    ahead_origin,
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
            {"user": "intruder", "time": slot_time(1), "w": 40, "epsilon": 0.6}).encode())
        client.flush()
        client.abort_transaction()
    finally:
        client.close()


@pytest.mark.parametrize("tail", ["records", "aborted-transaction"])
def test_a_read_requirements_backlog_holds_no_slot_back(streaming_job: Any, tail: str) -> None:
    """The requirements partition stops holding event time back once it has read what it held when
    the job started (docs/streaming.md, "Time"): every slot is released, equal to the replay.
    "aborted-transaction": the topic ends in an aborted record and its marker, offsets no reader is
    given; the last committed record still counts as the end of the backlog, and the aborted
    registration stays unseen."""
    slots = 6
    job = make_job(streaming_job, "PBD")
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


def test_a_partition_read_ahead_drops_nothing(streaming_job: Any) -> None:
    """All of partition 0 is written before any of partition 1: each partition's event time holds
    the others back until it has read its backlog, so nothing is late and the releases equal the
    replay."""
    slots = 10
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=40, slots=slots)
    produce_files(job.kafka, job.config, "/dev/null", requirements, 0.0)
    send_partition(job, events, 0)
    send_partition(job, events, 1)
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, slots)
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert [d for d in dead if d["reason"] == "late"] == []


def test_an_event_far_ahead_is_a_dead_letter_and_closes_no_slot(streaming_job: Any) -> None:
    """One event 300 slots ahead in the middle of a backlog (hours past the clock): a too_far_ahead
    dead letter; no slot past the release schedule is released, and the releases equal the replay
    of the other records."""
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
    job.wait_checkpoints(2)
    scheduled = (time.time() * 1000 - TEST_ORIGIN_MS) // SLOT_MS  # the slots whose end the clock has passed
    assert max(m.json()["slot"] for m in job.read("releases")) <= scheduled
    assert len({r["slot"] for r in releases}) == len(releases)
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert [d["reason"] for d in dead] == [Reason.TOO_FAR_AHEAD]
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
    assert [d["reason"] for d in dead] == [Reason.TOO_FAR_AHEAD]
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
    """Issue 18's reproduction, in a backlog: 200 users over slots 1-11; before slot 9's events, on
    every events partition, records the parser refuses but whose time reads, 50 minutes ahead. They
    move no event time (had they, slots 9-58 would have closed before slot 9's events came): the
    releases equal the replay of the valid records (which is also the replay of the whole input) and
    no valid event is `late`."""
    slots, bad_at = 11, 9
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=200, slots=slots)
    expected = replay(job, events, requirements, slots)
    bad = [record for _ in range(2) for record in _invalid_but_timed(bad_at)]
    mixed = job.folder / "mixed-events.jsonl"
    mixed.write_text(Path(events).read_text() + "".join(f"{record.decode()}\n" for record in bad))
    whole = replay(job, str(mixed), requirements, slots)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]
    client = producer(job.kafka)

    def before(slot: int, _: float) -> None:
        if slot == bad_at:
            for partition in (0, 1):
                for record in _invalid_but_timed(bad_at):
                    client.send(job.topics["events"], value=record, partition=partition)
            client.flush()

    produce_files(job.kafka, job.config, events, requirements, 0.0, before_slot=before)
    client.close()
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, slots, expected)
    dead = job.wait_records("dead_letters", 4)
    reasons = Counter(d["reason"] for d in dead)
    assert reasons == Counter({"out_of_domain": 2, "duplicate_key": 2}), reasons


def test_only_valid_requirement_records_move_event_time(streaming_job: Any) -> None:
    """The same for the requirements topic, in a backlog under DPBD (requirement changes at slots 5
    and 9): before slot 5's records, requirement records the parser or the rules refuse whose time
    reads, 50 minutes into slot 2 (a window of w = 0, one over the `max_w` cap, a repeated key), and a
    valid one two days past the wall clock, which the requirements' lead guard does not believe
    (`too_far_ahead`, from Membership). They are dead letters and move no event time (had they, slot
    5's changes would have been `late`): the releases equal the replay of the valid records."""
    slots = 10
    job = make_job(streaming_job, "DPBD")
    events, requirements = generate(job.folder, users=60, slots=slots, dynamic=True)
    expected = replay(job, events, requirements, slots)
    far = slot_time(2, 50 * 60_000)
    bad = [json.dumps({"user": "u1", "time": far, "w": 0, "epsilon": 1.0}).encode(),
           json.dumps({"user": "u2", "time": far, "w": 100_000, "epsilon": 1.0}).encode(),
           b'{"user": "u3", "time": %d, "w": 3, "epsilon": 1.0, "w": 4}' % far]
    future = json.dumps({"user": "zz", "time": int(time.time() * 1000) + 2 * 86_400_000,
                         "backward": {"w": 1, "epsilon": 10.0}, "forward": {"w": 40, "epsilon": 1.0}}).encode()
    client = producer(job.kafka)

    def before(slot: int, _: float) -> None:
        if slot == 5:
            for record in [*bad, future]:
                client.send(job.topics["requirements"], value=record)
            client.flush()

    produce_files(job.kafka, job.config, events, requirements, 0.0, before_slot=before)
    client.close()
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, slots, expected)
    dead = job.wait_records("dead_letters", len(bad) + 1, keep=lambda d: d.get("source") == "requirements")
    assert Counter(d["reason"] for d in dead) == Counter({"invalid_requirement": 2, "duplicate_key": 1,
                                                         Reason.TOO_FAR_AHEAD: 1}), dead
    assert [m.json() for m in job.read("dead_letters") if m.json()["reason"] == "late"] == []


@pytest.mark.parametrize("kill", [False, True], ids=["straight", "killed"])
def test_a_trailing_requirement_slot_is_released_by_job_and_replay(streaming_job: Any, kill: bool) -> None:
    """Issue 40's reproduction: the last event is in slot 6, a requirement change in slot 8 (DPBD).
    The replay through slot 8 and the job release slots 1-8 alike (before, the job never released
    slot 8); "killed": the job is killed (SIGKILL) after its first releases and restored from its
    latest checkpoint, and still releases each of slots 1-8 once, equal to the replay."""
    job = make_job(streaming_job, "DPBD")
    events, requirements = generate(job.folder, users=30, slots=6, dynamic=True)
    change = json.loads(Path(requirements).read_text().splitlines()[-1])
    with open(requirements, "a") as out:
        out.write(json.dumps({**change, "user": "u0", "time": slot_time(8, 5_000),
                              "forward": {"w": 80, "epsilon": 1.0}}) + "\n")
    expected = replay(job, events, requirements, 8)
    assert len(expected["releases"]) == 8
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    if kill:
        job.wait_releases(2, timeout=180)
        job.stop()
        job.start(seed=SEED, restore="latest")
    check_equals_replay(job, events, requirements, 8, expected)


def test_invalid_requirement_records_far_ahead_are_dead_letters_at_once(streaming_job: Any) -> None:
    """Three invalid requirement records 50 slots (minutes) ahead of the stream, sent once its
    backlog is released: a dynamic requirement under PBD (it parses, but no ledger can run it:
    Membership refuses it on arrival, whatever the user declared before), a duplicate key and a
    missing epsilon (the reference parser's). The stream lies ahead of the clock (`ahead_origin`), so
    neither event time nor the schedule reaches the records' slot while the test runs: all three
    become dead letters without any further input; the releases equal the replay."""
    slots = 6
    origin = ahead_origin()
    job = make_job(streaming_job, "PBD", {"origin": iso(origin)})
    events, requirements = generate(job.folder, users=20, slots=slots, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, slots - 1)
    ahead = origin + 50 * SLOT_MS
    records = [json.dumps({"user": "u1", "time": ahead, "backward": {"w": 1, "epsilon": 10.0},
                           "forward": {"w": 6, "epsilon": 1.0}}),
               f'{{"user": "u2", "time": {ahead}, "w": 5, "w": 6, "epsilon": 1.0}}',
               json.dumps({"user": "u3", "time": ahead, "w": 5})]
    client = producer(job.kafka)
    for record in records:
        client.send(job.topics["requirements"], value=record.encode(), key=b"u")
    client.flush()
    client.close()
    dead = job.wait_records("dead_letters", 3)
    assert sorted(d["original"] for d in dead) == sorted(records), dead
    assert {d["original"]: d["reason"] for d in dead}[records[0]] == "invalid_requirement"


def test_a_job_that_reads_no_record_releases_on_the_schedule(streaming_job: Any) -> None:
    """Empty topics, 2 s slots, `release_delay` 1 s, slot 1 beginning after the job runs: slots 1-3
    are released once each, no earlier than their end plus the delay (the release record's Kafka
    timestamp), with nobody counted. Before the Population's start row, a job released nothing until
    its first record, so whether and when the first release came told that someone had sent
    something (issue 40, docs/streaming.md "Time"). A registration for slot 1 sent then is a `late`
    dead letter with the record's SHA-256; the full audit takes it for a declaration the job did not
    honour, and with the dead letters passes, naming it (docs/mechanisms.md, "Records refused as
    late")."""
    slot_ms, delay_ms = 2_000, 1_000
    origin = -(-(int(time.time() * 1000) + 40_000) // slot_ms) * slot_ms
    job = make_job(streaming_job, "PBD", {"slot": "2s", "origin": iso(origin),
                                          "flink": {"release_delay": f"{delay_ms // 1000}s"}})
    job.start(seed=SEED)
    job.wait_releases(3, timeout=120)
    messages = job.read("releases")
    slots = Counter(m.json()["slot"] for m in messages)
    assert [slots[s] for s in (1, 2, 3)] == [1, 1, 1], slots
    for message in messages:
        release = message.json()
        due = origin + release["slot"] * slot_ms + delay_ms
        assert message.timestamp_ms >= due, (release["slot"], message.timestamp_ms - due)
        assert release["population"] == 0, release
    assert job.read("dead_letters") == []
    registration = json.dumps({"user": "latecomer", "time": origin + 1, "w": 5, "epsilon": 1.0}).encode()
    client = producer(job.kafka)  # a registration for slot 1, decided by now
    client.send(job.topics["requirements"], value=registration, key=b"latecomer")
    client.flush()
    client.close()
    dead = job.wait_records("dead_letters", 1)
    assert [(d["reason"], d["original_sha256"]) for d in dead] == [("late", hashlib.sha256(registration).hexdigest())]
    records = [m.json() for m in job.read("audit")]  # the log first: the job goes on releasing
    through = last_logged_slot(records)
    decided = [r for r in (m.json() for m in job.read("releases")) if r["slot"] <= through]
    lines = [("requirements:1", registration)]
    assert audit_records(records, AuditInputs.build(lines, decided, job.config)).rules() == {"missing_member"}
    report = audit_records(records, AuditInputs.build(lines, decided, job.config, dead_letters=dead))
    assert report.ok and "1 requirement records were refused as late" in report.render(), report.render()
