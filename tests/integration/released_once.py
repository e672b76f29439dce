"""What the failover tests of test_released_once_*.py share (docs/streaming.md, "A slot's outcome is
drawn once"): the analyst's read of the release topic (`read_uncommitted`), the checks every test
ends with (`released_once`), kills at random points and a paced producer. The kill points are
drawn from `random.Random(SEED_KILLS)` (printed; PWEVENT_KILL_SEED sets another), one in each of
KILLS equal parts of the time a test allows after the tasks run (`kill_delays`): early kills meet
releases no completed checkpoint holds yet, late ones come after a checkpoint."""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafka import TopicPartition

from pwevent.jobs.offline.release_topic import distinct_counts, redrawn
from pwevent.jobs.streaming.kafka_io import Message, consumer, read_topic
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    PWEVENT,
    SEED,
    StreamingJob,
    check_equals_replay,
)

SEED_KILLS = int(os.environ.get("PWEVENT_KILL_SEED", "39"))
#: Kills per test, one in each part of the time after the tasks run (`kill_delays`). Until 2026-12-06
#: five uniform draws over the whole time (with seed 39, no kill of the backlog test came after 2 s).
KILLS = 3
#: A guard against a hang, never a measured duration.
GUARD_S = 240


def analyst_read(kafka: Any, topic: str) -> list[Message]:
    """Every record of the topic, read_uncommitted (aborted transactions included)."""
    return read_topic(kafka, topic, idle_s=2.0, max_s=GUARD_S, committed=False)


def released_once(job: StreamingJob, events: str, requirements: str, slots: int, seeded: bool = True) -> None:
    """What every test checks once its job has settled: the committed releases and the spend log
    equal the replay's and pass the full audit (`seeded`; else every slot released); every slot
    read_uncommitted once or in identical copies; `pwevent audit --release-topic` with the spend log
    passes."""
    if seeded:
        check_equals_replay(job, events, requirements, slots)
    else:
        job.wait_releases(slots, timeout=GUARD_S)
    raw = analyst_read(job.kafka, job.topics["releases"])
    copies = Counter(m.key for m in raw)
    distinct = distinct_counts(raw)
    twice = {key: n for key, n in distinct.items() if n > 1}
    print(f"\nread_uncommitted: {len(raw)} release records for {len(distinct)} slots; "
          f"{sum(1 for n in copies.values() if n > 1)} slots in several copies, {len(twice)} of them with "
          f"different bytes {sorted(twice, key=int)}")
    assert not redrawn(raw), "\n".join(str(v) for v in redrawn(raw))
    spend = job.folder / "spend-log.jsonl"
    spend.write_text("".join(m.value.decode() + "\n" for m in job.read("audit")))
    audited = subprocess.run([*PWEVENT, "audit", "--config", str(job.config_path), "--release-topic",
                              "--spend-log", str(spend), "--requirements", requirements],
                             capture_output=True, text=True, timeout=GUARD_S)
    assert audited.returncode == 0, audited.stdout[-3000:] + audited.stderr[-3000:]
    assert "no violation" in audited.stdout, audited.stdout


def committed_slots(job: StreamingJob) -> set[int]:
    return {int(m.key or b"0") for m in job.read("releases", idle_s=0.5)}


def wait_committed(job: StreamingJob, slot: int, timeout: float = GUARD_S) -> None:
    """Until slot `slot` is committed on the release topic (a read_committed consumer that polls on)."""
    client = consumer(job.kafka)
    try:
        topic = job.topics["releases"]
        partitions = [TopicPartition(topic, p) for p in sorted(client.partitions_for_topic(topic) or ())]
        client.assign(partitions)
        client.seek_to_beginning(*partitions)
        deadline = time.monotonic() + timeout
        while True:
            for records in client.poll(timeout_ms=100).values():
                if any(int(r.key or b"0") == slot for r in records):
                    return
            assert job.alive(), job.log_tail()
            assert time.monotonic() < deadline, f"slot {slot} not committed within {timeout} s"
    finally:
        client.close()


def kill_delays(rng: random.Random, longest_s: float) -> list[float]:
    """KILLS moments after the tasks run, one drawn uniformly in each of KILLS equal parts of
    [0, `longest_s`), in order."""
    part = longest_s / KILLS
    return [rng.uniform(k * part, (k + 1) * part) for k in range(KILLS)]


def kill_and_restore(job: StreamingJob, delay: float, down: threading.Event | None = None,
                     seed: int | None = SEED) -> None:
    """`delay` seconds after the job's tasks run, kill -9 and `--restore latest`; `down` is set from
    the kill until the restored job's tasks run."""
    time.sleep(delay)
    if down is not None:
        down.set()
    job.stop()
    print(f"kill -9 {delay:.2f} s after the tasks ran: {len(committed_slots(job))} slots committed")
    job.start(seed=seed, restore="latest")
    if down is not None:
        down.clear()


@contextmanager
def paced_producer(job: StreamingJob, events: str, requirements: str, pace_s: float, slots: int,
                   down: threading.Event) -> Iterator[threading.Event]:
    """Produce the files one slot every `pace_s`, in a thread; the producer waits while the job is
    `down` (from a kill until the restored job's tasks run) and then goes on at its pace, so that
    every kill meets records arriving live. Yields the event set once the last slot is sent."""
    done, failed = threading.Event(), []

    def run() -> None:
        try:
            for slot in range(1, slots + 1):
                while down.is_set():
                    time.sleep(0.1)
                produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slot, last_slot=slot)
                time.sleep(pace_s)
        except Exception as err:  # the test fails on it below
            failed.append(err)
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield done
    finally:
        thread.join(timeout=GUARD_S)
        assert not failed, failed
