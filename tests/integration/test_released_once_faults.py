"""A slot's outcome is drawn once across a broker restart mid-stream, a broker outage of 90 s in a
live stream, and a TaskManager killed on a standalone cluster at parallelism 2 (docs/streaming.md,
"A slot's outcome is drawn once" and "Time").

Every test ends with `released_once`: every slot read `read_uncommitted` once or in byte-identical
copies (jobs/offline/release_topic.py), the committed releases and the spend log equal `pwevent
replay` with the same seed, and `pwevent audit --release-topic` (the full audit, the topic check
included) passes (tests/integration/released_once.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.files import iso
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    KAFKA_SH,
    SEED,
    StreamingJob,
    ahead_origin,
    generate,
    make_job,
)
from tests.integration.released_once import GUARD_S, released_once
from tests.integration.test_cluster_submit import ClusterJob, _rest, session_cluster, wait_state

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A broker of this test alone (it is restarted), stopped by its pid; yields (bootstrap, run folder)."""
    run_dir = tmp_path / "kafka-run"
    started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--port", str(free_loopback_port()),
                              "--owner", str(os.getpid())], capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip().splitlines()[-1], run_dir
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)


def test_a_broker_restart_mid_stream(own_broker: tuple[str, Path], tmp_path: Path) -> None:
    """The broker stops while the job works through a backlog and comes back on its port 10 s later.
    The job goes on by itself (restarting from its checkpoint if it must)."""
    bootstrap, run_dir = own_broker
    jobs: list[StreamingJob] = []

    def own(mechanism: str, extra: dict[str, Any] | None = None) -> StreamingJob:
        (tmp_path / "job").mkdir()
        jobs.append(StreamingJob(bootstrap, tmp_path / "job", mechanism, extra))
        return jobs[-1]

    slots = 20
    job = make_job(own, "PBD", {"flink": {"checkpoint_interval": "500ms", "restart_delay": "5s"}})
    try:
        events, requirements = generate(job.folder, users=30, slots=slots, w=5)
        produce_files(job.kafka, job.config, events, requirements, 0.0)
        job.start(seed=SEED)
        job.wait_releases(3, timeout=GUARD_S)
        stopped = subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True,
                                 text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        time.sleep(10)  # the outage (its length is the scenario, nothing waits on it)
        started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--owner", str(os.getpid())],
                                 capture_output=True, text=True, timeout=180)
        assert started.returncode == 0 and started.stdout.strip().splitlines()[-1] == bootstrap, started.stderr
        released_once(job, events, requirements, slots)
        assert job.alive(), job.log_tail()
    finally:
        for each in jobs:
            each.stop()


LIVE_SLOT_MS = 30_000
LIVE_DELAY_MS = 100_000


def wait_until(ms: int) -> None:
    time.sleep(max(0.0, ms / 1000 - time.time()))


def test_a_live_stream_through_a_lull_and_a_broker_outage(own_broker: tuple[str, Path], tmp_path: Path) -> None:
    """Issue 40's reproductions, live (event time = the clock), 30 s slots, `release_delay` 100 s, 40
    registered users: in slot 2, 20 events, a pause of 8 s, 20 more; in slot 3, 20 events, then the
    broker stops for 90 s; the producer keeps the 20 events its users send meanwhile (slot 3) and
    sends them, with their times, once the broker is back; slots 4 and 5 are quiet. No valid event is
    `late`, every slot 1-5 is released once and equals the replay through slot 5. Slots 1 and 2 are
    released as soon as event time has passed their end (the next slot's events); slots 3-5, whose
    end no event passes, on the schedule: between their end plus the delay and 15 s after it.
    docs/operations.md, "Broker outage", states what this measures."""
    bootstrap, run_dir = own_broker
    (tmp_path / "job").mkdir()
    begin = -(-(int(time.time() * 1000) + 45_000) // LIVE_SLOT_MS) * LIVE_SLOT_MS  # slot 2's start
    origin = begin - LIVE_SLOT_MS
    job = make_job(lambda mechanism, extra: StreamingJob(bootstrap, tmp_path / "job", mechanism, extra), "PBD",
                   {"slot": "30s", "origin": iso(origin),
                    "flink": {"release_delay": f"{LIVE_DELAY_MS // 1000}s", "checkpoint_interval": "500ms",
                              "restart_attempts": 10, "restart_delay": "5s"}})
    users = [f"u{n}" for n in range(40)]
    requirements = job.folder / "requirements.jsonl"
    requirements.write_text("".join(json.dumps({"user": user, "time": origin, "w": 5, "epsilon": 1.0}) + "\n"
                                    for user in users))
    sent: list[dict[str, Any]] = []
    try:
        produce_files(job.kafka, job.config, "/dev/null", str(requirements), 0.0)
        job.start(seed=SEED)
        client = producer(job.kafka)

        def send(group: list[str], held: list[dict[str, Any]] | None = None) -> None:
            for user in group:
                record = {"user": user, "time": int(time.time() * 1000), "value": len(sent) % 2}
                sent.append(record)
                if held is None:
                    client.send(job.topics["events"], value=json.dumps(record).encode(), key=user.encode())
                else:
                    held.append(record)
            if held is None:
                client.flush()

        wait_until(begin + 1_000)
        send(users[:20])
        lull_from = time.time()
        time.sleep(8.0)  # the lull inside slot 2
        send(users[20:])
        print(f"\nslot 2: a lull of {time.time() - lull_from:.1f} s between its two halves")
        wait_until(begin + LIVE_SLOT_MS + 1_000)
        send(users[:20])
        client.close()
        stopped = subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True,
                                 text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        down_ms = int(time.time() * 1000)
        held: list[dict[str, Any]] = []
        for group in (users[20:25], users[25:30], users[30:35], users[35:]):
            time.sleep(3.0)
            assert time.time() * 1000 < begin + 2 * LIVE_SLOT_MS, "slot 3 ended before its events were made"
            send(group, held)
        wait_until(down_ms + 90_000)  # the outage (its length is the scenario)
        started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--owner", str(os.getpid())],
                                 capture_output=True, text=True, timeout=180)
        assert started.returncode == 0 and started.stdout.strip().splitlines()[-1] == bootstrap, started.stderr
        up_ms = int(time.time() * 1000)
        print(f"broker down for {(up_ms - down_ms) / 1000:.1f} s; sending the {len(held)} events kept meanwhile")
        client = producer(job.kafka)
        for record in held:
            client.send(job.topics["events"], value=json.dumps(record).encode(), key=record["user"].encode())
        client.flush()
        client.close()
        events = job.folder / "events.jsonl"
        events.write_text("".join(json.dumps(record) + "\n" for record in sent))
        job.wait_releases(5, timeout=(origin + 5 * LIVE_SLOT_MS + LIVE_DELAY_MS) / 1000 - time.time() + GUARD_S)
        released_once(job, str(events), str(requirements), 5)
        late = [m.json() for m in job.read("dead_letters") if m.json()["reason"] == "late"]
        assert late == [], late[:3]
        for message in job.read("releases"):
            slot = message.json()["slot"]
            due = origin + slot * LIVE_SLOT_MS + LIVE_DELAY_MS
            print(f"slot {slot}: released {(message.timestamp_ms - due) / 1000:+.1f} s after its end plus the delay")
            if 3 <= slot <= 5:
                assert due - 1_000 <= message.timestamp_ms <= due + 15_000, (slot, message.timestamp_ms - due)
    finally:
        job.stop()


