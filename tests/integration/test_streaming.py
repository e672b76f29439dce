"""The streaming job against a real Kafka broker and PyFlink's mini-cluster (docs/streaming.md).

Off the happy path on purpose: the whole input is in the topics before the job starts and is read at
full speed (no pacing), while a process burns a core beside the job; the job must still equal
`pwevent replay` with the same seed, slot by slot and line by line of the spend log, and the full
audit (users against the requirements they declared, ledgers against the releases) must pass.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from pwevent.jobs.common.files import DEMO_ORIGIN_MS
from pwevent.jobs.common.slots import parse_duration_ms, parse_time_ms
from pwevent.jobs.streaming.kafka_io import producer, read_to_end, read_topic
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from pwevent.operators.registry import REGISTRY
from tests.corpus import poison_records
from tests.integration.conftest import (
    SEED,
    SLOT_MS,
    StreamingJob,
    check_equals_replay,
    check_releases,
    generate,
    replay,
    schema,
)
from tests.integration.test_metrics import scrape, total

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

#: Baselines run every user at one global requirement; the synthetic users' own are looser (w 40, E >= 0.6).
BASELINE = {"window": 40, "epsilon": 0.6}
FAST_CLOSE = {"flink": {"close_after": "1s", "source_idleness": "3s"}}
#: Adaptive re-decides from a short evidence window and a loose drift test, so that 12 slots see it
#: switch family (even spending to absorption).
QUICK_SWITCH = {"adaptive": {"evidence": 4, "static_drift": 100.0}}


def slot_time(slot: int, offset_ms: int = 0) -> int:
    return DEMO_ORIGIN_MS + (slot - 1) * SLOT_MS + offset_ms


@contextmanager
def cpu_burner() -> Iterator[None]:
    """A process that keeps one core busy for the duration (the machine has two)."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        burner.send_signal(signal.SIGKILL)
        burner.wait(timeout=10)


def make_job(streaming_job: Any, mechanism: str, extra: dict[str, Any] | None = None) -> StreamingJob:
    entry = REGISTRY.get(mechanism)
    own = {k: v for k, v in {**BASELINE, **QUICK_SWITCH}.items() if k in entry.config_keys}
    merged: dict[str, Any] = {**FAST_CLOSE, **own}
    for key, value in (extra or {}).items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return streaming_job(mechanism, merged)


#: One mechanism of each kind the job's graph treats differently: fixed personalized requirements
#: (PBA: publish, skip and nullify), dynamic ones (DPBA), a baseline's global requirement with
#: sampling (Sample) and the default (Adaptive, which switches family here). Which of a kind is
#: chosen only changes the Engine's policy, the same pure class in the job's Population as in the
#: replay: tests/jobs/test_engine_hosts.py shows for every mechanism that the Population's class
#: path gives the replay's releases and spend log.
ONE_OF_EACH_KIND = ("PBA", "DPBA", "Sample", "Adaptive")


@pytest.mark.parametrize("mechanism", ONE_OF_EACH_KIND)
def test_job_equals_replay_from_a_backlog_on_a_busy_machine(streaming_job: Any, mechanism: str) -> None:
    """The whole input waits in the topics; the job reads it at full speed beside a CPU burner."""
    dynamic = REGISTRY.get(mechanism).dynamic
    slots = 12
    job = make_job(streaming_job, mechanism)
    events, requirements = generate(job.folder, users=40, slots=slots, dynamic=dynamic)
    if dynamic:  # u0 declares a backward budget below what its window already spent: projected, reported
        with open(requirements, "a") as handle:
            handle.write(json.dumps({"user": "u0", "time": slot_time(7), "backward": {"w": 3, "epsilon": 0.001},
                                     "forward": {"w": 40, "epsilon": 1.0}}) + "\n")
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    with cpu_burner():
        job.start(seed=SEED)
        expected = replay(job, events, requirements)
        check_equals_replay(job, events, requirements, slots, expected)
    if mechanism == "Adaptive":  # it switches family within the 12 slots, in the job as in the replay
        assert {"Uniform", "PBA"} <= {r["family"] for r in expected["releases"]}
    dead = job.wait_records("dead_letters", len(expected["rejects"]))
    for record in dead:
        schema("dead-letter").validate(record)
    assert Counter(r["reason"] for r in dead) == Counter(r["reason"] for r in expected["rejects"])


