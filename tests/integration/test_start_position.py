"""Reading an existing events topic from a position (docs/streaming.md, "Reading an existing events
topic"): a job started at a time, at `latest` or at `committed` reads the events from there on, and
every requirement record ever declared; it equals the replay of exactly those inputs."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaError

from pwevent.jobs.common.slots import iso
from pwevent.jobs.streaming.kafka_io import Message, consumer
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SLOT_MS,
    TEST_ORIGIN_MS,
    StreamingJob,
    ahead_origin,
    check_equals_replay,
    generate,
    replay,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

def events_group(job: StreamingJob) -> str:
    """The consumer group of the job's events source (jobs/streaming/job.py)."""
    return f"{job.kafka.group_id}-events"


def admin_client(job: StreamingJob) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=job.kafka.require_bootstrap(), **job.kafka.client_options())


def committed_offsets(job: StreamingJob) -> dict[int, int]:
    """The events offsets the job's consumer group has committed, by partition."""
    admin = admin_client(job)
    try:
        offsets = admin.list_group_offsets({events_group(job): None})[events_group(job)]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()
            if tp.topic == job.topics["events"] and meta.offset >= 0}


def end_offsets(job: StreamingJob) -> dict[int, int]:
    """The events topic's end offset, by partition."""
    client = consumer(job.kafka)
    try:
        topic = job.topics["events"]
        partitions = client.partitions_for_topic(topic)
        assert partitions, topic
        ends = client.end_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        client.close()


def wait_committed(job: StreamingJob, until: Callable[[dict[int, int]], bool], what: str,
                   timeout: float = 180) -> dict[int, int]:
    """The committed offsets once `until` holds of them (the source commits at completed checkpoints);
    `timeout` bounds a guard, it measures nothing."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            offsets = committed_offsets(job)
        except KafkaError as error:  # e.g. the coordinator of a fresh broker's offsets topic not up yet
            if not error.retriable:
                raise
            offsets = {}
        if until(offsets):
            return offsets
        assert job.alive(), job.log_tail()
        assert time.monotonic() < deadline, f"{what}: committed offsets still {offsets}\n{job.log_tail()}"
        time.sleep(0.5)


def events_file(path: Path, lines: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def in_file_order(events: str, read: list[Message]) -> list[str]:
    """The lines of `events` that `read` holds (each as often as it was read), in the file's order."""
    left = Counter(m.value.decode() for m in read)
    out = []
    for line in Path(events).read_text().splitlines():
        if left[line] > 0:
            left[line] -= 1
            out.append(line)
    assert sum(left.values()) == 0, "read an event that is not in the file"
    return out


def check_releases_of(job: StreamingJob, events: str, requirements: str, slots: int, users: int) -> None:
    """Equal to the replay of `events` and every requirement (releases, spend log line for line, full
    audit), no dead letters, every user registered in every slot."""
    job.wait_releases(slots, timeout=240)
    assert [m.json() for m in job.read("dead_letters")] == []
    releases = check_equals_replay(job, events, requirements, slots)
    by_slot = {r["slot"]: r for r in releases}
    assert all(by_slot[slot]["population"] == users for slot in range(1, slots + 1))


def test_a_job_started_at_a_time_equals_the_replay_of_the_events_from_that_time(streaming_job: Any) -> None:
    slots, first_read = 4, 3
    start_ms = TEST_ORIGIN_MS + (first_read - 1) * SLOT_MS
    job = streaming_job("PBD", {"kafka": {"start": iso(start_ms)}})
    events, requirements = generate(job.folder, users=30, slots=slots)
    produce_files(job.kafka, job.config, events, requirements, 0.0)  # all of it in the topics first
    job.start()
    lines = Path(events).read_text().splitlines()
    later = [line for line in lines if json.loads(line)["time"] >= start_ms]
    assert 0 < len(later) < len(lines)
    check_releases_of(job, events_file(job.folder / "data" / "events-read.jsonl", later), requirements, slots, 30)


