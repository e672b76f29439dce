"""Streaming job benchmark: the job's rate against a bare Flink SQL ceiling, and slot latency (issue 8).

    .venv/bin/python benchmarks/bench_stream.py [--ceiling] [--job] [--users 10000] [--slots 300]
        [--registered N] [--mechanism PBD[,DPBA,...]] [--change-every 50 --change-share 0.01]
        [--ceiling-format raw|json|both] [--live-slots 6] [--pace 6] [--producer java|python]
        [--checkpoint-interval 1s] [--execution-mode thread|process] [--state-backend hashmap|rocksdb] [--incremental]
        [--event-time field|kafka] [--events-format json|avro-confluent] [--timeout 1200] [--json-out FILE]
        [--bootstrap HOST:PORT]

Starts its own broker with deploy/local/kafka.sh (fresh run folder, stopped by pid) unless
--bootstrap is given, and fresh topics (events: 2 partitions; all with retention.ms=-1, the records
carry 2024 timestamps). Then:

0. backlog: a synthetic stream (Sin, every present user sends one event per slot
   and one-minute slots) of `--users` x `--slots` events in the events topic, one requirement record
   per registered user in the requirements topic (`--registered`, default `--users`: users
   u0..u{N-1} register at slot 1, the first `--users` of them send the events; the others never
   send anything, and `--register-slots K` spreads their registrations evenly over slots 1..K;
   `--registered 0` with `--default-requirement`: none, an events-only topic), and
   one closing event (first instant of slot `--slots`+1)
   in each events partition, so the last backlog slot's window can close. `--producer java` (the
   default) sends with benchmarks/BacklogProducer.java on the broker's kafka-clients jar;
   `--producer python` with kafka-python (`pwevent produce`'s code; slow, for comparison). The
   generation time (writing the files + producing) is printed and not part of any rate.
   Dynamic mechanisms (DPBD, DPBA) register with (backward (1, 10), forward drawn from {40, 80, 120}
   x {0.6, 0.8, 1.0}); with `--change-every K`, at slots 1+K, 1+2K, ... of the backlog a random
   `--change-share` of the registered users declares a new forward requirement from the same levels
   (a record equal to the user's current one changes nothing).
1. `--ceiling`: benchmarks/ceiling.py, the bare SQL pipeline (raw STRING value -> JSON_VALUE/TRY_CAST
   per field -> event time from the JSON field, watermark on the source -> window deduplication,
   latest event per user and window -> count per (window, cell) -> exactly-once Kafka sink), with
   the job's Flink configuration. `--ceiling-format json|both`: the `format json` variant (instead of
   / as well as JSON_VALUE).
2. `--job`: the real job (`python -m pwevent.jobs.cli.main run --config ... --insecure-test-randomness
   --ready-file ...`, PBD, numpy-fast noise, exactly-once sinks) on the same backlog, then
   `--live-slots` more slots, one per `--pace` seconds, for the latency: latency of slot t = time a
   read_committed consumer receives slot t's release - time the first event of slot t+1 was sent
   (the event that moves the watermark past slot t's end). Target: <= 2 x checkpoint interval + 1 s.
`--events-format avro-confluent`: a Schema Registry is started too (deploy/local/schema-registry.sh,
stopped by its pid), the events (the backlog and the closing events; the requirements stay JSON)
are sent as {user: string, time: timestamp-millis, value: int} Avro datums in the Confluent wire
format under the schema registered for the events topic, the job reads them with `events.format:
avro-confluent`, and the ceiling is Flink's own `avro-confluent` format (flink-sql-avro-confluent-
registry, fetched with Maven into the jar cache) with the fields as columns; needs `--producer java`
and, with the job, `--live-slots 0`.
Neither flag: both, ceiling first, on the same backlog (each run reads it from the earliest offset
with its own consumer group and transactional ids), and `ratio = job / ceiling` (raw ceiling).
`--mechanism A,B`: one job run per mechanism, one after the other on the same backlog (each with
its own output topics); several mechanisms need `--live-slots 0`.

Rate of a run = backlog events / (time from the job RUNNING (its ready file) to the commit of the
last backlog slot's output: the slot's counts for the ceiling, its release for the job, seen by a
read_committed consumer). It includes the job's warm-up; "warm" is the rate from the first to the
last backlog slot's commit. Each run also reports the RSS of its process tree (JVM and Python
separately) and the size of its latest completed checkpoint folder, at three points for the job:
when slot 1's release is committed ("registered": every registration has gone through
ParseRequirements and Membership and the Population has applied the changes; the time from
RUNNING to it is the registrations' absorption time, job warm-up included), when the last backlog
slot's is ("backlog"), and at the end of the live phase ("live"). For dynamic mechanisms (or with
`--classes`) the job's audit topic is read afterwards: the Population's live classes per slot are
its `spend` lines per slot (max and last backlog slot reported); the dead letters are counted. Each run is killed (its
process group) after it, and after `--timeout` seconds at most. Prints a table (and `--json-out`);
it is not a pass/fail test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO / "deploy" / "local" / "kafka.sh"
REGISTRY_SH = REPO / "deploy" / "local" / "schema-registry.sh"
JAR_CACHE = Path(os.environ.get("PWEVENT_CACHE", REPO / ".cache" / "jars"))
KAFKA_JARS = JAR_CACHE / "kafka"
#: The ceiling's Avro format (benchmark only; the newest release on Maven Central).
AVRO_CONFLUENT_FORMAT = "org.apache.flink:flink-sql-avro-confluent-registry:2.1.0"
#: The events' writer schema with --events-format avro-confluent (BacklogProducer.java's field order).
EVENT_SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "user", "type": "string"}, {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "value", "type": "int"}]}
DYNAMIC = ("DPBD", "DPBA")
#: Forward requirements of the dynamic runs (registration and changes): w x epsilon.
FORWARD_W, FORWARD_EPSILON = (40, 80, 120), (0.6, 0.8, 1.0)


@dataclass
class RunResult:
    """One measured run (ceiling or job) on the backlog."""

    name: str
    events: int
    seconds: float | None = None  # job RUNNING -> last backlog slot committed
    warm_rate: float | None = None  # first -> last backlog slot committed
    jvm_rss_mb: float | None = None
    python_rss_mb: float | None = None
    checkpoint_mb: float | None = None
    checked: str = ""  # what was verified in the output
    load: tuple[float, float] | None = None  # 1-minute load average when RUNNING and at the end
    latencies_s: list[float] = field(default_factory=list)
    error: str | None = None
    checkpoint_shared_mb: float | None = None  # incremental checkpoints: the shared/ files they reference
    # job: (seconds from RUNNING, JVM RSS MB, Python RSS MB, checkpoint MB, shared MB, 1-minute load) per point
    phases: dict[str, tuple[float, float, float, float | None, float, float]] = field(default_factory=dict)
    classes: dict[str, Any] | None = None  # live classes per slot, from the audit topic
    dead_letters: dict[str, int] | None = None  # by reason

    @property
    def rate(self) -> float | None:
        return self.events / self.seconds if self.seconds else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ceiling", action="store_true", help="run the bare SQL ceiling (see above)")
    parser.add_argument("--job", action="store_true", help="run the real job (see above); neither flag: both")
    parser.add_argument("--users", type=int, default=10_000, help="present users, one event each per slot")
    parser.add_argument("--registered", type=int, help="registered users in all (default --users); the first "
                        "--users of them send the events; 0 with --default-requirement: no requirement records "
                        "at all (an events-only topic), the default registers every user")
    parser.add_argument("--mechanism", default="PBD", help="the job's mechanism, or several comma-separated "
                        "(one job run each, same backlog; needs --live-slots 0)")
    parser.add_argument("--default-requirement", metavar="W,EPSILON", help="fixed mechanisms: the job's "
                        "default_requirement (e.g. 40,1.0); every (user, slot) with an event then also passes "
                        "the Membership operator, which is what this measures")
    parser.add_argument("--change-every", type=int, default=0, help="dynamic mechanisms: requirement changes "
                        "every this many slots (0: none)")
    parser.add_argument("--change-share", type=float, default=0.01, help="share of registered users changing")
    parser.add_argument("--register-slots", type=int, default=1,
                        help="spread the registrations of the users who send nothing evenly over slots 1..K "
                             "(fixed mechanisms; default 1: all at slot 1, whose close then fires one Membership "
                             "timer per registered user in a single step)")
    parser.add_argument("--classes", action="store_true", help="read the audit topic for the class count "
                        "(always for dynamic mechanisms)")
    parser.add_argument("--slots", type=int, default=300, help="backlog slots (one minute each)")
    parser.add_argument("--ceiling-format", choices=("raw", "json", "both"), default="raw",
                        help="raw: JSON_VALUE per field (the reference of the ratio); json: `format json`")
    parser.add_argument("--live-slots", type=int, default=6, help="job only: paced slots after the backlog")
    parser.add_argument("--pace", type=float, default=6.0, help="seconds per live slot")
    parser.add_argument("--producer", choices=("java", "python"), default="java",
                        help="backlog producer: BacklogProducer.java (fast) or kafka-python")
    parser.add_argument("--checkpoint-interval", default="1s")
    parser.add_argument("--checkpoint-timeout", default="10m", help="flink.checkpoint_timeout")
    parser.add_argument("--tolerable-failed-checkpoints", type=int, default=5,
                        help="flink.tolerable_failed_checkpoints (0 = fail over at the first expired one)")
    parser.add_argument("--execution-mode", choices=("thread", "process"), default="thread")
    parser.add_argument("--bundle-size", type=int, default=1000)
    parser.add_argument("--bundle-time", default="100ms")
    parser.add_argument("--state-backend", choices=("hashmap", "rocksdb"), default="hashmap")
    parser.add_argument("--incremental", action="store_true",
                        help="flink.incremental_checkpoints: true (rocksdb only: checkpoints write what changed)")
    parser.add_argument("--event-time", choices=("field", "kafka"), default="field",
                        help="job only: field: the parsed time field; kafka: record timestamps")
    parser.add_argument("--source-idleness", default="10s",
                        help="flink.source_idleness (the job's default): a quiet partition stops holding the "
                        "watermark after this. Short values make backlog events late: a partition the reader "
                        "has not fetched from for that long stops holding, the other one runs ahead")
    parser.add_argument("--flink-extra", action="append", default=[], metavar="KEY=VALUE",
                        help="job and ceiling: a flink.extra entry (repeatable), e.g. "
                             "taskmanager.memory.managed.size=2g (RocksDB's block cache and write buffers)")
    parser.add_argument("--events-format", choices=("json", "avro-confluent"), default="json",
                        help="how the events are written and read (see above)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a run may take at most")
    parser.add_argument("--json-out", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--keep", action="store_true",
                        help="keep the generated files and the broker's data in the work folder (deleted by "
                        "default: about 0.5 GB at full size; logs, configs and checkpoints stay)")
    args = parser.parse_args()
    if not (args.ceiling or args.job):
        args.ceiling = args.job = True
    args.registered = args.users if args.registered is None else args.registered
    args.mechanisms = [m.strip() for m in args.mechanism.split(",") if m.strip()]
    if args.registered < args.users and not (args.registered == 0 and args.default_requirement):
        parser.error("--registered must be at least --users (or 0 with --default-requirement)")
    if not 1 <= args.register_slots <= args.slots:
        parser.error("--register-slots must be between 1 and --slots")
    if len(args.mechanisms) > 1 and args.job and args.live_slots:
        parser.error("several mechanisms need --live-slots 0")
    dynamic = {m in DYNAMIC for m in args.mechanisms}
    if len(dynamic) > 1:
        parser.error("mechanisms of one run must be all fixed or all dynamic (same requirement records)")
    args.dynamic = dynamic.pop()
    if args.change_every and not args.dynamic:
        parser.error("--change-every needs a dynamic mechanism (DPBD, DPBA)")
    if args.events_format != "json" and (args.producer != "java" or (args.job and args.live_slots)):
        parser.error("--events-format avro-confluent needs --producer java and, with the job, --live-slots 0")
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the `finally` blocks stop the runs and the broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="pwevent-bench-"))
    print(f"work folder: {work}")
    args.registry_url = None
    if args.events_format == "avro-confluent":
        registry_run = work / "registry"
        started = subprocess.run([str(REGISTRY_SH), "start", "--run-dir", str(registry_run),
                                  "--owner", str(os.getpid())], capture_output=True, text=True, check=True)
        args.registry_url = started.stdout.strip().splitlines()[-1]
        try:
            return with_broker(args, work)
        finally:
            subprocess.run([str(REGISTRY_SH), "stop", "--run-dir", str(registry_run)], capture_output=True)
    return with_broker(args, work)


def with_broker(args: argparse.Namespace, work: Path) -> int:
    """`measure` on --bootstrap, else on a broker of its own (started and stopped here)."""
    if args.bootstrap:
        try:
            return measure(args, args.bootstrap, work)
        finally:
            if not args.keep:
                shutil.rmtree(work / "data", ignore_errors=True)
    kafka_run = work / "kafka"
    started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(kafka_run)],
                             capture_output=True, text=True, check=True)
    try:
        return measure(args, started.stdout.strip().splitlines()[-1], work)
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(kafka_run)], capture_output=True)
        if not args.keep:
            for folder in (work / "data", kafka_run / "data"):
                shutil.rmtree(folder, ignore_errors=True)


def job_config(args: argparse.Namespace, bootstrap: str, name: str, topics: dict[str, str], work: Path,
               mechanism: str = "PBD") -> dict:
    """The job's configuration (also the ceiling's: it reads the kafka: and flink: sections)."""
    default = {}
    if args.default_requirement:
        w, epsilon = args.default_requirement.split(",")
        default = {"default_requirement": {"w": int(w), "epsilon": float(epsilon)}}
    events = {"events": {"format": "avro-confluent", "schema_registry": {"url": args.registry_url}}} \
        if args.registry_url else {}
    return {
        "mechanism": mechanism, "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"},
        "noise": "numpy-fast", "caps": {"max_w": 200}, **default, **events,
        "kafka": {"bootstrap": bootstrap, "group_id": name, "transactional_id_prefix": name, "topics": topics,
                  "event_time": args.event_time},
        "flink": {"checkpoint_interval": args.checkpoint_interval, "checkpoint_dir": str(work / f"checkpoints-{name}"),
                  "checkpoint_timeout": args.checkpoint_timeout,
                  "tolerable_failed_checkpoints": args.tolerable_failed_checkpoints,
                  "execution_mode": args.execution_mode, "bundle_size": args.bundle_size,
                  "bundle_time": args.bundle_time, "state_backend": args.state_backend,
                  "incremental_checkpoints": args.incremental, "source_idleness": args.source_idleness,
                  # latency is measured from the event that moves the watermark past the slot; the
                  # quiet-partition fallback (default 5 s, under the 6 s pace) would close it before
                  "close_after": "0",
                  "extra": dict(item.split("=", 1) for item in args.flink_extra)},
    }


def write_requirements(args: argparse.Namespace, path: Path, slot_ms: int) -> tuple[int, int]:
    """One registration per registered user (at slot 1; the silent ones over `--register-slots`), then
    (dynamic, `--change-every`) the changes of the backlog slots, in time order. Returns
    (registrations, change records)."""
    import numpy as np

    from pwevent.jobs.common.files import DEMO_ORIGIN, DEMO_ORIGIN_MS
    from pwevent.jobs.common.slots import iso
    from pwevent.jobs.common.synthetic import RequirementDraw

    n = args.registered
    changes = 0
    with path.open("w", encoding="utf-8") as handle:
        if not args.dynamic:
            silent = max(n - args.users, 1)
            for user, req in enumerate(RequirementDraw(0.6, 120).fixed(n, 5)):
                slot = 1 if user < args.users else 1 + (user - args.users) * args.register_slots // silent
                time = DEMO_ORIGIN if slot == 1 else iso(DEMO_ORIGIN_MS + (slot - 1) * slot_ms)
                handle.write(f'{{"user":"u{user}","time":"{time}","w":{req.w},"epsilon":{req.epsilon}}}\n')
            return n, 0
        rng = np.random.default_rng([5, 7])

        def forward(count: int) -> tuple[np.ndarray, np.ndarray]:
            return rng.choice(FORWARD_W, count), rng.choice(FORWARD_EPSILON, count)

        def line(user: int, time: str, w: int, epsilon: float) -> str:
            return (f'{{"user":"u{user}","time":"{time}","backward":{{"w":1,"epsilon":10.0}},'
                    f'"forward":{{"w":{int(w)},"epsilon":{float(epsilon)}}}}}\n')

        for user, (w, epsilon) in enumerate(zip(*forward(n), strict=True)):
            handle.write(line(user, DEMO_ORIGIN, w, epsilon))
        if args.change_every > 0:
            share = max(1, round(args.change_share * n))
            for slot in range(1 + args.change_every, args.slots + 1, args.change_every):
                time = iso(DEMO_ORIGIN_MS + (slot - 1) * slot_ms)
                users = np.sort(rng.choice(n, share, replace=False))
                for user, w, epsilon in zip(users, *forward(share), strict=True):
                    handle.write(line(int(user), time, w, epsilon))
                    changes += 1
    return n, changes


def measure(args: argparse.Namespace, bootstrap: str, work: Path) -> int:
    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.common.files import DEMO_ORIGIN_MS, write_synthetic
    from pwevent.jobs.common.synthetic import SyntheticStream
    from pwevent.jobs.streaming.settings import stream_settings

    name = f"bench{uuid.uuid4().hex[:6]}"
    shared = {r: f"{name}.{r}" for r in ("events", "requirements")}
    job_topics = {m: {**shared, **{r: f"{name}.{m}.{r}" for r in ("releases", "dead_letters", "audit")}}
                  for m in args.mechanisms} if args.job else {}
    formats = ["raw", "json"] if args.ceiling_format == "both" else [args.ceiling_format]
    if args.registry_url:
        formats = ["avro-confluent"]
    counts_topics = {fmt: f"{name}.ceiling-{fmt}" for fmt in formats} if args.ceiling else {}
    first = args.mechanisms[0]
    raw = job_config(args, bootstrap, name, {**shared, **{r: f"{name}.{r}" for r in ("releases", "dead_letters",
                                                                                      "audit")}}, work, first)
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_config(str(config_path))
    kafka = stream_settings(config, str(work)).kafka
    create_topics = load_script("create-topics").create_topics
    outputs = {t for topics in job_topics.values() for r, t in topics.items() if r not in shared}
    outcome = create_topics(bootstrap, {shared["events"]: 2, shared["requirements"]: 1,
                                        **{t: 1 for t in outputs}, **{t: 1 for t in counts_topics.values()}})
    if any(state != "created" for state in outcome.values()):
        print(f"topics: {outcome}")
        return 1

    # Backlog: slots 1..--slots, then one closing event per events partition at the start of the
    # next slot; the live slots (job only) start one slot later.
    live_first = args.slots + 2
    total_slots = args.slots + 1 + (args.live_slots if args.job else 0)
    t = time.monotonic()
    stream = SyntheticStream("Sin", args.users, total_slots, seed=5)
    events, _ = write_synthetic(stream, str(work / "data"), 0.6, 120, config.slot_ms)
    requirements = work / "data" / "registrations.jsonl"
    registrations, changes = write_requirements(args, requirements, config.slot_ms)
    no_requirements = work / "data" / "none.jsonl"  # the live phase sends no requirement record
    no_requirements.write_text("")
    closing_ms = DEMO_ORIGIN_MS + args.slots * config.slot_ms
    closing = work / "data" / "closing.jsonl"
    closing.write_text(f'{{"user":"u0","time":{closing_ms},"value":0}}\n')
    written = time.monotonic() - t
    backlog = args.users * args.slots
    print(f"backlog: {backlog:,} events ({args.users:,} users x {args.slots} slots) + {registrations:,} "
          f"registrations + {changes:,} requirement changes + 2 closing events; files written in {written:.1f}s")
    t = time.monotonic()
    avro = ""
    if args.registry_url:
        from pwevent.jobs.common.avro_format import SchemaRegistry

        assert config.events.schema_registry is not None
        schema_id = SchemaRegistry(config.events.schema_registry).register(f"{shared['events']}-value", EVENT_SCHEMA)
        avro = f"%{schema_id}"
    if args.producer == "java":
        sent = produce_java(bootstrap, [
            (shared["requirements"], None, requirements, None), (shared["events"], None, events, backlog),
            (shared["events"], 0, closing, None), (shared["events"], 1, closing, None)], avro)
    else:
        sent = produce_python(kafka, config, shared["events"], events, requirements, args.slots, closing_ms)
    produced = time.monotonic() - t
    print(f"backlog: {sent:,} messages produced in {produced:.1f}s ({sent / produced:,.0f}/s, {args.producer}); "
          f"generation {written + produced:.1f}s in all")

    results: list[RunResult] = []
    for fmt, counts_topic in counts_topics.items():
        ceiling_raw = dict(raw, kafka=dict(raw["kafka"], group_id=f"{name}-ceiling-{fmt}",
                                           transactional_id_prefix=f"{name}-ceiling-{fmt}"),
                           flink=dict(raw["flink"], checkpoint_dir=str(work / f"checkpoints-ceiling-{fmt}")))
        ceiling_path = work / f"ceiling-{fmt}.yaml"
        ceiling_path.write_text(yaml.safe_dump(ceiling_raw))
        argv = [sys.executable, str(REPO / "benchmarks" / "ceiling.py"), "--config", str(ceiling_path),
                "--counts-topic", counts_topic, "--format", fmt]
        if fmt == "avro-confluent":
            argv += ["--format-jar", str(maven_jar(AVRO_CONFLUENT_FORMAT))]
        print(f"ceiling ({fmt}): running")
        counts: dict[int, dict[int, int]] = {}

        def window_slot(value: bytes, counts: dict[int, dict[int, int]] = counts) -> int:
            row = json.loads(value)
            end = datetime.fromisoformat(row["window_end"]).replace(tzinfo=UTC)
            slot = config.clock.slot_of(int(end.timestamp() * 1000) - 1)
            counts.setdefault(slot, {})[row["cell"]] = row["users"]
            return slot

        result = RunResult(f"ceiling ({fmt})", backlog)
        run(result, argv, work / f"ceiling-{fmt}", kafka, counts_topic, window_slot, args.slots,
            ceiling_raw["flink"]["checkpoint_dir"], args.timeout)
        per_slot = {sum(counts[s].values()) for s in range(1, args.slots + 1) if s in counts}
        result.checked = (f"{len([s for s in counts if s <= args.slots])} windows, users per window "
                          f"{sorted(per_slot)}")
        results.append(result)
        report(result)

    if args.job and args.live_slots:
        # The live slots' lines only (produce_files reads a whole file into memory, slot by slot).
        live_events = work / "data" / "live.jsonl"
        with open(events, "rb") as source, open(live_events, "wb") as target:
            target.writelines(itertools.islice(source, args.users * (live_first - 1), None))
    for mechanism, topics in job_topics.items():
        job_name = f"{name}-{mechanism}"
        job_raw = job_config(args, bootstrap, job_name, topics, work, mechanism)
        job_path = work / f"job-{mechanism}.yaml"
        job_path.write_text(yaml.safe_dump(job_raw))
        argv = [sys.executable, "-m", "pwevent.jobs.cli.main", "run", "--config", str(job_path),
                "--insecure-test-randomness"]  # numpy-fast noise: a benchmark, not production
        label = f"job {mechanism}"
        print(f"{label}: running")
        result = RunResult(label, backlog)

        def live(commits: dict[int, float], result: RunResult = result) -> None:
            from pwevent.jobs.streaming.produce import produce_files

            if not args.live_slots:
                return
            starts: dict[int, float] = {}
            produce_files(kafka, config, str(live_events), str(no_requirements), args.pace,
                          first_slot=live_first, last_slot=total_slots,
                          before_slot=lambda slot, at: starts.__setitem__(slot, at))
            deadline = time.time() + 60
            while total_slots - 1 not in commits and time.time() < deadline:
                time.sleep(0.1)
            result.latencies_s = [commits[s] - starts[s + 1] for s in range(live_first, total_slots)
                                  if s in commits and s + 1 in starts]

        run(result, argv, work / f"job-{mechanism}", kafka, topics["releases"],
            lambda value: json.loads(value)["slot"], args.slots, job_raw["flink"]["checkpoint_dir"], args.timeout,
            after_backlog=live, phases=True, registered_slot=args.register_slots)
        result.checked = "release of every backlog slot" if not result.error else ""
        if not result.error:
            from pwevent.jobs.streaming.kafka_io import read_topic

            result.dead_letters = {}
            for message in read_topic(kafka, topics["dead_letters"], idle_s=2.0, max_s=300.0):
                reason = str(message.json().get("reason"))
                result.dead_letters[reason] = result.dead_letters.get(reason, 0) + 1
            if args.dynamic or args.classes:
                result.classes = class_counts(kafka, topics["audit"], args.slots)
        results.append(result)
        report(result)

    print_table(args, results, written + produced)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "settings": settings_text(args), "users": args.users, "registered": args.registered,
            "slots": args.slots, "mechanisms": args.mechanisms, "change_every": args.change_every,
            "change_share": args.change_share, "requirement_changes": changes,
            "generation_s": round(written + produced, 1), "producer": args.producer,
            "runs": [dict(asdict(r), rate=r.rate) for r in results], "ratio": ratio(results),
        }, indent=2) + "\n")
    return 0 if all(r.error is None for r in results) else 1


def class_counts(kafka: Any, topic: str, last_slot: int) -> dict[str, Any]:
    """The Population's live classes per slot, from the audit topic: one `spend` line per live class
    and slot. Also the ledgers created in all (`ledger` lines)."""
    import orjson

    from pwevent.jobs.streaming.kafka_io import read_topic

    per_slot: dict[int, int] = {}
    ledgers = 0
    for message in read_topic(kafka, topic, idle_s=2.0, max_s=600.0):
        line = orjson.loads(message.value)
        if line.get("record") == "spend":
            per_slot[int(line["slot"])] = per_slot.get(int(line["slot"]), 0) + 1
        elif line.get("record") == "ledger":
            ledgers += 1
    if not per_slot:
        return {"max": None, "last": None, "ledgers": ledgers}
    top = max(per_slot, key=lambda s: (per_slot[s], -s))
    return {"max": per_slot[top], "max_slot": top, "last": per_slot.get(last_slot), "last_slot": last_slot,
            "first": per_slot.get(1), "ledgers": ledgers,
            "every_50": {s: per_slot[s] for s in sorted(per_slot) if s == 1 or s % 50 == 0}}


def load_script(stem: str) -> Any:
    """A module from deploy/local/ (its file names have dashes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(stem.replace("-", "_"), REPO / "deploy" / "local" / f"{stem}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def maven_jar(coordinate: str) -> Path:
    """One jar of Maven Central (group:artifact:version) in the jar cache's bench folder, fetched with
    Maven on first use."""
    group, artifact, version = coordinate.split(":")
    jar = JAR_CACHE / "bench" / f"{artifact}-{version}.jar"
    if not jar.is_file():
        subprocess.run(["mvn", "-q", "-B", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy",
                        f"-Dartifact={coordinate}", f"-DoutputDirectory={jar.parent}"], check=True,
                       stdout=subprocess.DEVNULL)
    return jar


def produce_java(bootstrap: str, specs: list[tuple[str, int | None, Path, int | None]], events_suffix: str = "") -> int:
    """BacklogProducer.java: (topic, partition or None, JSON-lines file, first lines only or None);
    `events_suffix` (`%ID`: Avro in the Confluent wire format, schema id ID) after every file but the
    first (the requirements)."""
    if not (KAFKA_JARS / ".complete").is_file():
        subprocess.run([str(REPO / "deploy" / "local" / "fetch-jars.sh")], check=True, stdout=subprocess.DEVNULL)
    argv = ["java", "-cp", str(KAFKA_JARS / "*"), str(REPO / "benchmarks" / "BacklogProducer.java"), bootstrap]
    for index, (topic, partition, path, lines) in enumerate(specs):
        target = topic if partition is None else f"{topic}@{partition}"
        argv.append(f"{target}={path}" + ("" if lines is None else f"#{lines}") + (events_suffix if index else ""))
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True, timeout=1800)
    return int(done.stdout.split()[-1])


def produce_python(kafka: Any, config: Any, events_topic: str, events: Path, requirements: Path, slots: int,
                   closing_ms: int) -> int:
    """kafka-python, slot by slot (`pwevent produce`), then the closing events."""
    from pwevent.jobs.streaming.kafka_io import producer
    from pwevent.jobs.streaming.produce import produce_files

    def show(slot: int, _: float) -> None:
        print(f"\rproduce: slot {slot}/{slots}", end="", file=sys.stderr, flush=True)

    sent = produce_files(kafka, config, str(events), str(requirements), 0.0, show, last_slot=slots)
    print(file=sys.stderr)
    client = producer(kafka)
    try:
        for partition in (0, 1):
            client.send(events_topic, value=f'{{"user":"u0","time":{closing_ms},"value":0}}'.encode(), key=b"u0",
                        partition=partition, timestamp_ms=closing_ms)
        client.flush()
    finally:
        client.close()
    return sent + 2


def run(result: RunResult, argv: list[str], folder: Path, kafka: Any, topic: str, slot_of: Callable[[bytes], int],
        last_slot: int, checkpoint_dir: str, timeout: float,
        after_backlog: Callable[[dict[int, float]], None] | None = None, phases: bool = False,
        registered_slot: int = 1) -> None:
    """Start `argv --ready-file ...` in its own process group, time it from RUNNING until `last_slot`'s
    output on `topic` is committed, run `after_backlog(commits)`, record memory and checkpoint size,
    kill the group. Fills `result`. `phases`: also record them when `registered_slot`'s output is
    committed ("registered"), when `last_slot`'s is ("backlog") and at the end ("live")."""
    from pwevent.jobs.streaming.kafka_io import follow

    folder.mkdir(parents=True, exist_ok=True)
    commits: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        for message in follow(kafka, topic):
            if message is not None:
                commits.setdefault(slot_of(message.value), time.time())
            if stop.is_set():
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready = folder / "ready"
    log_path = folder / "run.log"
    # the JVM's temporary files (the planner's and RPC system's jars, ~100 MB) in the run's folder,
    # removed below: a killed JVM leaves them (`pwevent run` puts the job's in its own run folder)
    jvm_tmp = folder / "jvm-tmp"
    jvm_tmp.mkdir(exist_ok=True)
    from pwevent.jobs.streaming.local_run import with_jvm_args

    env = dict(os.environ)
    with suppress(ValueError):  # a folder with white space: the JVM keeps its default (/tmp)
        env["JVM_ARGS"] = with_jvm_args(os.environ.get("JVM_ARGS"), f"-Djava.io.tmpdir={jvm_tmp}")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*argv, "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env)
    begun = time.time()
    try:
        while not ready.exists():
            if process.poll() is not None or time.time() - begun > timeout:
                result.error = f"did not start; log {log_path}"
                print(log_path.read_text()[-3000:])
                return
            time.sleep(0.05)
        running = time.time()
        load_running = os.getloadavg()[0]
        last_shown = running

        def sample(phase: str, at: float) -> None:
            if phases:
                jvm, python = tree_rss_mb(process.pid)
                result.phases[phase] = (round(at - running, 1), jvm, python, checkpoint_mb(checkpoint_dir),
                                        shared_mb(checkpoint_dir), round(os.getloadavg()[0], 2))

        while last_slot not in commits:
            if registered_slot in commits and "registered" not in result.phases:
                sample("registered", commits[registered_slot])
            if process.poll() is not None or time.time() - begun > timeout:
                result.error = f"failed or too slow ({len(commits)} slots committed); log {log_path}"
                print(log_path.read_text()[-3000:])
                return
            if time.time() - last_shown >= 10:
                last_shown = time.time()
                print(f"  {len(commits)}/{last_slot} slots committed after {last_shown - running:.0f}s", flush=True)
            time.sleep(0.02)
        if "registered" not in result.phases:
            sample("registered", commits.get(registered_slot, commits[last_slot]))
        result.seconds = commits[last_slot] - running
        sample("backlog", commits[last_slot])
        first = min(commits)
        span = commits[last_slot] - commits[first]
        if last_slot - first >= 3 and span >= 2.0:
            result.warm_rate = result.events / last_slot * (last_slot - first) / span
        if after_backlog:
            after_backlog(commits)
        result.jvm_rss_mb, result.python_rss_mb = tree_rss_mb(process.pid)
        result.checkpoint_mb = checkpoint_mb(checkpoint_dir)
        result.checkpoint_shared_mb = shared_mb(checkpoint_dir)
        result.load = (round(load_running, 2), round(os.getloadavg()[0], 2))
        if after_backlog and result.latencies_s:
            result.phases["live"] = (round(time.time() - running, 1), result.jvm_rss_mb, result.python_rss_mb,
                                     result.checkpoint_mb, result.checkpoint_shared_mb, result.load[1])
    finally:
        stop.set()
        if process.poll() is None:  # SIGTERM first: `pwevent run` then removes its temporary files
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(jvm_tmp, ignore_errors=True)


def tree_rss_mb(root: int) -> tuple[float, float]:
    """RSS (MB) of `root` and its descendants: (java processes, the others), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    jvm = other = 0.0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        kb = float(fields.get("VmRSS", "0 kB").split()[0])
        if fields.get("Name", "").strip() == "java":
            jvm += kb / 1024
        else:
            other += kb / 1024
    return round(jvm), round(other)


def checkpoint_mb(checkpoint_dir: str) -> float | None:
    """Size (MB) of the newest completed checkpoint folder (chk-N with _metadata) under the dir."""
    base = Path(checkpoint_dir.removeprefix("file://"))
    done = [p.parent for p in base.glob("*/chk-*/_metadata")]
    if not done:
        return None
    latest = max(done, key=lambda p: int(p.name.split("-")[1]))
    return round(sum(f.stat().st_size for f in latest.rglob("*") if f.is_file()) / 1e6, 2)


def shared_mb(checkpoint_dir: str) -> float:
    """Size (MB) of the `shared/` folder(s) of the checkpoint dir: the files incremental checkpoints
    reference instead of holding them in their chk-N folder (0 without incremental checkpoints)."""
    base = Path(checkpoint_dir.removeprefix("file://"))
    total = 0
    for path in base.glob("*/shared/**/*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:  # subsumed and deleted meanwhile
            pass
    return round(total / 1e6, 2)


def report(result: RunResult) -> None:
    if result.error:
        print(f"{result.name}: {result.error}")
        return
    warm = f", warm {result.warm_rate:,.0f} events/s" if result.warm_rate else ""
    print(f"{result.name}: {result.events:,} events in {result.seconds:.1f}s from RUNNING to the last backlog "
          f"slot committed: {result.rate:,.0f} events/s{warm}; {result.checked}")
    for phase, (at, jvm, python, checkpoint, shared, load) in result.phases.items():
        print(f"{result.name}: {phase} at {at:.1f}s after RUNNING: JVM RSS {jvm:,.0f} MB, Python RSS {python:,.0f} MB, "
              f"latest checkpoint {'-' if checkpoint is None else f'{checkpoint:.2f} MB'}"
              + (f" + {shared:.2f} MB shared (incremental)" if shared else "") + f", load {load:.1f}")
    if result.classes is not None:
        c = result.classes
        print(f"{result.name}: live classes per slot (audit spend lines): max {c['max']} (slot {c.get('max_slot')}), "
              f"slot 1 {c.get('first')}, last backlog slot {c['last']}; {c['ledgers']} ledgers created; "
              f"every 50 slots {c.get('every_50')}")
    if result.dead_letters is not None:
        print(f"{result.name}: {sum(result.dead_letters.values())} dead letters {result.dead_letters}")
    if result.latencies_s:
        print(f"{result.name}: latency (watermark past slot end -> release committed) of {len(result.latencies_s)} "
              "live slots: " + ", ".join(f"{x:.2f}" for x in result.latencies_s) + " s")


def ratio(results: list[RunResult]) -> float | None:
    return next(iter(ratios(results).values()), None)


def ratios(results: list[RunResult]) -> dict[str, float]:
    """job / ceiling (raw) for every job run."""
    ceiling = next((r.rate for r in results if r.name == "ceiling (raw)"), None)
    return {r.name: round(r.rate / ceiling, 3) for r in results
            if r.name.startswith("job") and r.rate and ceiling}


def settings_text(args: argparse.Namespace) -> str:
    return (f"execution mode {args.execution_mode}, parallelism 1, checkpoint interval {args.checkpoint_interval} "
            f"(exactly once), state backend {args.state_backend}"
            f"{' (incremental checkpoints)' if args.incremental else ''}, job event time from {args.event_time}, "
            "exactly-once Kafka sinks (the benchmark reads the releases read_committed); 2-partition events topic")


def print_table(args: argparse.Namespace, results: list[RunResult], generation_s: float) -> None:
    from pwevent.jobs.common.slots import parse_duration_ms

    print()
    print(f"backlog {args.users:,} users x {args.slots} slots = {args.users * args.slots:,} events, "
          f"{args.registered:,} registered users, mechanism {','.join(args.mechanisms)}"
          + (f", {args.change_share:g} of the users change requirement every {args.change_every} slots"
             if args.change_every else "") + f"; generation {generation_s:.1f}s ({args.producer} producer)")
    print(f"settings: {settings_text(args)}; machine: {os.cpu_count()} cores, shared (load average below)")
    header = ("run", "events/s", "warm events/s", "seconds", "JVM RSS MB", "Python RSS MB", "checkpoint MB",
              "load (1 min)")
    rows = [header]
    for r in results:
        def show(x: float | None, pattern: str = "{:,.0f}") -> str:
            return "-" if x is None else pattern.format(x)

        rows.append((r.name if not r.error else f"{r.name} (failed)", show(r.rate), show(r.warm_rate),
                     show(r.seconds, "{:.1f}"), show(r.jvm_rss_mb), show(r.python_rss_mb),
                     show(r.checkpoint_mb, "{:.2f}"), "-" if r.load is None else f"{r.load[0]:.1f} -> {r.load[1]:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = [cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        print("  ".join(cells))
    job = next((r for r in results if r.name.startswith("job") and r.latencies_s), None)
    if job and job.latencies_s:
        interval_s = parse_duration_ms(args.checkpoint_interval) / 1000
        print(f"{job.name} latency median {statistics.median(job.latencies_s):.2f}s, max {max(job.latencies_s):.2f}s "
              f"over {len(job.latencies_s)} live slots; target <= 2 x {interval_s:g}s + 1s = {2 * interval_s + 1:.1f}s")
    for name, value in ratios(results).items():
        print(f"ratio = {name} / ceiling (raw) = {value:.3f} (issue 8 target: >= 0.6)")
    for r in results:
        if "registered" in r.phases:
            at = r.phases["registered"][0]
            print(f"{r.name}: {args.registered:,} registrations absorbed (slot {args.register_slots} released) "
                  f"{at:.1f}s after RUNNING "
                  f"({args.registered / at:,.0f} registrations/s, job warm-up included)")


if __name__ == "__main__":
    sys.exit(main())
