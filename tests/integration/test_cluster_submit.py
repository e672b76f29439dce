"""The command `pwevent run --print-submit` prints (`submit_command`) against real standalone Flink session
clusters (deploy/local/flink-cluster.sh, one slot per TaskManager), and savepoints across clusters
(docs/operations.md, "Savepoints, upgrades and rescaling"). The test builds the command itself, with
the seed and the test switch that `--print-submit` refuses to print (docs/streaming.md, "Test
randomness"): it submits the job, detached, at parallelism 2 on two TaskManagers:
the keyed and JVM operators run as two subtasks, one on each TaskManager, and the Population as one.
Started from a backlog of the first half of the input, it stops with a savepoint; the second half
arrives and the savepoint is restored at parallelism 1 on a new cluster (as an upgrade in application
mode does). Every slot is released once (read_committed), equal slot by slot to `pwevent replay` with
the same seed (the parallelism-1 reference), and the audit topic holds the replay's spend log and
passes the full audit.
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
import yaml

from pwevent.jobs.common.files import iso
from pwevent.jobs.streaming.job import submit_command
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    REPO,
    SEED,
    StreamingJob,
    ahead_origin,
    check_dead_letters,
    check_equals_replay,
    generate,
    replay,
    slot_time,
    stop_with_savepoint,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

CLUSTER_SH = REPO / "deploy" / "local" / "flink-cluster.sh"
TASKMANAGERS = 2
PARALLELISM = 2
SLOTS = 12
HALF = 6


@contextmanager
def session_cluster(run_dir: Path, taskmanagers: int) -> Iterator[str]:
    """A standalone session cluster of `taskmanagers` TaskManagers with one slot each, stopped by its pids."""
    started = subprocess.run([str(CLUSTER_SH), "start", "--run-dir", str(run_dir), "--taskmanagers",
                              str(taskmanagers), "--slots", "1"], capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        stopped = subprocess.run([str(CLUSTER_SH), "stop", "--run-dir", str(run_dir)], capture_output=True,
                                 text=True, timeout=240)
        assert stopped.returncode == 0, stopped.stderr[-2000:]


def _rest(address: str, path: str, method: str = "GET") -> Any:
    with urllib.request.urlopen(urllib.request.Request(f"http://{address}{path}", method=method), timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


class ClusterJob(StreamingJob):
    """The job on the session cluster: alive while the cluster reports it RUNNING; stop() cancels it."""

    def __init__(self, rest: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rest = rest
        self.job_id: str | None = None

    def submit(self, seed: int, restore: str | None = None) -> list[str]:
        """Run the submission `--print-submit` prints, with the seed and the test switch it refuses
        (`submit_command`, restoring `restore` if given); returns its words."""
        command = submit_command(str(self.config_path), self.rest, seed, restore)
        submitted = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300,
                                   cwd=self.folder)
        assert "Job has been submitted with JobID" in submitted.stdout, \
            submitted.stdout[-2000:] + submitted.stderr[-3000:]
        self.job_id = submitted.stdout.split("JobID")[-1].split()[0]
        return shlex.split(command)

    def state(self) -> str:
        return str(_rest(self.rest, f"/jobs/{self.job_id}")["state"])

    def alive(self) -> bool:
        """Submitted and not ended: a job the restart strategy is restarting (RESTARTING) is alive."""
        return self.job_id is not None and self.state() not in ("FAILED", "FAILING", "CANCELED", "CANCELLING",
                                                                 "FINISHED", "SUSPENDED")

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


def wait_state(job: ClusterJob, want: str, passing: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 240  # a guard against a hang, not a measured duration
    while (state := job.state()) != want:
        assert state in passing, job.log_tail()
        assert time.monotonic() < deadline, f"job still {state}"
        time.sleep(0.5)


def check_spread(rest: str, job_id: str) -> None:
    """The keyed and JVM operators at PARALLELISM, one subtask running on each TaskManager; the
    Population at 1."""
    vertices = {v["name"]: v for v in _rest(rest, f"/jobs/{job_id}")["vertices"]}
    population = [name for name in vertices if name.startswith("Population")]
    assert len(population) == 1 and vertices[population[0]]["parallelism"] == 1, list(vertices)
    wide = {name: v for name, v in vertices.items() if v["parallelism"] == PARALLELISM}
    for part in ("kafka events", "kafka requirements", "parse events", "Membership", "Window",
                 "latest event and class of each user"):
        assert any(part in name for name in wide), (part, {n: v["parallelism"] for n, v in vertices.items()})
    for name, vertex in wide.items():
        # the REST API answers from a cache it refreshes when 10 s old: a subtask that was still
        # INITIALIZING then may show so for up to that long after the job's first releases
        deadline = time.monotonic() + 30
        while True:
            hosts = _rest(rest, f"/jobs/{job_id}/vertices/{vertex['id']}/taskmanagers")["taskmanagers"]
            assert len(hosts) == TASKMANAGERS, (name, hosts)
            if all(h["status"] == "RUNNING" for h in hosts):
                break
            assert time.monotonic() < deadline, (name, hosts)
            time.sleep(2)
    print(f"\ncluster job {job_id}: {len(wide)} of {len(vertices)} vertices at parallelism {PARALLELISM}, "
          f"each on {TASKMANAGERS} TaskManagers")
    for name, vertex in vertices.items():
        print(f"  {vertex['parallelism']}  {name[:110]}")


def rewrite_config(path: Path, **flink: Any) -> None:
    raw = yaml.safe_load(path.read_text())
    raw["flink"].update(flink)
    path.write_text(yaml.safe_dump(raw))


def test_parallelism_2_on_two_taskmanagers_then_a_savepoint_restored_at_parallelism_1(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    """A new cluster for the restore: thread mode cannot start a second Python job in a TaskManager
    that ran one (pemja fails with NoSuchFieldException loadedLibraryNames, docs/operations.md)."""
    origin = ahead_origin()  # the input lies ahead of the clock: its slots close by event time, all but the last
    with session_cluster(tmp_path / "cluster-1", TASKMANAGERS) as rest:
        job = ClusterJob(rest, kafka_bootstrap, tmp_path, "DPBD", {"origin": iso(origin),
                                                                   "flink": {"parallelism": PARALLELISM}})
        events, requirements = generate(tmp_path, users=40, slots=SLOTS, dynamic=True, origin_ms=origin)
        produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=HALF)  # a backlog
        try:
            words = job.submit(SEED)
            assert words[words.index("-p") + 1] == str(PARALLELISM) and words[-2:] == ["--seed", str(SEED)]
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            job.wait_releases(3, timeout=240)
            check_spread(rest, str(job.job_id))
            savepoint = stop_with_savepoint(rest, tmp_path / "savepoints")
            assert job.state() == "FINISHED"
        finally:
            job.stop()
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=HALF + 1)
    rewrite_config(job.config_path, parallelism=1)
    with session_cluster(tmp_path / "cluster-2", 1) as rest:
        job.rest = rest
        try:
            words = job.submit(SEED, savepoint)
            assert words[words.index("-s") + 1] == savepoint and words[words.index("-p") + 1] == "1"
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            check_equals_replay(job, events, requirements, SLOTS - 1)
            vertices = {v["name"]: v["parallelism"] for v in _rest(rest, f"/jobs/{job.job_id}")["vertices"]}
            assert set(vertices.values()) == {1}, vertices
        finally:
            job.stop()


#: Records the replay rejects, sent to every events partition amid the backlog: unparsable, out of
#: the domain (timed in slot 3), a repeated time key.
INVALID = [b"{not json", json.dumps({"user": "u1", "time": slot_time(3, 5), "value": 7}).encode(),
           b'{"user": "u2", "time": %d, "value": 1, "time": %d}' % (slot_time(3, 5), slot_time(3, 9))]


def records_read(rest: str, job_id: str) -> dict[str, tuple[int, int]]:
    """Per vertex of the job: (parallelism, records it has read), as Flink's REST API says."""
    vertices = _rest(rest, f"/jobs/{job_id}")["vertices"]
    return {v["name"]: (v["parallelism"], int(v["metrics"]["read-records"])) for v in vertices}