def test_a_job_started_at_latest_never_counts_the_events_already_in_the_topic(streaming_job: Any) -> None:
    """The first slots' events (and every requirement record: generate() declares them all in slot 1)
    are in the topics before the job starts; the later slots' events are produced only once the
    source has committed its start offsets, i.e. resolved `latest` (no race with that resolution).
    The input lies ahead of the clock (`ahead_origin`): its slots close by event time, all but the
    last."""
    slots, first_later = 5, 3
    origin = ahead_origin()
    job = streaming_job("PBD", {"kafka": {"start": "latest"}, "origin": iso(origin)})
    events, requirements = generate(job.folder, users=30, slots=slots, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=first_later - 1)
    assert len(job.read("requirements")) == len(Path(requirements).read_text().splitlines())
    early_end = end_offsets(job)
    assert all(early_end.values()), early_end  # early events on every partition
    job.start()
    started_at = wait_committed(job, lambda offsets: set(offsets) == set(early_end), "latest never resolved")
    # the start it resolved: the end of the early events (a source that had read them all from the
    # earliest would commit the same; the releases below are what tell the two apart)
    assert started_at == early_end
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=first_later)
    lines = Path(events).read_text().splitlines()
    later = [line for line in lines if json.loads(line)["time"] >= origin + (first_later - 1) * SLOT_MS]
    assert 0 < len(later) < len(lines)
    read = events_file(job.folder / "data" / "events-read.jsonl", later)
    # the test can fail: a job that counted the early events would release something else
    decided = slots - 1
    assert (replay(job, events, requirements, decided)["releases"]
            != replay(job, read, requirements, decided)["releases"])
    check_releases_of(job, read, requirements, decided, 30)


def test_a_job_started_at_committed_continues_where_its_consumer_group_got_to(streaming_job: Any) -> None:
    """A first job reads the first slots and is killed (no savepoint, no --restore after it); more
    events arrive; a second job with the same consumer group and input topics, fresh output topics and
    `kafka.start: committed` reads exactly the events from the group's committed offsets on, and a
    partition whose committed offset was deleted from the earliest."""
    slots, part = 4, 2
    first = streaming_job("PBD")
    events, requirements = generate(first.folder, users=30, slots=slots)
    produce_files(first.kafka, first.config, events, requirements, 0.0, last_slot=part)
    part_end = end_offsets(first)
    first.start()
    wait_committed(first, lambda offsets: offsets == part_end, "the first part never read")
    first.stop()  # SIGKILL: the job's offsets are the ones of its last completed checkpoint
    # partition 1 without a committed offset: the second job reads it from the earliest
    admin = admin_client(first)
    try:
        deleted = admin.delete_group_offsets(events_group(first), [TopicPartition(first.topics["events"], 1)])
    finally:
        admin.close()
    assert [error.errno for error in deleted.values()] == [0], deleted
    committed = committed_offsets(first)
    assert list(committed) == [0] and committed[0] > 0, committed  # partition 0: past the earliest
    produce_files(first.kafka, first.config, events, requirements, 0.0, first_slot=part + 1)

    second = streaming_job("PBD", {"kafka": {"start": "committed"}}, inputs_of=first)
    assert second.kafka.group_id == first.kafka.group_id
    assert second.topics["events"] == first.topics["events"]
    assert not {second.topics[r] for r in ("releases", "dead_letters", "audit")} & set(first.topics.values())
    topic = second.read("events")
    after = [m for m in topic if m.offset >= committed.get(m.partition, 0)]
    assert {m.partition for m in after} == {0, 1} and len(after) < len(topic)  # not the latest, not all
    read = events_file(second.folder / "data" / "events-read.jsonl", in_file_order(events, after))
    assert (replay(second, events, requirements, slots)["releases"]
            != replay(second, read, requirements, slots)["releases"])
    second.start()  # without --restore
    check_releases_of(second, read, requirements, slots, 30)