def test_an_events_topic_alone_with_a_default_requirement(streaming_job: Any) -> None:
    """`default_requirement`: 30 of 40 users never declare anything, 5 declare from slot 5 on (a
    change of the default: a fork), 5 from slot 1. From a backlog beside a CPU burner the job equals
    the replay and the full audit (which recomputes the default registrations) passes."""
    slots = 12
    default = {"backward": {"w": 1, "epsilon": 10.0}, "forward": {"w": 8, "epsilon": 1.0}}
    job = make_job(streaming_job, "DPBA", {"default_requirement": default})
    events, requirements = generate(job.folder, users=40, slots=slots, dynamic=True)
    kept = []
    for line in Path(requirements).read_text().splitlines():
        record = json.loads(line)
        user = int(record["user"].removeprefix("u"))
        if user < 5 or (user < 10 and parse_time_ms(record["time"], "time") >= slot_time(5)):
            kept.append(line)
    Path(requirements).write_text("".join(f"{line}\n" for line in kept))
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    with cpu_burner():
        job.start(seed=SEED)
        expected = replay(job, events, requirements)
        check_equals_replay(job, events, requirements, slots, expected)
    members = {r["user"] for r in expected["spend"] if r.get("record") == "member"}
    assert len(members) == 40 and not [r for r in expected["rejects"] if r["reason"] == "unknown_user"]
    forks = {r["ledger"] for r in expected["spend"] if r.get("record") == "ledger" and r.get("parent")}
    assert forks, "the users declaring from slot 5 fork the default's class"


def test_an_events_topic_without_any_requirement_record_starts_at_once(streaming_job: Any) -> None:
    """`default_requirement` and an empty requirements topic (an events-only job): every user is
    registered by the default, equal to the replay, and the empty topic holds no slot back (its
    partitions held nothing when the job was built, so they are read at once: with a start grace and
    an idleness of an hour every slot is still released)."""
    slots = 6
    job = make_job(streaming_job, "PBD", {"default_requirement": {"w": 8, "epsilon": 1.0},
                                          "flink": {"source_idleness": "1h", "source_start_grace": "1h"}})
    events, requirements = generate(job.folder, users=20, slots=slots)
    Path(requirements).write_text("")
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    expected = replay(job, events, requirements)
    check_equals_replay(job, events, requirements, slots, expected)
    assert len({r["user"] for r in expected["spend"] if r.get("record") == "member"}) == 20


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