CLUSTER_PARALLELISM = 2


def taskmanager_pid(run_dir: Path, resource_id: str) -> int:
    """The pid of the cluster's TaskManager with this resource id (its log says it at start)."""
    for pid_file in sorted(run_dir.glob("taskmanager-*.pid")):
        logs = (run_dir / "logs" / pid_file.stem).glob("*.log")
        if any(resource_id in log.read_text(errors="replace") for log in logs):
            return int(pid_file.read_text().strip())
    raise AssertionError(f"no TaskManager log names {resource_id}")


def restarted(job: ClusterJob) -> bool:
    """Whether the job has restarted at least once and runs again with all its tasks (a finished one,
    the start row's source, counts as running). The REST API may answer the job's state from a cache
    up to 10 s old while `numRestarts` is fresh, so this can say True while the job still restarts:
    what follows waits for releases, which a restarting job (alive, `ClusterJob.alive`) still gives."""
    if job.state() != "RUNNING":
        return False
    restarts = _rest(job.rest, f"/jobs/{job.job_id}/metrics?get=numRestarts")
    vertices = _rest(job.rest, f"/jobs/{job.job_id}")["vertices"]
    return bool(restarts) and int(restarts[0]["value"]) >= 1 and all(
        v["tasks"].get("RUNNING", 0) + v["tasks"].get("FINISHED", 0) == v["parallelism"] for v in vertices)


def test_a_taskmanager_killed_on_a_standalone_cluster(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Parallelism 2 on a session cluster of three one-slot TaskManagers, over an input ahead of the
    clock (its slots close by event time, `ahead_origin`). Half the input as a backlog; once it is
    released, one more slot and at once a kill -9 of the TaskManager that runs the Population, then
    the rest of the input; the restart strategy restores the latest checkpoint on the two left, whose
    ValidTime subtasks read what was written meanwhile as their backlog. Every slot but the input's
    last (which only the schedule, far behind, would close) is released once."""
    slots, half = 20, 10
    origin = ahead_origin()
    with session_cluster(tmp_path / "cluster", 3) as rest:
        job = make_job(lambda mechanism, extra: ClusterJob(rest, kafka_bootstrap, tmp_path, mechanism, extra), "PBD",
                       {"origin": iso(origin),
                        "flink": {"parallelism": CLUSTER_PARALLELISM, "checkpoint_interval": "500ms",
                                  "restart_attempts": 10, "restart_delay": "3s"}})
        assert isinstance(job, ClusterJob)
        events, requirements = generate(tmp_path, users=30, slots=slots, w=5, origin_ms=origin)
        produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=half)
        try:
            job.submit(SEED)
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            job.wait_releases(half - 1, timeout=GUARD_S)
            vertices = _rest(rest, f"/jobs/{job.job_id}")["vertices"]
            population = next(v for v in vertices if v["name"].startswith("Population"))
            hosts = _rest(rest, f"/jobs/{job.job_id}/vertices/{population['id']}/taskmanagers")["taskmanagers"]
            victim = taskmanager_pid(tmp_path / "cluster", hosts[0]["taskmanager-id"])
            produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 1, last_slot=half + 1)
            print(f"\nkill -9 of TaskManager {hosts[0]['taskmanager-id']} (pid {victim}), the Population's")
            os.kill(victim, signal.SIGKILL)
            produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 2)
            deadline = time.monotonic() + GUARD_S * 2  # the JobManager notices the loss, then restarts
            while not restarted(job):
                assert job.state() not in ("FAILED", "CANCELED", "FINISHED"), job.log_tail()
                assert time.monotonic() < deadline, job.log_tail()
                time.sleep(1.0)
            released_once(job, events, requirements, slots - 1)
        finally:
            job.stop()
