"""The streaming job against a real Kafka broker and PyFlink's mini-cluster (docs/streaming.md).

Input is paced one slot per PACE_S of wall time with checkpoints every 400 ms, so every slot's
decision is committed and read back before the next slot closes: no decision is pending when a
ledger charges, and the job must equal `pwevent replay` exactly (same seed, same records).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.files import DEMO_ORIGIN_MS, write_synthetic
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import StreamingJob, check_audit, check_releases, schema

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

PACE_S = 1.3
SEED = 1
SLOT_MS = 60_000


def slot_time(slot: int, offset_ms: int = 0) -> int:
    return DEMO_ORIGIN_MS + (slot - 1) * SLOT_MS + offset_ms


def generate(folder: Path, users: int, slots: int, dynamic: bool = False) -> tuple[str, str]:
    stream = SyntheticStream("Sin", users, slots, seed=3)
    events, requirements = write_synthetic(stream, str(folder / "data"), 0.6, 40, SLOT_MS, dynamic,
                                           types=3, change_every=4)
    return str(events), str(requirements)


def replay(job: StreamingJob, events: str, requirements: str) -> tuple[list[dict], list[dict], list[dict]]:
    out = job.folder / "replay"
    out.mkdir(exist_ok=True)
    run_replay(job.config, events, requirements, str(out / "releases.jsonl"), str(out / "spend.jsonl"),
               rejects_out=str(out / "rejects.jsonl"), seed=SEED)
    load = lambda name: [json.loads(line) for line in (out / name).read_text().splitlines()]  # noqa: E731
    return load("releases.jsonl"), load("spend.jsonl"), load("rejects.jsonl")


def check_against_replay(
    job: StreamingJob, events: str, requirements: str, slots: int
) -> tuple[list[dict], list[dict]]:
    """Every slot released once and equal to the replay's release; returns the replay's spend log and
    rejects for further checks."""
    releases = job.wait_releases(slots)
    assert job.alive(), job.log_tail()
    by_slot = check_releases(releases, slots)
    expected, expected_spend, expected_rejects = replay(job, events, requirements)
    for slot in range(1, slots + 1):
        assert by_slot[slot] == expected[slot - 1], f"slot {slot} differs from the replay"
    return expected_spend, expected_rejects


def weighted_spend(spend_log: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """Per slot: total spend1 and spend2 over all users (members x class spend in the replay)."""
    totals: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for rec in spend_log:
        if rec.get("record") == "spend":
            totals[rec["slot"]][0] += rec["members"] * rec["spend1"]
            totals[rec["slot"]][1] += rec["members"] * rec["spend2"]
    return {slot: (a, b) for slot, (a, b) in totals.items()}


KAFKA_TIME = {"kafka": {"event_time": "kafka"}, "flink": {"source_idleness": "500ms"}}


@pytest.mark.parametrize(("mechanism", "extra"), [
    ("PBD", None), ("PBA", None), ("DPBD", None), ("DPBA", None), ("DPBA", KAFKA_TIME),
], ids=["PBD", "PBA", "DPBD", "DPBA", "DPBA-kafka-time"])
def test_job_equals_replay(streaming_job: Any, tmp_path: Path, mechanism: str, extra: Any) -> None:
    """End to end, and the same implementation: the job's releases equal the replay's, slot by slot.

    Dynamic mechanisms get requirement changes every 4 slots (3 requirement types) plus one
    infeasible backward requirement: ledgers (spend log) and dead letters must agree with the replay.
    The last case takes event time from the Kafka record timestamps (source watermarks, idleness).
    """
    dynamic = mechanism.startswith("D")
    slots = 14
    job: StreamingJob = streaming_job(mechanism, extra)
    events, requirements = generate(job.folder, users=40, slots=slots + 2, dynamic=dynamic)
    if dynamic:  # user u0 declares a backward budget below what its window already spent
        with open(requirements, "a") as handle:
            handle.write(json.dumps({"user": "u0", "time": slot_time(7), "backward": {"w": 3, "epsilon": 0.001},
                                     "forward": {"w": 40, "epsilon": 1.0}}) + "\n")
    for line in Path(requirements).read_text().splitlines():
        schema("requirement").validate(json.loads(line))
    started = job.start(seed=SEED)
    t0 = time.monotonic()
    produce_files(job.kafka, job.config, events, requirements, PACE_S)
    expected_spend, expected_rejects = check_against_replay(job, events, requirements, slots)

    audit = [m.json() for m in job.read("audit")]
    check_audit(audit)
    job_spend, replay_spend = weighted_spend(audit), weighted_spend(expected_spend)
    settled = [s for s in range(1, slots) if s in job_spend]
    assert len(settled) >= slots - 2
    for slot in settled:
        assert job_spend[slot] == pytest.approx(replay_spend[slot], abs=1e-9), f"spend at slot {slot}"
    users = {rec["user"] for rec in audit if rec["record"] == "member"}
    assert len(users) == 40

    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    for record in dead:
        schema("dead-letter").validate(record)
    assert Counter(r["reason"] for r in dead) == Counter(r["reason"] for r in expected_rejects)
    if dynamic:
        assert {r["reason"] for r in dead} == {"infeasible_backward_requirement_projected"}
        # requirement changes honoured: each spend line carries the requirement the user declared for that slot
        declared: dict[tuple[str, int], dict] = {}
        for line in Path(requirements).read_text().splitlines():
            rec = json.loads(line)
            declared[(rec["user"], _slot_of_time(rec["time"]))] = {"forward": rec["forward"]}
        for rec in audit:
            if rec["record"] == "spend":
                since = max(s for (u, s) in declared if u == rec["ledger"] and s <= rec["slot"])
                want = declared[(rec["ledger"], since)]
                assert rec["requirement"]["forward"] == {k: float(v) if k == "epsilon" else v
                                                         for k, v in want["forward"].items()}
    print(f"\n{mechanism}: job start {started:.1f}s, {slots} slots in {time.monotonic() - t0:.1f}s")


def _slot_of_time(value: Any) -> int:
    from pwevent.jobs.common.slots import parse_time_ms

    return (parse_time_ms(value) - DEMO_ORIGIN_MS) // SLOT_MS + 1


def _with_time(record: dict[str, Any], slot: int) -> dict[str, Any]:
    return {**record, "time": slot_time(slot, 1000)}


def test_bad_input_goes_to_dead_letters(streaming_job: Any) -> None:
    """Every kind of bad record lands in the dead-letter topic with its reason and Kafka position;
    the valid records around them give exactly the replay's releases; the job keeps running."""
    slots = 10
    job: StreamingJob = streaming_job("PBD")
    events, requirements = generate(job.folder, users=30, slots=slots + 2)
    bad_events = [
        (3, b'{"user": "u1", "time": '),                                          # unparsable
        (3, json.dumps({"user": "u2", "time": slot_time(3, 5)}).encode()),        # missing value
        (4, json.dumps(_with_time({"user": "nobody", "value": 1}, 4)).encode()),  # unknown user
        (4, json.dumps(_with_time({"user": "u3", "value": 7}, 4)).encode()),      # outside the domain
        (5, json.dumps(_with_time({"user": ["u4"], "value": 1}, 5)).encode()),    # mistyped user
    ]
    bad_requirements = [
        (2, json.dumps(_with_time({"user": "new1", "w": 10, "epsilon": -1}, 2)).encode()),   # invalid
        (2, json.dumps(_with_time({"user": "new2", "w": 0, "epsilon": 1}, 2)).encode()),     # invalid
        (3, json.dumps(_with_time({"user": "u5", "w": 10, "epsilon": 5.0}, 3)).encode()),    # change, fixed
        (3, json.dumps(_with_time({"user": "new3", "w": 10, "epsilon": 500.0}, 3)).encode()),  # over the cap
    ]
    _insert(events, bad_events)
    _insert(requirements, bad_requirements)
    job.start(seed=SEED)
    late_sent = threading.Event()

    def on_slot(slot: int, _: float) -> None:
        if slot == 7:  # slot 2 closed long ago: a late event
            from pwevent.jobs.streaming.kafka_io import producer

            client = producer(job.kafka)
            client.send(job.topics["events"], json.dumps(_with_time({"user": "u6", "value": 1}, 2)).encode(),
                        key=b"u6")
            client.flush()
            client.close()
            late_sent.set()

    produce_files(job.kafka, job.config, events, requirements, PACE_S, on_slot)
    assert late_sent.is_set()
    _, expected_rejects = check_against_replay(job, events, requirements, slots)
    check_audit([m.json() for m in job.read("audit")])

    dead_messages = job.read("dead_letters", idle_s=1.5)
    dead = [m.json() for m in dead_messages]
    for record in dead:
        schema("dead-letter").validate(record)
    want = Counter(r["reason"] for r in expected_rejects) + Counter({"late": 1})
    assert Counter(r["reason"] for r in dead) == want
    assert {"unparsable", "missing_field", "unknown_user", "out_of_domain", "mistyped_field", "late",
            "invalid_requirement", "requirement_change_under_fixed_mechanism"} <= set(want)
    # each dead letter points at its source record: same bytes at that topic/partition/offset
    sources = {(m.topic, m.partition, m.offset): m.value
               for role in ("events", "requirements") for m in job.read(role, 1.0)}
    for record in dead:
        pos = record["position"]
        original = sources[(pos["topic"], pos["partition"], pos["offset"])]
        assert record["original"] == original.decode("utf-8", errors="replace")


