"""`pwevent run --print-submit` against a real standalone Flink session cluster with two TaskManagers
(deploy/local/flink-cluster.sh, one slot each): the printed command submits the job, detached, with
parallelism 2; from a backlog (the whole input in the topics first, events in two partitions) its
releases equal `pwevent replay` with the same seed (the parallelism-1 reference) slot by slot, its
audit topic holds the replay's spend log and passes the full audit, and the REST API shows that the
keyed and JVM operators ran as two subtasks, one on each TaskManager, and the Population as one.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import PWEVENT, REPO, SEED, StreamingJob, check_equals_replay, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

CLUSTER_SH = REPO / "deploy" / "local" / "flink-cluster.sh"
TASKMANAGERS = 2
PARALLELISM = 2


@contextmanager
def session_cluster(run_dir: Path) -> Iterator[str]:
    """A standalone session cluster of two TaskManagers with one slot each, stopped by its pids."""
    started = subprocess.run([str(CLUSTER_SH), "start", "--run-dir", str(run_dir), "--taskmanagers",
                              str(TASKMANAGERS), "--slots", "1"], capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        stopped = subprocess.run([str(CLUSTER_SH), "stop", "--run-dir", str(run_dir)], capture_output=True,
                                 text=True, timeout=240)
        assert stopped.returncode == 0, stopped.stderr[-2000:]


@pytest.fixture
def flink_cluster(tmp_path: Path) -> Iterator[str]:
    """Two TaskManagers of one slot each: a job of parallelism 2 needs both."""
    with session_cluster(tmp_path / "cluster") as rest:
        yield rest


def _rest(address: str, path: str, method: str = "GET") -> Any:
    with urllib.request.urlopen(urllib.request.Request(f"http://{address}{path}", method=method), timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


class ClusterJob(StreamingJob):
    """The job on the session cluster: alive while the cluster reports it RUNNING; stop() cancels it."""

    def __init__(self, rest: str, *args: Any) -> None:
        super().__init__(*args)
        self.rest = rest
        self.job_id: str | None = None

    def submit(self, seed: int, extra_args: tuple[str, ...] = ()) -> list[str]:
        """Run the command `--print-submit` prints (with `extra_args` for `pwevent run`); returns its words."""
        printed = subprocess.run([*PWEVENT, "run", "--config", str(self.config_path), "--print-submit",
                                  "--jobmanager", self.rest, "--seed", str(seed), *extra_args], capture_output=True,
                                 text=True, check=True, timeout=120)
        command = printed.stdout.strip()
        submitted = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300,
                                   cwd=self.folder)
        assert "Job has been submitted with JobID" in submitted.stdout, \
            submitted.stdout[-2000:] + submitted.stderr[-3000:]
        self.job_id = submitted.stdout.split("JobID")[-1].split()[0]
        return shlex.split(command)

    def state(self) -> str:
        return str(_rest(self.rest, f"/jobs/{self.job_id}")["state"])

    def alive(self) -> bool:
        return self.job_id is not None and self.state() == "RUNNING"

    def log_tail(self) -> str:
        if self.job_id is None:
            return "not submitted"
        exceptions = _rest(self.rest, f"/jobs/{self.job_id}/exceptions")
        return f"job {self.job_id} {self.state()}: {json.dumps(exceptions)[-4000:]}"

    def stop(self, sig: int = 0) -> None:
        terminal = ("CANCELED", "FAILED", "FINISHED")
        if self.job_id is not None and self.state() not in terminal:
            try:
                _rest(self.rest, f"/jobs/{self.job_id}?mode=cancel", method="PATCH")
            except urllib.error.HTTPError as err:
                if err.code != 409:  # 409: already on its way to a terminal state
                    raise
            deadline = time.monotonic() + 60
            while self.state() not in terminal and time.monotonic() < deadline:
                time.sleep(0.5)


def test_parallelism_2_on_two_taskmanagers_equals_the_replay(kafka_bootstrap: str, flink_cluster: str,
                                                             tmp_path: Path) -> None:
    slots = 12
    job = ClusterJob(flink_cluster, kafka_bootstrap, tmp_path, "DPBD",
                     {"flink": {"parallelism": PARALLELISM, "close_after": "1s", "source_idleness": "3s"}})
    events, requirements = generate(tmp_path, users=40, slots=slots, dynamic=True)
    produce_files(job.kafka, job.config, events, requirements, 0.0)  # the whole input first: a backlog
    try:
        words = job.submit(SEED)
        assert words[words.index("-p") + 1] == str(PARALLELISM) and words[-2:] == ["--seed", str(SEED)]
        deadline = time.monotonic() + 180
        while job.state() != "RUNNING":
            assert job.state() in ("CREATED", "INITIALIZING"), job.log_tail()
            assert time.monotonic() < deadline, "job not RUNNING on the cluster"
            time.sleep(0.5)
        check_equals_replay(job, events, requirements, slots)

        vertices = {v["name"]: v for v in _rest(flink_cluster, f"/jobs/{job.job_id}")["vertices"]}
        population = [name for name in vertices if "Population" in name]
        assert len(population) == 1 and vertices[population[0]]["parallelism"] == 1, list(vertices)
        wide = {name: v for name, v in vertices.items() if v["parallelism"] == PARALLELISM}
        for part in ("kafka events", "kafka requirements", "parse events", "Membership", "Window",
                     "class of each present user"):
            assert any(part in name for name in wide), (part, {n: v["parallelism"] for n, v in vertices.items()})
        for name, vertex in wide.items():  # one subtask on each TaskManager, both running
            hosts = _rest(flink_cluster, f"/jobs/{job.job_id}/vertices/{vertex['id']}/taskmanagers")["taskmanagers"]
            assert len(hosts) == TASKMANAGERS, (name, hosts)
            assert all(h["status"] == "RUNNING" for h in hosts), (name, hosts)
        print(f"\ncluster job {job.job_id}: {len(wide)} of {len(vertices)} vertices at parallelism {PARALLELISM}, "
              f"each on {TASKMANAGERS} TaskManagers; {slots} slots equal to the replay")
        for name, vertex in vertices.items():
            print(f"  {vertex['parallelism']}  {name[:110]}")
    finally:
        job.stop()
