"""A slot's outcome is drawn once across a broker restart mid-stream and a TaskManager killed on a
standalone cluster at parallelism 2 (docs/streaming.md, "A slot's outcome is drawn once").

Every test ends with `released_once`: every slot read `read_uncommitted` once or in byte-identical
copies (jobs/offline/release_topic.py), the committed releases and the spend log equal `pwevent
replay` with the same seed, and `pwevent audit --release-topic` (the full audit, the topic check
included) passes (tests/integration/released_once.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    KAFKA_SH,
    SEED,
    StreamingJob,
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
    """The broker stops while the job works through a backlog and comes back on its port 10 s later;
    the rest of the input follows. The job goes on by itself (restarting from its checkpoint if it must)."""
    bootstrap, run_dir = own_broker
    jobs: list[StreamingJob] = []

    def own(mechanism: str, extra: dict[str, Any] | None = None) -> StreamingJob:
        (tmp_path / "job").mkdir()
        jobs.append(StreamingJob(bootstrap, tmp_path / "job", mechanism, extra))
        return jobs[-1]

    slots, first = 20, 14
    job = make_job(own, "PBD", {"flink": {"checkpoint_interval": "500ms", "restart_delay": "5s"}})
    try:
        events, requirements = generate(job.folder, users=30, slots=slots, w=5)
        produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=first)
        job.start(seed=SEED)
        job.wait_releases(3, timeout=GUARD_S)
        stopped = subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True,
                                 text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        time.sleep(10)  # the outage (its length is the scenario, nothing waits on it)
        started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--owner", str(os.getpid())],
                                 capture_output=True, text=True, timeout=180)
        assert started.returncode == 0 and started.stdout.strip().splitlines()[-1] == bootstrap, started.stderr
        produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=first + 1)
        released_once(job, events, requirements, slots)
        assert job.alive(), job.log_tail()
    finally:
        for each in jobs:
            each.stop()


CLUSTER_PARALLELISM = 2


def taskmanager_pid(run_dir: Path, resource_id: str) -> int:
    """The pid of the cluster's TaskManager with this resource id (its log says it at start)."""
    for pid_file in sorted(run_dir.glob("taskmanager-*.pid")):
        logs = (run_dir / "logs" / pid_file.stem).glob("*.log")
        if any(resource_id in log.read_text(errors="replace") for log in logs):
            return int(pid_file.read_text().strip())
    raise AssertionError(f"no TaskManager log names {resource_id}")


def restarted(job: ClusterJob) -> bool:
    """Whether the job has restarted at least once and runs again with all its tasks."""
    if job.state() != "RUNNING":
        return False
    restarts = _rest(job.rest, f"/jobs/{job.job_id}/metrics?get=numRestarts")
    vertices = _rest(job.rest, f"/jobs/{job.job_id}")["vertices"]
    return bool(restarts) and int(restarts[0]["value"]) >= 1 and all(
        v["tasks"].get("RUNNING", 0) == v["parallelism"] for v in vertices)


def test_a_taskmanager_killed_on_a_standalone_cluster(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Parallelism 2 on a session cluster of three one-slot TaskManagers. Half the input as a
    backlog; once it is released, one more slot and at once a kill -9 of the TaskManager that runs
    the Population, then the rest of the input; the restart strategy restores the latest checkpoint
    on the two left."""
    slots, half = 20, 10
    with session_cluster(tmp_path / "cluster", 3) as rest:
        job = make_job(lambda mechanism, extra: ClusterJob(rest, kafka_bootstrap, tmp_path, mechanism, extra), "PBD",
                       {"flink": {"parallelism": CLUSTER_PARALLELISM, "checkpoint_interval": "500ms",
                                  "restart_attempts": 10, "restart_delay": "3s"}})
        assert isinstance(job, ClusterJob)
        events, requirements = generate(tmp_path, users=30, slots=slots, w=5)
        produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=half)
        try:
            job.submit(SEED)
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            job.wait_releases(half - 1, timeout=GUARD_S)
            vertices = _rest(rest, f"/jobs/{job.job_id}")["vertices"]
            population = next(v for v in vertices if "Population" in v["name"])
            hosts = _rest(rest, f"/jobs/{job.job_id}/vertices/{population['id']}/taskmanagers")["taskmanagers"]
            victim = taskmanager_pid(tmp_path / "cluster", hosts[0]["taskmanager-id"])
            produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 1, last_slot=half + 1)
            print(f"\nkill -9 of TaskManager {hosts[0]['taskmanager-id']} (pid {victim}), the Population's")
            os.kill(victim, signal.SIGKILL)
            # The rest of the input goes at once, so the restored job reads it as a backlog: a source
            # left without records through the restart would meet the quiet-partition rules
            # (docs/streaming.md, "Time"), which are not what this test is about.
            produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 2)
            deadline = time.monotonic() + GUARD_S * 2  # the JobManager notices the loss, then restarts
            while not restarted(job):
                assert job.state() not in ("FAILED", "CANCELED", "FINISHED"), job.log_tail()
                assert time.monotonic() < deadline, job.log_tail()
                time.sleep(1.0)
            released_once(job, events, requirements, slots)
        finally:
            job.stop()