def _insert(path: str, lines: list[tuple[int, bytes]]) -> None:
    """Put each bad line right after the last line of its slot's requirement/event block."""
    with open(path, "ab") as handle:
        for _, line in lines:
            handle.write(line + b"\n")
    # the producer groups lines by their time (a line without one joins the line before it), so
    # order within the file only matters for the untimed ones: keep them after a line of their slot
    text = Path(path).read_bytes().splitlines()
    body, tail = text[: len(text) - len(lines)], text[len(text) - len(lines):]
    from pwevent.jobs.common.slots import parse_time_ms

    def slot_of(raw: bytes) -> int:
        try:
            return (parse_time_ms(json.loads(raw)["time"]) - DEMO_ORIGIN_MS) // SLOT_MS + 1
        except Exception:  # noqa: BLE001
            return -1

    out: list[bytes] = []
    pending = sorted(zip([s for s, _ in lines], tail, strict=True), key=lambda p: p[0])
    for raw in body:
        while pending and slot_of(raw) > pending[0][0]:
            out.append(pending.pop(0)[1])
        out.append(raw)
    out.extend(line for _, line in pending)
    Path(path).write_bytes(b"\n".join(out) + b"\n")


def test_exactly_once_across_kill_and_restore(streaming_job: Any) -> None:
    """Kill the job (SIGKILL to its process group) mid-stream, restart from its latest checkpoint:
    a read_committed consumer sees every slot exactly once and the spend log still audits clean."""
    slots = 20
    job: StreamingJob = streaming_job("PBA")
    events, requirements = generate(job.folder, users=40, slots=slots + 2)
    job.start(seed=SEED)
    producer = threading.Thread(target=produce_files, args=(job.kafka, job.config, events, requirements, 1.0),
                                daemon=True)
    producer.start()
    job.wait_releases(7)
    job.stop()  # SIGKILL: no savepoint, open transactions left behind
    restore = __import__("pwevent.jobs.streaming.job", fromlist=["latest_checkpoint"]).latest_checkpoint(
        str(job.folder / "checkpoints"))
    assert restore is not None
    job.start(seed=SEED, restore="latest")
    producer.join(timeout=120)
    releases = job.wait_releases(slots)
    check_releases(releases, slots)
    audit = [m.json() for m in job.read("audit")]
    check_audit(audit)
    restored = [line for line in (job.folder / "job-2.log").read_text().splitlines() if "restoring from" in line]
    assert restored and "chk-" in restored[0], restored
    from pwevent.jobs.streaming.kafka_io import read_topic

    raw = read_topic(job.kafka, job.topics["releases"], committed=False)
    repeated = sum(n - 1 for n in Counter(json.loads(m.value)["slot"] for m in raw).values())
    print(f"\nkill/restore: {len(releases)} committed releases; read_uncommitted sees {len(raw)} "
          f"({repeated} from transactions aborted by the restore)")