def test_kill_and_restore_mid_backlog_longer_than_the_windows(streaming_job: Any) -> None:
    """SIGKILL mid-backlog (30 slots, windows of 5), restore from the latest checkpoint: every slot
    exactly once (read_committed), equal to the replay, spend log equal and audited."""
    slots = 30
    job = make_job(streaming_job, "PBA", {"flink": {"checkpoint_interval": "300ms"}})
    events, requirements = generate(job.folder, users=30, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    with cpu_burner():
        job.start(seed=SEED)
        job.wait_releases(6, timeout=180)
        job.stop()  # SIGKILL: no savepoint, open transactions left behind
        job.start(seed=SEED, restore="latest")
        check_equals_replay(job, events, requirements, slots)
    restored = [line for line in (job.folder / "job-2.log").read_text().splitlines() if "restoring from" in line]
    assert restored and "chk-" in restored[0], restored
    raw = read_topic(job.kafka, job.topics["releases"], committed=False)
    repeated = sum(n - 1 for n in Counter(json.loads(m.value)["slot"] for m in raw).values())
    print(f"\nkill/restore: read_uncommitted sees {len(raw)} releases ({repeated} aborted by the restore)")


def test_a_restore_after_the_whole_input_was_read_closes_the_last_slot(streaming_job: Any) -> None:
    """The first run reads the whole input but cannot close the last slot (close_after off); it is
    killed once its sources' consumer groups have committed every partition's end (which the sources
    do for completed checkpoints only), so the checkpoint it is restored from holds readers at the
    end of every partition. Restored with close_after on, no
    partition gives a record again, and none remembers its latest time: without the restore seed
    (docs/streaming.md, "Time") the last slot was never released. The restore runs with a start grace
    and an idleness of an hour: its readers have nothing left to read (the groups' committed offsets
    are at every partition's end), so no partition waits for either (before, the last slot was not
    released within 600 s)."""
    slots = 8
    job = make_job(streaming_job, "PBA", {"flink": {"close_after": "0", "checkpoint_interval": "300ms",
                                                    "source_start_grace": "2s"}})
    events, requirements = generate(job.folder, users=20, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    job.wait_releases(slots - 1, timeout=240)
    deadline = time.monotonic() + 120  # a guard against a hang, not a measured duration
    while not all(read_to_end(job.kafka, job.topics[role], job.kafka.source_group_id(role), 100)
                  for role in ("events", "requirements")):
        assert job.alive() and time.monotonic() < deadline, job.log_tail()
        time.sleep(0.5)
    job.stop()
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"].update({"close_after": "1s", "source_start_grace": "1h", "source_idleness": "1h"})
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED, restore="latest")
    began = time.monotonic()
    job.wait_releases(slots, timeout=600)
    print(f"\nrestore at the end: the last slot {time.monotonic() - began:.1f} s after the restored job ran")
    check_equals_replay(job, events, requirements, slots)
    assert "readers have nothing left to read" in (job.folder / "job-2.log").read_text()


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
        time.sleep(3 * parse_duration_ms(FAST_CLOSE["flink"]["source_idleness"]) / 1000)
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
    expected = replay(job, events, requirements)
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


def _invalid_but_timed(slot: int) -> list[bytes]:
    """Records the replay rejects whose time field reads, all timed 50 minutes into `slot` (within
    `flink.max_lead` of the stream): out of the domain, a user without a requirement, and a
    repeated time key (the JVM's reader takes the last occurrence; parse_event refuses the record)."""
    far = slot_time(slot, 50 * 60_000)
    return [json.dumps({"user": "u1", "time": far, "value": -1}).encode(),
            json.dumps({"user": "ghost", "time": far, "value": 1}).encode(),
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
    expected = replay(job, events, requirements)
    bad = [record for _ in range(2) for record in _invalid_but_timed(bad_at)]
    mixed = job.folder / "mixed-events.jsonl"
    mixed.write_text(Path(events).read_text() + "".join(f"{record.decode()}\n" for record in bad))
    whole = replay(job, str(mixed), requirements)
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
    assert reasons == Counter({"out_of_domain": 2, "duplicate_key": 2}), reasons  # the ghost's slot never closes
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
    expected = replay(job, events, requirements)
    assert len(expected["releases"]) == 5
    far = slot_time(5, 50 * 60_000)
    bad = [json.dumps({"user": "u1", "time": far, "w": 0, "epsilon": 1.0}).encode(),
           json.dumps({"user": "u2", "time": far, "w": 100_000, "epsilon": 1.0}).encode(),
           b'{"user": "u3", "time": %d, "w": 3, "epsilon": 1.0, "w": 4}' % far]
    mixed = job.folder / "mixed-requirements.jsonl"
    mixed.write_text(Path(requirements).read_text() + "".join(f"{record.decode()}\n" for record in bad))
    whole = replay(job, events, str(mixed))
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
    idleness_ms = parse_duration_ms(FAST_CLOSE["flink"]["source_idleness"], "source_idleness")
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
    expected = replay(job, events, requirements)
    idleness_ms = parse_duration_ms(FAST_CLOSE["flink"]["source_idleness"], "source_idleness")
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=5)
    job.start(seed=SEED)
    for first, last in ((6, 8), (9, 11)):
        job.wait_releases(first - 1)
        job.wait_checkpoints(idleness_ms // 400 + 5)  # 400 ms apart: the events go idle meanwhile
        produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=first, last_slot=last)
    check_equals_replay(job, events, requirements, slots, expected)
    assert job.read("dead_letters") == []


def test_no_second_life_without_state(streaming_job: Any) -> None:
    """A job started without state against a release topic that holds releases is refused by its
    Population (the job fails, `pwevent run` exits 2 naming the slot); with
    kafka.resume_after_last_release it continues after the last release the audit topic confirms,
    each slot once. A forged release keyed 99999 moves neither the refusal's slot nor the resume
    point. Re-read from the earliest offset, every event of a decided slot is a `late` dead letter,
    counted in the metrics (docs/streaming.md, "Starting twice")."""
    slots = 6
    port = free_loopback_port()
    job = make_job(streaming_job, "PBD", {"flink": {"restart_attempts": 1, "restart_delay": "0s",
                                                    "prometheus": {"port": str(port)}}})
    events, requirements = generate(job.folder, users=20, slots=slots + 4)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=slots)
    job.start(seed=SEED)
    expected = replay(job, events, requirements)
    first = job.wait_releases(slots, timeout=180)
    for release in first:
        assert release == expected["releases"][release["slot"] - 1]
    job.stop()
    last = max(r["slot"] for r in first)
    forged = producer(job.kafka)
    forged.send(job.topics["releases"], key=b"99999",
                value=json.dumps({"slot": 99999, "kind": "publish", "counts": [7, 7]}).encode())
    forged.flush()
    forged.close()

    # The refusal fails the job on its first attempt: a failover restart that restores a checkpoint
    # taken after the readers reached the end of the topics would wait for new records before its
    # Population checks again (docs/operations.md, "Refused start").
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"]["restart_attempts"] = 0
    job.config_path.write_text(yaml.safe_dump(raw))
    refused = subprocess.run([*job.command(seed=SEED)], capture_output=True, text=True, timeout=300,
                             cwd=str(job.folder))
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"refusing to start: topic {job.topics['releases']} already holds releases up to slot 99999 (the " \
           f"audit topic confirms up to slot {last})" in refused.stderr, refused.stderr[-3000:]
    assert f"kafka.resume_after_last_release: true (--resume-after-last-release on the command line) to " \
           f"continue after slot {last} with" in refused.stderr

    raw = yaml.safe_load(job.config_path.read_text())
    raw["kafka"]["resume_after_last_release"] = True  # the configuration, as under the Kubernetes operator
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED)
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slots + 1)
    releases = job.wait_releases(slots + 4, timeout=180)
    counted = Counter(r["slot"] for r in releases if r.get("mechanism"))
    assert all(n == 1 for n in counted.values()), counted
    assert set(counted) >= set(range(1, slots + 4)) and min(s for s in counted if s > last) == last + 1

    decided = {(m.partition, m.offset) for m in job.read("events")
               if job.config.clock.slot_of(json.loads(m.value)["time"]) <= last}
    assert len(decided) > 100
    late = [d for d in (m.json() for m in job.read("dead_letters", idle_s=1.0)) if d["reason"] == "late"]
    assert {(d["position"]["partition"], d["position"]["offset"]) for d in late} == decided
    assert len(late) == len(decided)
    assert all(d["detail"].endswith(f"was decided before this job resumed after slot {last}") for d in late)
    deadline = time.monotonic() + 60  # the counters run ahead of the committed dead letters, never behind
    while total(scrape(port), "late_records") < len(decided) and time.monotonic() < deadline:
        time.sleep(1.0)
    metrics = scrape(port)
    assert total(metrics, "late_records") == len(decided)
    assert total(metrics, "reason_dead_letters", reason="late") == len(decided)


