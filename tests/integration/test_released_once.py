"""A slot's outcome is drawn once, whatever fails (issue 39; docs/operations.md, "The ACLs each
principal needs"). An analyst reads the release topic with any isolation level, so the records of
aborted transactions count: after each failure below, every slot read `read_uncommitted` appears
once or in byte-identical copies (jobs/offline/release_topic.py), the committed releases and the
spend log equal `pwevent replay` with the same seed, and `pwevent audit --release-topic` (the full
audit, the topic check included) passes. The failures: repeated `kill -9` of `pwevent run` and
`--restore latest` over a backlog and over a live paced stream, a stop with a savepoint restored at
another parallelism, a restore from an older retained checkpoint (refused), a broker restart, and a
TaskManager killed on a standalone cluster. The kill points are drawn from `random.Random(SEED_KILLS)`
(printed; PWEVENT_KILL_SEED sets another)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import TopicPartition

from pwevent.jobs.offline.release_topic import distinct_counts, redrawn
from pwevent.jobs.streaming.kafka_io import Message, consumer, read_topic
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    KAFKA_SH,
    PWEVENT,
    SEED,
    StreamingJob,
    check_equals_replay,
    generate,
    make_job,
    stop_with_savepoint,
)
from tests.integration.test_cluster_submit import ClusterJob, _rest, session_cluster, wait_state
from tests.integration.test_savepoints import rest_address

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

SEED_KILLS = int(os.environ.get("PWEVENT_KILL_SEED", "39"))
KILLS = 5
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


def kill_and_restore(job: StreamingJob, rng: random.Random, longest_s: float,
                     down: threading.Event | None = None, seed: int | None = SEED) -> None:
    """A random moment (up to `longest_s`) after the job's tasks run, kill -9 and `--restore latest`;
    `down` is set from the kill until the restored job's tasks run."""
    delay = rng.uniform(0.0, longest_s)
    time.sleep(delay)
    if down is not None:
        down.set()
    job.stop()
    print(f"kill -9 {delay:.2f} s after the tasks ran: {len(committed_slots(job))} slots committed")
    job.start(seed=seed, restore="latest")
    if down is not None:
        down.clear()


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "fresh-noise"])
def test_kills_over_a_backlog(streaming_job: Any, seeded: bool) -> None:
    """KILLS `kill -9` at random points of a backlog, each followed by `--restore latest`. The job
    decides the whole backlog within about a second of running; each kill comes within 3 s of the
    tasks running, with checkpoints 2 s apart, so that some kills meet decided releases that no
    completed checkpoint holds yet and others come after one. Seeded, the job equals the replay.
    With fresh noise (no `--seed`: each draw new, as in production) the replay cannot be compared,
    but a slot decided again after a restore draws other noise: the read_uncommitted check is what
    catches a second draw that was shown (seeded, a restored noise source repeats its draws, and
    such a second draw would be identical)."""
    slots = 40
    rng = random.Random(SEED_KILLS)
    print(f"\nkill seed {SEED_KILLS}")
    seed = SEED if seeded else None
    job = make_job(streaming_job, "PBD", {"flink": {"checkpoint_interval": "2s"}})
    events, requirements = generate(job.folder, users=40, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=seed)
    for _ in range(KILLS):
        kill_and_restore(job, rng, 3.0, seed=seed)
    released_once(job, events, requirements, slots, seeded)


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


def test_kills_over_a_live_stream(streaming_job: Any) -> None:
    """KILLS `kill -9` at random points (up to 3 s after the tasks run) of a stream produced slot by
    slot, 0.5 s a slot, each followed by `--restore latest`."""
    slots = 30
    rng = random.Random(SEED_KILLS + 1)
    print(f"\nkill seed {SEED_KILLS + 1}")
    job = make_job(streaming_job, "PBA", {"flink": {"checkpoint_interval": "500ms"}})
    events, requirements = generate(job.folder, users=30, slots=slots, w=5)
    job.start(seed=SEED)
    down = threading.Event()
    with paced_producer(job, events, requirements, 0.5, slots, down) as done:
        for _ in range(KILLS):
            kill_and_restore(job, rng, 3.0, down)
        assert done.wait(GUARD_S)
    released_once(job, events, requirements, slots)


