"""Fixtures of the Kafka/Flink integration tests: a real broker started by deploy/local/kafka.sh on a
fresh run folder (stopped by its pid at the end of the session), and a helper that runs the real job
(`pwevent run`, PyFlink mini-cluster) in its own process group against per-test topics."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pwevent.jobs.common.avro_format import input_values
from pwevent.jobs.common.config import load_config
from pwevent.jobs.common.files import iso, write_synthetic
from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.audit import AuditInputs, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.job import TEST_RANDOMNESS_SWITCH
from pwevent.jobs.streaming.kafka_io import Message, read_topic
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.release_format import release_decoder
from pwevent.jobs.streaming.settings import KafkaSettings, stream_settings
from pwevent.jobs.streaming.stop import FlinkRest, RestUnreachable, StopError
from pwevent.operators.registry import REGISTRY

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "deploy" / "local" / "kafka.sh"
PWEVENT = [sys.executable, "-m", "pwevent.jobs.cli.main"]
SCHEMAS = REPO / "docs" / "schemas"


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def check_releases(releases: list[dict[str, Any]], slots: int) -> dict[int, dict[str, Any]]:
    """Exactly one release per slot, integer counts, valid kinds, valid against the schema."""
    validator = schema("release")
    per_slot = Counter(r["slot"] for r in releases)
    assert all(n == 1 for n in per_slot.values()), {s: n for s, n in per_slot.items() if n > 1}
    assert set(range(1, slots + 1)) <= set(per_slot), sorted(per_slot)
    for release in releases:
        validator.validate(release)
        assert release["kind"] in ("publish", "skip", "nullify")
        assert all(isinstance(c, int) for c in release["counts"])
    return {r["slot"]: r for r in releases}


def load_script(name: str) -> Any:
    """A script of deploy/local (a file name with a dash, not importable by name) as a module."""
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py").replace("-", "_"),
                                                  REPO / "deploy" / "local" / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    run_dir = tmp_path_factory.mktemp("kafka-run")
    # A claimed port, not kafka.sh's default 9092: the brokers of several pytest workers start at once.
    started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--port", str(free_loopback_port()),
                              "--owner", str(os.getpid())], capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr
    bootstrap = started.stdout.strip().splitlines()[-1]
    try:
        yield bootstrap
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)


def run_folder(output: str) -> Path | None:
    """The run folder (logs, temporary files) that `pwevent run` names in its `output`."""
    found = re.search(r"Flink log in (\S+)", output)
    return Path(found.group(1)) if found else None


class StreamingJob:
    """One run of the real job against fresh topics; stop() kills its process group (our own pid)."""

    def __init__(self, bootstrap: str, folder: Path, mechanism: str, extra: dict[str, Any] | None = None,
                 admin: dict[str, Any] | None = None, inputs_of: StreamingJob | None = None,
                 events_partitions: int = 2) -> None:
        """`admin`: kafka-python security arguments that may create topics (a secured broker's admin).
        `inputs_of`: an earlier job whose events and requirements topics and consumer group id this
        one shares (its output topics and transactional ids stay its own). `events_partitions`: of a
        new events topic."""
        self.folder = folder
        name = f"t{uuid.uuid4().hex[:8]}"
        roles = ("events", "requirements", "releases", "dead_letters", "audit")
        self.topics = {role: f"{name}.{role}" for role in roles}
        shared: tuple[str, ...] = ()
        group_id = name
        if inputs_of is not None:
            shared = ("events", "requirements")
            self.topics.update({role: inputs_of.topics[role] for role in shared})
            group_id = inputs_of.kafka.group_id
        raw: dict[str, Any] = {
            "mechanism": mechanism, "slot": "60s", "origin": iso(TEST_ORIGIN_MS), "domain": {"type": "binary"},
            "noise": "numpy-fast", "caps": {"max_w": 200},
            "kafka": {"bootstrap": bootstrap, "group_id": group_id, "transactional_id_prefix": name,
                      "topics": self.topics, "transaction_timeout": "60s"},
            "flink": {"checkpoint_interval": "400ms", "checkpoint_dir": str(folder / "checkpoints"),
                      "log_dir": str(folder / "logs"), **SCHEDULE["flink"]},
        }
        for key, value in (extra or {}).items():
            raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
        self.config_path = folder / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(raw))
        self.config = load_config(str(self.config_path))
        settings = stream_settings(self.config, str(folder))
        self.kafka: KafkaSettings = settings.kafka
        self.release_decoder = release_decoder(settings.release)  # the releases in the configured format
        create = load_script("create-topics.py").create_topics
        partitions = {"events": events_partitions, **{role: 1 for role in roles[1:]}}
        outcome = create(bootstrap, {self.topics[r]: partitions[r] for r in roles if r not in shared}, client=admin)
        assert set(outcome.values()) == {"created"}, outcome
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.pwevent = PWEVENT  # the command that runs `pwevent` (test_wheel_install.py: an installed one)
        #: what `pwevent run` needs for this test's noise (test_upgrade.py: an earlier release knows none)
        self.test_switches = [TEST_RANDOMNESS_SWITCH]
        self.env: dict[str, str] | None = None  # the job's environment (None: this process's)
        self.process_code: int | None = None

    def command(self, seed: int | None = 1, restore: str | None = None) -> list[str]:
        """The `pwevent run` command line of this job: a test run (numpy noise, seeded when `seed`
        is given), so with the test switch."""
        args = [*self.pwevent, "run", "--config", str(self.config_path), *self.test_switches]
        if seed is not None:
            args += ["--seed", str(seed)]
        if restore:
            args += ["--restore", restore]
        return args

    def start(self, seed: int | None = 1, restore: str | None = None, timeout: float = 120,
              extra_args: list[str] | None = None, wait_tasks: bool = True) -> float:
        """Start `pwevent run`; returns once the job is RUNNING and (`wait_tasks`) every one of its
        tasks is running (or finished); the job id is then `self.job_id`. Without `wait_tasks` for
        a job that fails over and over from its start (its tasks are seldom all running at once)."""
        self.runs += 1
        ready = self.folder / f"ready-{self.runs}"
        args = [*self.command(seed, restore), "--ready-file", str(ready), *(extra_args or [])]
        log = open(self.folder / f"job-{self.runs}.log", "wb")
        began = time.monotonic()
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                        cwd=str(self.folder), env=self.env)
        while not ready.exists():
            assert self.process.poll() is None, self.log_tail()
            assert time.monotonic() - began < timeout, "job not RUNNING in time"
            time.sleep(0.2)
        self.job_id = ready.read_text().strip()
        rest = self.rest()
        while wait_tasks and not self.tasks_running(rest):
            assert self.process.poll() is None, self.log_tail()
            assert time.monotonic() - began < timeout, \
                f"job's tasks not running in time; {rest.base} says: {self.task_states(rest)}; " \
                f"/jobs/{self.job_id}: {str(rest.call(f'/jobs/{self.job_id}'))[:800]}; " \
                f"/jobs/overview: {str(rest.call('/jobs/overview'))[:800]}"
            time.sleep(0.2)
        return time.monotonic() - began

    def task_states(self, rest: FlinkRest) -> list[tuple[str, dict[str, int], int]]:
        """(name, subtasks by state, parallelism) of each of the job's vertices, as the REST API says."""
        vertices = rest.call(f"/jobs/{self.job_id}").get("vertices") or []
        return [(v["name"][:60], {k: n for k, n in v["tasks"].items() if n}, v["parallelism"]) for v in vertices]

    def tasks_running(self, rest: FlinkRest) -> bool:
        """Whether every subtask of the job's vertices is running (or finished: a bounded input). An
        answer without vertices (the REST endpoint has not registered the job yet) is not running, and
        nor is no answer within the call's timeout: on a busy machine the local cluster's REST API once
        took over 10 s to answer right after a start (2026-12-07); `start` keeps its deadline."""
        try:
            states = self.task_states(rest)
        except RestUnreachable:
            return False
        return bool(states) and all(by.get("RUNNING", 0) + by.get("FINISHED", 0) == n for _, by, n in states)

    def rest(self) -> FlinkRest:
        """The local run's REST API, at the address its log names."""
        found = re.search(r"REST API at http://(\S+)", (self.folder / f"job-{self.runs}.log").read_text())
        assert found, self.log_tail()
        return FlinkRest(found.group(1))

    def wait_checkpoints(self, count: int, timeout: float = 120) -> None:
        """Until `count` more checkpoints of the running job have completed (every record read before
        the call is then decided in the sinks' committed output or in a later transaction)."""
        rest, began = self.rest(), time.monotonic()
        target = int(rest.call(f"/jobs/{self.job_id}/checkpoints")["counts"]["completed"]) + count
        while int(rest.call(f"/jobs/{self.job_id}/checkpoints")["counts"]["completed"]) < target:
            assert self.alive(), self.log_tail()
            assert time.monotonic() - began < timeout, f"{count} checkpoints not completed in {timeout} s"
            time.sleep(0.2)

    def run_folders(self) -> list[Path]:
        """The folders of this job's runs, in order (the folders their output names)."""
        logs = [self.folder / f"job-{run}.log" for run in range(1, self.runs + 1)]
        return [folder for log in logs if log.exists() and (folder := run_folder(log.read_text(errors="replace")))]

    def flink_logs(self) -> str:
        """The Flink logs of every run of this job."""
        logs = [path for folder in self.run_folders() for path in folder.glob("*.log")]
        return "".join(path.read_text(errors="replace") for path in logs)

    def log_tail(self) -> str:
        text = (self.folder / f"job-{self.runs}.log").read_text(errors="replace")
        return text[-4000:]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the job's process group (mini-cluster JVM included); `process_code` is then
        the exit code of `pwevent run`."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process_code = self.process.wait(timeout=60)
        self.process = None

    def read(self, role: str, idle_s: float = 2.0) -> list[Message]:
        return read_topic(self.kafka, self.topics[role], idle_s=idle_s, max_s=90)

    def wait_records(self, role: str, count: int, keep: Callable[[dict[str, Any]], bool] | None = None,
                     timeout: float = 60) -> list[dict[str, Any]]:
        """The records of topic `role` (those `keep` accepts), once there are `count` of them, or all
        there are at the timeout. A slot's release and its spend lines are committed in one
        transaction; the dead letters' sink commits its own when a checkpoint completes, so a reader
        may see a slot's release a moment before the dead letters of the same checkpoint."""
        deadline = time.monotonic() + timeout
        while True:
            records = [r for r in (m.json() for m in self.read(role, idle_s=1.0)) if keep is None or keep(r)]
            if len(records) >= count or time.monotonic() > deadline:
                return records
            time.sleep(1.0)

    def wait_releases(self, count: int, timeout: float = 90) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        releases: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            releases = [self.release_decoder.decode(m.value) for m in self.read("releases", idle_s=1.0)]
            if len({r["slot"] for r in releases}) >= count:
                return releases
            assert self.alive(), self.log_tail()
            time.sleep(1.0)
        raise AssertionError(f"only {len(releases)} releases after {timeout}s\n{self.log_tail()}\n"
                             f"watermarks: {self.watermarks()}")

    def watermarks(self) -> dict[str, Any]:
        """Each operator's current input watermark, per subtask, from the REST API (what a stalled
        job's failure message shows). ValidTime handles its inputs' watermarks itself, so its entry
        stays at Long.MIN_VALUE whatever it received: read its time from the operators below it."""
        try:
            rest = self.rest()
            return {vertex["name"][:100]: rest.call(f"/jobs/{self.job_id}/vertices/{vertex['id']}/watermarks")
                    for vertex in rest.call(f"/jobs/{self.job_id}")["vertices"]}
        except (StopError, AssertionError) as error:  # a diagnostic: its failure must not hide the test's
            return {"unavailable": repr(error)}


@pytest.fixture
def streaming_job(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Any]:
    jobs: list[StreamingJob] = []

    def make(mechanism: str, extra: dict[str, Any] | None = None,
             inputs_of: StreamingJob | None = None) -> StreamingJob:
        folder = tmp_path / f"job{len(jobs)}"
        folder.mkdir()
        job = StreamingJob(kafka_bootstrap, folder, mechanism, extra, inputs_of=inputs_of)
        jobs.append(job)
        return job

    try:
        yield make
    finally:
        for job in jobs:
            job.stop()


# The job against `pwevent replay` (the parallelism-1 reference): shared by test_streaming.py and
# test_cluster_submit.py.

SEED = 1
SLOT_MS = 60_000
#: The tests' origin: 90 one-minute slots before the session started, so that a test's input (at most
#: 40 slots) is a backlog the release schedule has passed: once the job has read it, every slot up to
#: the clock less `flink.release_delay` is released (docs/streaming.md, "Time").
TEST_ORIGIN_MS = time.time_ns() // 1_000_000 // SLOT_MS * SLOT_MS - 90 * SLOT_MS


def generate(folder: Path, users: int, slots: int, dynamic: bool = False, w: int = 40,
             origin_ms: int = TEST_ORIGIN_MS) -> tuple[str, str]:
    stream = SyntheticStream("Sin", users, slots, seed=3)
    events, requirements = write_synthetic(stream, str(folder / "data"), 0.6, w, SLOT_MS, dynamic,
                                           types=3, change_every=4, origin_ms=origin_ms)
    return str(events), str(requirements)


def ahead_origin(lead_slots: int = 5) -> int:
    """An origin `lead_slots` one-minute slots ahead of the clock, on the minute: a test's input of up
    to 50 slots then lies ahead of the clock (within `flink.max_lead`), so the release schedule (the
    clock less the delay) stays behind it and its slots close by event time alone, as the backlog's
    do: a test that runs the job several times, each run over a part of the input, sees each part
    decided by its records, and every slot but the input's last released (docs/streaming.md, "Time")."""
    return (time.time_ns() // 1_000_000 // SLOT_MS + lead_slots) * SLOT_MS


def replay(job: StreamingJob, events: str, requirements: str, through: int) -> dict[str, list[dict[str, Any]]]:
    """`pwevent replay` of the job's configuration through slot `through` (the public horizon)."""
    out = job.folder / "replay"
    out.mkdir(exist_ok=True)
    run_replay(job.config, events, requirements, str(out / "releases.jsonl"), str(out / "spend.jsonl"),
               rejects_out=str(out / "rejects.jsonl"), seed=SEED, through=through)
    return {name: [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
            for name in ("releases", "spend", "rejects")}


def full_audit(job: StreamingJob, requirements: str, releases: list[dict[str, Any]],
               audit: list[dict[str, Any]]) -> None:
    """The auditor trusts nothing: users' windows against the requirements they declared (the
    input, read as `pwevent audit` reads it), ledgers against the releases."""
    for record in audit:
        schema("spend").validate(record)
    lines = [(f"{requirements}:{n}", record)
             for n, record in enumerate(input_values(requirements, job.config.requirements), 1)]
    report = audit_records(audit, AuditInputs.build(lines, releases, job.config))
    assert report.ok and report.skipped is None, report.render()


def check_dead_letters(job: StreamingJob, rejects: list[dict[str, Any]],
                       leave_out: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The dead letters, each valid under its schema, have the reasons of the replay's `rejects`
    (those in `leave_out` left out), waited for as `wait_records` does. Returns the dead letters."""
    want = Counter(r["reason"] for r in rejects if r["reason"] not in leave_out)
    dead = job.wait_records("dead_letters", sum(want.values()))
    for record in dead:
        schema("dead-letter").validate(record)
    reasons = Counter(d["reason"] for d in dead)
    assert reasons == want, (reasons, want)
    return dead


def spend_lines(log: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in log)


def check_equals_replay(job: StreamingJob, events: str, requirements: str, slots: int,
                        expected: dict[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """Slots 1..`slots` released exactly once each and equal to the replay's; the audit topic holds
    the replay's spend log, line for line, and passes the full audit. Returns the releases."""
    releases = job.wait_releases(slots, timeout=240)
    by_slot = check_releases(releases, slots)
    expected = expected or replay(job, events, requirements, slots)
    for slot in range(1, slots + 1):
        assert by_slot[slot] == expected["releases"][slot - 1], f"slot {slot} differs from the replay"
    decided = [r for r in releases if r["slot"] <= slots]
    want = [r for r in expected["spend"] if r.get("slot", r.get("since", 0)) <= slots]
    in_range = job.wait_records("audit", len(want), lambda r: r.get("slot", r.get("since", 0)) <= slots)
    assert spend_lines(in_range) == spend_lines(want)
    full_audit(job, requirements, decided, in_range)
    return releases


# Off the happy path: what the job tests share (test_streaming.py, test_event_time.py, test_restarts.py,
# and the format tests).

#: Baselines run every user at one global requirement; the synthetic users' own are looser (w 40, E >= 0.6).
BASELINE = {"window": 40, "epsilon": 0.6}
#: A short release delay: once a test's backlog is read, its slots are released within a second.
SCHEDULE = {"flink": {"release_delay": "1s"}}
#: Adaptive re-decides from a short evidence window and a loose drift test, so that 12 slots see it
#: switch family (even spending to absorption).
QUICK_SWITCH = {"adaptive": {"evidence": 4, "static_drift": 100.0, "level_margin": 0.0}}


def slot_time(slot: int, offset_ms: int = 0) -> int:
    return TEST_ORIGIN_MS + (slot - 1) * SLOT_MS + offset_ms


def idle_cores(over_s: float = 1.0) -> float:
    """How many cores were idle, on average, over the next `over_s` seconds (/proc/stat)."""
    def sample() -> tuple[int, int]:
        fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, all
    idle0, total0 = sample()
    time.sleep(over_s)
    idle1, total1 = sample()
    return (os.cpu_count() or 1) * (idle1 - idle0) / max(1, total1 - total0)


@contextmanager
def cpu_burner() -> Iterator[None]:
    """A busy machine for the duration: a process that keeps one core busy (the machine has two),
    unless less than one core is idle already (the suite's other workers keep it busy): a second
    burner would only slow the suite, not make the machine any busier for this test."""
    idle = idle_cores()
    if idle < 1.0:
        print(f"\nbusy machine: {idle:.2f} cores idle, no burner needed")
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        burner.send_signal(signal.SIGKILL)
        burner.wait(timeout=10)


def make_job(streaming_job: Any, mechanism: str, extra: dict[str, Any] | None = None) -> StreamingJob:
    entry = REGISTRY.get(mechanism)
    own = {k: v for k, v in {**BASELINE, **QUICK_SWITCH}.items() if k in entry.config_keys}
    merged: dict[str, Any] = {**SCHEDULE, **own}
    for key, value in (extra or {}).items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return streaming_job(mechanism, merged)


def stop_with_savepoint(rest: str, target: Path | str) -> str:
    """`pwevent stop --savepoint` of the job at `rest` into `target`, a local folder or a URI (s3://...);
    returns the savepoint's path."""
    stopped = subprocess.run([*PWEVENT, "stop", "--jobmanager", rest, "--savepoint", str(target)],
                             capture_output=True, text=True, timeout=400)
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    savepoint = stopped.stdout.strip()
    assert "savepoint-" in savepoint, savepoint
    assert isinstance(target, str) or Path(savepoint.removeprefix("file:")).is_dir(), savepoint
    return savepoint


def framed_backlog_equals_replay(job: StreamingJob, values: list[bytes], requirements: str, slots: int,
                                 bad: list[tuple[bytes, int]], bad_at: int) -> list[dict[str, Any]]:
    """The job over a backlog of framed records equals `pwevent replay` of them: `values` (in time
    order) as a framed-records file; `bad` (value, Kafka timestamp) sent on both events partitions
    before slot `bad_at`'s events. The replay of the file alone rejects nothing; with `bad` mixed in
    twice it releases and spends the same, and its rejects are the job's dead letters. The job reads
    the whole backlog beside a CPU burner; its releases, spend log (line for line) and full audit are
    the replay's (`check_equals_replay`). Returns the dead letters."""
    from pwevent.jobs.common.avro_format import framed_line

    events = job.folder / "events.b64"
    events.write_bytes(b"".join(framed_line(v) + b"\n" for v in values))
    expected = replay(job, str(events), requirements, slots)
    assert len(expected["releases"]) == slots and not expected["rejects"], expected["rejects"][:3]
    mixed = job.folder / "mixed-events.b64"
    mixed.write_bytes(events.read_bytes() + b"".join(framed_line(v) + b"\n" for v, _ in bad + bad))
    whole = replay(job, str(mixed), requirements, slots)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]

    return backlog_with_bad_events(job, str(events), requirements, slots, expected,
                                   [KafkaRecord(value, None, stamp) for value, stamp in bad], bad_at, whole["rejects"])


def send_record(client: Any, topic: str, record: KafkaRecord, partition: int | None = None) -> None:
    """`record` as it is (key, timestamp, headers) to `topic` by a kafka-python producer."""
    client.send(topic, value=record.value, key=record.key, timestamp_ms=record.timestamp_ms,
                headers=list(record.headers) or None, partition=partition)


def backlog_with_bad_events(job: StreamingJob, events: str, requirements: str, slots: int,
                            expected: dict[str, list[dict[str, Any]]], bad: list[KafkaRecord], bad_at: int,
                            rejects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The backlog of `events` and `requirements` in the topics, `bad` sent on both events partitions
    before slot `bad_at`'s events, read at full speed beside a CPU burner: the job equals the replay
    (`expected`), spend log line for line, with the full audit, and its dead letters are `rejects` (the
    replay's of the files with `bad` mixed in); returns the dead letters."""
    from pwevent.jobs.streaming.kafka_io import producer
    from pwevent.jobs.streaming.produce import produce_files

    client = producer(job.kafka)

    def before(slot: int, _: float) -> None:
        if slot == bad_at:  # in the middle of every events partition, ahead of the slots after it
            for partition in (0, 1):
                for record in bad:
                    send_record(client, job.topics["events"], record, partition)
            client.flush()

    produce_files(job.kafka, job.config, events, requirements, 0.0, before_slot=before)
    client.close()
    with cpu_burner():
        job.start(seed=SEED)
        check_equals_replay(job, events, requirements, slots, expected)
    return check_dead_letters(job, rejects)