def _with_time(record: dict[str, Any], slot: int) -> dict[str, Any]:
    return {**record, "time": slot_time(slot, 1000)}


# Sent after the whole backlog of partition 0, so an earlier slot may have closed by the time they are
# read: the valid one (the unknown user) is timed in the last slot, which is still open then.
BAD_EVENTS = [
    b'{"user": "u1", "time": ',                                                  # unparsable
    json.dumps({"user": "u2", "time": slot_time(3, 5)}).encode(),                # missing value
    json.dumps(_with_time({"user": "nobody", "value": 1}, 8)).encode(),          # unknown user
    json.dumps(_with_time({"user": "u3", "value": 7}, 4)).encode(),              # outside the domain
    json.dumps(_with_time({"user": ["u4"], "value": 1}, 5)).encode(),            # mistyped user
    json.dumps({"user": "u5", "time": "2023-12-31T23:00:00Z", "value": 1}).encode(),  # before the origin
]
BAD_REQUIREMENTS = [
    json.dumps(_with_time({"user": "new1", "w": 10, "epsilon": -1}, 2)).encode(),     # invalid
    json.dumps(_with_time({"user": "new2", "w": 0, "epsilon": 1}, 2)).encode(),       # invalid
    json.dumps(_with_time({"user": "u5", "w": 10, "epsilon": 5.0}, 3)).encode(),      # a change, fixed mechanism
    json.dumps(_with_time({"user": "new3", "w": 10, "epsilon": 500.0}, 3)).encode(),  # over the cap
]