def settled_records_read(rest: str, job_id: str, population_after: int) -> dict[str, tuple[int, int]]:
    """`records_read` once the REST API's metrics (fetched every 10 s by default) show the Population
    past `population_after` records and two fetches 11 s apart agree."""
    deadline, last = time.monotonic() + 180, None  # a guard against a hang, not a measured duration
    while True:
        read = records_read(rest, job_id)
        population = [count for name, (_, count) in read.items() if name.startswith("Population")]
        if population and population[0] > population_after and read == last:
            return read
        assert time.monotonic() < deadline, read
        last = read
        time.sleep(11)


def test_no_event_reaches_a_task_at_parallelism_1(kafka_bootstrap: str, tmp_path: Path) -> None:
    """docs/streaming.md, "Topology": at parallelism 2 on two TaskManagers, over a backlog on 4 events
    partitions with invalid records and the events of unregistered users (10% of the events, each an
    `unknown_user` dead letter) mixed in, the releases equal the replay, the dead letters have its
    reasons, and no vertex at parallelism 1 reads a number of records of the order of the events
    (each reads less than 5% of them: per-slot counts, membership changes, releases, time rows)."""
    slots = 8
    with session_cluster(tmp_path / "cluster", TASKMANAGERS) as rest:
        job = ClusterJob(rest, kafka_bootstrap, tmp_path, "PBD", {"flink": {"parallelism": PARALLELISM}},
                         events_partitions=4)
        registered, requirements = generate(tmp_path, users=400, slots=slots)
        events = str(tmp_path / "events-and-strangers.jsonl")
        strangers = [json.dumps({"user": f"stranger{k}", "time": slot_time(slot, 1000 + k), "value": k % 2})
                     for slot in range(1, slots + 1) for k in range(40)]
        Path(events).write_text(Path(registered).read_text() + "".join(f"{line}\n" for line in strangers))
        mixed = tmp_path / "mixed-events.jsonl"
        mixed.write_text(Path(events).read_text() + "".join(f"{r.decode()}\n" for r in INVALID * 4))
        expected = replay(job, str(mixed), requirements, slots)
        produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=4)
        client = producer(job.kafka)
        for partition in range(4):
            for record in INVALID:
                client.send(job.topics["events"], value=record, partition=partition)
        client.flush()
        client.close()
        produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=5)
        try:
            job.submit(SEED)
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            check_equals_replay(job, events, requirements, slots, expected)
            check_dead_letters(job, expected["rejects"])
            n_events = len(Path(events).read_text().splitlines())
            read = settled_records_read(rest, str(job.job_id), slots)
            print(f"\n{n_events} events; records read per vertex (parallelism, records):")
            for name, (parallelism, count) in read.items():
                print(f"  {parallelism}  {count:>7}  {name[:100]}")
            single = {name: count for name, (parallelism, count) in read.items() if parallelism == 1}
            assert single and all(count < 0.05 * n_events for count in single.values()), single
            wide = [name for name, (parallelism, _) in read.items() if "event time of valid events" in name]
            assert wide and all(read[name][0] == PARALLELISM for name in wide), read
        finally:
            job.stop()