def test_a_savepoint_restored_at_another_parallelism(streaming_job: Any) -> None:
    """Stop with a savepoint at parallelism 2, the second half of the input, restore at parallelism 1."""
    slots, half = 20, 10
    job = make_job(streaming_job, "DPBD", {"flink": {"parallelism": 2}})
    events, requirements = generate(job.folder, users=30, slots=slots, dynamic=True, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=half)
    job.start(seed=SEED)
    job.wait_releases(half // 2, timeout=GUARD_S)
    savepoint = stop_with_savepoint(rest_address(job), job.folder / "savepoints")
    assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 1)
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"]["parallelism"] = 1
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED, restore=savepoint)
    released_once(job, events, requirements, slots)


def retained_before(job: StreamingJob, stamp_ms: int) -> list[Path]:
    """The job's completed checkpoints triggered before `stamp_ms` whose folders are still there, oldest first."""
    history = job.rest().call(f"/jobs/{job.job_id}/checkpoints")["history"]
    found = [Path(c["external_path"].removeprefix("file:")) for c in sorted(history, key=lambda c: c["id"])
             if c["status"] == "COMPLETED" and c["trigger_timestamp"] < stamp_ms and c.get("external_path")]
    return [path for path in found if path.is_dir()]


def test_a_restore_from_an_older_checkpoint_is_refused(streaming_job: Any) -> None:
    """A retained checkpoint triggered before a slot's records were produced cannot hold its release;
    once that slot is committed, a restore from it is refused (exit 2, the topic unchanged), and
    `--restore latest` then continues as if nothing happened."""
    slots, first = 16, 8
    job = make_job(streaming_job, "PBD", {"flink": {"checkpoint_interval": "1500ms"}})
    events, requirements = generate(job.folder, users=25, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=first)
    job.start(seed=SEED)
    job.wait_releases(first, timeout=GUARD_S)
    older: list[Path] = []
    slot = first
    while not older:  # until a retained checkpoint predates a committed slot (each round one slot more)
        assert slot < slots - 1, "no retained checkpoint older than a committed release"
        produced_ms = int(time.time() * 1000)
        slot += 1
        produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slot, last_slot=slot)
        wait_committed(job, slot)
        older = retained_before(job, produced_ms)
    job.stop()
    older = [path for path in older if path.is_dir()]
    assert older, "the older checkpoints went before the kill"
    before = analyst_read(job.kafka, job.topics["releases"])
    print(f"\nrestoring {older[0]} (triggered before slot {slot} was produced; {len(before)} records on the topic)")
    restore = subprocess.Popen(job.command(seed=SEED, restore=str(older[0])), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=str(job.folder), start_new_session=True)
    try:
        _, stderr = restore.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(restore.pid, signal.SIGKILL)
        _, stderr = restore.communicate()
        pytest.fail(f"the restore from {older[0]} ran for {GUARD_S} s without refusing: {stderr[-3000:]}")
    assert restore.returncode == 2, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "refusing to start:" in line]
    assert said and "older than the release topic" in said[0], stderr[-3000:]
    after = analyst_read(job.kafka, job.topics["releases"])
    assert [(m.key, m.value) for m in after] == [(m.key, m.value) for m in before]
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slot + 1)
    job.start(seed=SEED, restore="latest")
    released_once(job, events, requirements, slots)


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
    the Population; the restart strategy restores the latest checkpoint on the two left, and the
    rest of the input follows."""
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
            deadline = time.monotonic() + GUARD_S * 2  # the JobManager notices the loss, then restarts
            while not restarted(job):
                assert job.state() not in ("FAILED", "CANCELED", "FINISHED"), job.log_tail()
                assert time.monotonic() < deadline, job.log_tail()
                time.sleep(1.0)
            produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 2)
            released_once(job, events, requirements, slots)
        finally:
            job.stop()