def test_bad_input_goes_to_dead_letters_and_changes_no_release(streaming_job: Any) -> None:
    """Bad records among the backlog and a late event after its slot closed: each is a dead letter
    with its reason and Kafka position (the original bytes are there), the valid records give
    exactly the replay's releases, and the job keeps running."""
    slots = 8
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=30, slots=slots)
    expected = replay(job, events, requirements)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    client = producer(job.kafka)
    for line in BAD_REQUIREMENTS:
        client.send(job.topics["requirements"], value=line)
    for line in BAD_EVENTS:
        client.send(job.topics["events"], value=line, partition=0)
    client.flush()
    job.start(seed=SEED)
    releases = job.wait_releases(slots, timeout=240)
    client.send(job.topics["events"], value=json.dumps(_with_time({"user": "u6", "value": 1}, 2)).encode(),
                partition=1)  # slot 2 closed long ago
    client.flush()
    client.close()
    check_releases(releases, slots)
    for release in releases:
        if release["slot"] <= slots:
            assert release == expected["releases"][release["slot"] - 1], f"slot {release['slot']}"
    deadline = time.monotonic() + 60
    while True:
        dead = [m.json() for m in job.read("dead_letters", idle_s=1.5)]
        if any(d["reason"] == "late" for d in dead) or time.monotonic() > deadline:
            break
    assert job.alive(), job.log_tail()
    for record in dead:
        schema("dead-letter").validate(record)
    assert Counter(d["reason"] for d in dead) == Counter({
        "unparsable": 1, "missing_field": 1, "unknown_user": 1, "out_of_domain": 1, "mistyped_field": 1,
        "before_origin": 1, "late": 1, "invalid_requirement": 3, "requirement_change_under_fixed_mechanism": 1})
    sources = {(m.topic, m.partition, m.offset): m.value for role in ("events", "requirements")
               for m in job.read(role, 1.0)}
    for record in dead:
        pos = record["position"]
        assert record["original"] == sources[(pos["topic"], pos["partition"], pos["offset"])].decode(
            "utf-8", errors="replace")


def test_poison_records_are_dead_letters_and_change_no_release(streaming_job: Any) -> None:
    """The poison corpus (tests/corpus: records that crashed the parser, 1 MiB of 0xFF, a 10 MiB
    record, lone surrogates, 5,000-digit numbers, times out of range...) at the head of every input
    partition, before the backlog, plus a valid event timed two days ahead of the wall clock as the
    first record of a partition: each is one dead letter at its own position, the job keeps running,
    and its releases and spend log equal the replay of the clean input (full audit)."""
    slots = 8
    job = make_job(streaming_job, "PBD")
    events, requirements = generate(job.folder, users=30, slots=slots)
    expected = replay(job, events, requirements)
    limit = 16 << 20
    admin = KafkaAdminClient(bootstrap_servers=job.kafka.require_bootstrap())
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, job.topics[role],
                                        configs={"max.message.bytes": str(limit)})
                         for role in ("events", "requirements")])
    admin.close()
    client = producer(job.kafka, max_request_size=limit, linger_ms=0)
    future = json.dumps({"user": "u1", "time": int(time.time() * 1000) + 2 * 86_400_000, "value": 1}).encode()
    sent = [client.send(job.topics["events"], value=future, partition=1)]
    poison = poison_records(big=True)
    for i, (_, value) in enumerate(poison):
        sent.append(client.send(job.topics["events"], value=value, partition=i % 2))
        sent.append(client.send(job.topics["requirements"], value=value))
    client.flush()
    positions = {(m.topic, m.partition, m.offset) for m in (f.get(timeout=60) for f in sent)}
    client.close()
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    check_equals_replay(job, events, requirements, slots, expected)  # releases, spend log, full audit
    deadline = time.monotonic() + 60
    while True:
        dead = [m.json() for m in job.read("dead_letters", idle_s=1.5)]
        if len(dead) >= len(positions) or time.monotonic() > deadline:
            break
    assert job.alive(), job.log_tail()
    for record in dead:
        schema("dead-letter").validate(record)
        assert len(json.dumps(record)) < 16_384, record["reason"]
    found = Counter((d["position"]["topic"], d["position"]["partition"], d["position"]["offset"]) for d in dead)
    assert set(found) == positions and set(found.values()) == {1}, (set(found) ^ positions, found.most_common(3))
    far = [d for d in dead if d["position"]["offset"] == 0 and d["position"]["partition"] == 1
           and d["position"]["topic"] == job.topics["events"]]
    assert far[0]["reason"] == "too_far_ahead", far
