"""The streaming job against a real Kafka broker and PyFlink's mini-cluster (docs/streaming.md).

Off the happy path on purpose: the whole input is in the topics before the job starts and is read at
full speed (no pacing), while a process burns a core beside the job; the job must still equal
`pwevent replay` with the same seed, slot by slot and line by line of the spend log, and the full
audit (users against the requirements they declared, ledgers against the releases) must pass.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.slots import parse_time_ms
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.produce import produce_files
from pwevent.operators.registry import REGISTRY
from tests.corpus import poison_records
from tests.integration.conftest import (
    SEED,
    check_equals_replay,
    check_releases,
    cpu_burner,
    generate,
    make_job,
    replay,
    schema,
    slot_time,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

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
        expected = replay(job, events, requirements, slots)
        check_equals_replay(job, events, requirements, slots, expected)
    if mechanism == "Adaptive":  # a probe, then even spending and absorption, in the job as in the replay
        assert expected["releases"][0]["family"] == "Sample"
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
        expected = replay(job, events, requirements, slots)
        check_equals_replay(job, events, requirements, slots, expected)
    members = {r["user"] for r in expected["spend"] if r.get("record") == "member"}
    assert len(members) == 40 and not [r for r in expected["rejects"] if r["reason"] == "unknown_user"]
    forks = {r["ledger"] for r in expected["spend"] if r.get("record") == "ledger" and r.get("parent")}
    assert forks, "the users declaring from slot 5 fork the default's class"


def test_an_events_topic_without_any_requirement_record_starts_at_once(streaming_job: Any) -> None:
    """`default_requirement` and an empty requirements topic (an events-only job): every user is
    registered by the default, equal to the replay, and the empty topic holds no slot back (its
    partitions held nothing when the job started, so they follow the schedule at once)."""
    slots = 6
    job = make_job(streaming_job, "PBD", {"default_requirement": {"w": 8, "epsilon": 1.0}})
    events, requirements = generate(job.folder, users=20, slots=slots)
    Path(requirements).write_text("")
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    expected = replay(job, events, requirements, slots)
    check_equals_replay(job, events, requirements, slots, expected)
    assert len({r["user"] for r in expected["spend"] if r.get("record") == "member"}) == 20


























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
    expected = replay(job, events, requirements, slots)
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
    expected = replay(job, events, requirements, slots)
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
    assert far[0]["reason"] == Reason.TOO_FAR_AHEAD, far
