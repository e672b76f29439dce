"""Streaming job benchmark: the job's rate against a bare Flink SQL ceiling, and slot latency (issue 8).

    .venv/bin/python benchmarks/bench_stream.py [--ceiling] [--job] [--users 10000] [--slots 300]
        [--registered N] [--mechanism PBD[,DPBA,...]] [--change-every 50 --change-share 0.01]
        [--ceiling-format raw|json|both] [--live-slots 6] [--pace 6] [--producer java|python]
        [--checkpoint-interval 1s] [--execution-mode thread|process] [--state-backend hashmap|rocksdb] [--incremental]
        [--event-time field|kafka] [--events-format json|avro-confluent|protobuf-confluent] [--timeout 1200]
        [--json-out FILE]
        [--bootstrap HOST:PORT] [--parallelism 1[,2,...]] [--events-partitions N]

Starts its own broker with deploy/local/kafka.sh (fresh run folder, stopped by pid) unless
--bootstrap is given, and fresh topics (events: `--events-partitions`, default 2, or 4 when a
`--parallelism` is above 1; all with retention.ms=-1, the records carry recent timestamps: slot 1
is --slots + --live-slots + 5 minutes before the run, and the job's `flink.release_delay` is 1h, so
that event time closes the slots the latency is measured on). Then:

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
3. `--parallelism 1,2` (default 1): one job run per parallelism, one after the other on the same
   backlog (own output topics, consumer group and transactional ids each; several need
   `--live-slots 0`). Parallelism 1 is the local run above (`pwevent run`, a mini-cluster in one
   JVM, like the ceiling, which always runs at parallelism 1). A parallelism P above 1 runs on a
   local standalone cluster of P TaskManagers with one slot each (deploy/local/flink-cluster.sh,
   started for the run in the work folder and stopped by its pids after it), submitted with
   `submit_command` (what `pwevent run --print-submit` prints) with `flink.parallelism: P`; RUNNING
   is when the REST API shows the job and all its vertices RUNNING. The events topic needs at least
   P partitions (`--events-partitions`). The ratio to the ceiling is given for parallelism 1 only.
   The requirements topic has `--requirements-partitions` (default: the largest parallelism): a
   requirements source subtask without a partition holds the job's event time back for
   `flink.source_start_grace` (60 s) at the start (measured: a 30-slot backlog at parallelism 2 took
   60 s with 1 requirements partition and 6 s with 2).

CPU per operator (every run). A Flink task (a vertex: the operators chained into one thread, named
as the REST API names the vertex) is measured by the CPU time its threads spent on a core between
RUNNING and the commit of the last backlog slot (utime + stime of /proc/<pid>/task/<tid>/stat,
sampled at both points; the threads named by `jcmd <pid> Thread.print` at the end), summed over its
subtasks and divided by the backlog events: seconds per million events. A vertex's threads are its
task threads ("<vertex> (i/P)#a") and the threads named after them (a source's "Source Data
Fetcher for <vertex> (i/P)#a", the Kafka reader's fetch and decode); in thread mode (the default)
the Python operators run inside their task threads, so their Python is in their vertex's figure.
Everything else of the run's processes is reported apart, by thread name: the JVM's garbage
collectors and JIT compilers, the Kafka producers' I/O threads (the sinks'), Netty (the network
between TaskManagers), checkpointing, timers, threads that ended before the last sample, the
JobManager, and any process besides the JVMs (the `pwevent run` client; process mode's Python
workers). Total = all CPU of the run's processes (for a cluster, the JobManager's and the
TaskManagers'; the `flink run` client is not counted). The broker's CPU (when the benchmark started
it) is given apart. This is CPU, not wall time. Flink's `accumulateBusyTimeMs` (REST, summed over
the subtasks) is shown beside it for comparison: the wall time a task's thread was neither idle nor
back-pressured, from the task's start (about RUNNING) to a metric fetch 10-25 s after the backlog's
end (the REST API answers from a cache it refreshes when 10 s old: `fresh_rest_vertices`; the tail
adds the idle job's timers, watermarks and checkpoints). It also counts the time a busy thread waited for a core (on 2
cores with more runnable threads than cores it is above the CPU) and leaves out the fetcher threads. The
single-task share is the CPU of the vertices at parallelism 1 in a run at parallelism above 1 (in
a parallelism-1 run, the vertices holding one of their operators) over the run's total CPU per
event, and over the vertices' CPU (without the JIT compilers, GC and the other threads outside the
vertices, which a long run amortises or which grow with the parallelism: the stricter figure).

Model (printed and in the JSON, for every job run when a run above parallelism 1 tells the
single-task vertices): rate(p) = min over vertices of p_v / cost_v, cost_v the vertex's CPU seconds
per event in that run and p_v = 1 for a single-task vertex, p otherwise, for p = 4, 8, 16: each
subtask on a core of its own and the events spread evenly. It ignores the CPU outside the vertices
(GC, JIT, the sinks' Kafka I/O, Netty, which grow with the rate: "cores" says how many the whole
run's CPU per event needs at that rate; "with p cores in all" is p / the run's total CPU per event,
the bound when every thread of the run shares p cores), the broker, the network between machines,
skew between partitions or keys, the Python workers' own limits in process mode, and sources with
fewer partitions than p. A single-task vertex's work is per slot (summaries), not per event: its
cost per event, and with it the single-task bound, scales with the events per slot of the backlog.
`--events-format avro-confluent`: a Schema Registry is started too (deploy/local/schema-registry.sh,
stopped by its pid), the events (the backlog and the closing events; the requirements stay JSON)
are sent as {user: string, time: timestamp-millis, value: int} Avro datums in the Confluent wire
format under the schema registered for the events topic, the job reads them with `events.format:
avro-confluent`, and the ceiling is Flink's own `avro-confluent` format (flink-sql-avro-confluent-
registry, fetched with Maven into the jar cache) with the fields as columns; needs `--producer java`
and, with the job, `--live-slots 0`.
`--events-format protobuf-confluent`: a Schema Registry is started too, the backlog goes to the
events topic as JSON (as without the flag) and, the same events (and closing events, partitions and
keys), to a second events topic as `bench.Event` messages ({string user, google.protobuf.Timestamp
time, int32 value}, PROTOBUF_SCHEMA) in the Confluent wire format under the schema registered for
that topic, sent with kafka-python (the generation time says how long). The ceiling is the raw SQL
ceiling on the JSON topic; each job run is made twice, `(json)` on the JSON topic and
`(protobuf-confluent)` with `events.format: protobuf-confluent` on the Protobuf topic, and the
ratios give both against the ceiling and the Protobuf run against the JSON one (Flink's own
`protobuf` format needs the message classes compiled into a jar, so it is no ceiling here). Needs
`--producer java` and, with the job, `--live-slots 0`.
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
process group; on a cluster the job is cancelled and the cluster stopped) after it, and after
`--timeout` seconds at most. Prints a table (and `--json-out`);
it is not a pass/fail test.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
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
CLUSTER_SH = REPO / "deploy" / "local" / "flink-cluster.sh"
REGISTRY_SH = REPO / "deploy" / "local" / "schema-registry.sh"
JAR_CACHE = Path(os.environ.get("PWEVENT_CACHE", REPO / ".cache" / "jars"))
KAFKA_JARS = JAR_CACHE / "kafka"
#: The ceiling's Avro format (benchmark only; the newest release on Maven Central).
AVRO_CONFLUENT_FORMAT = "org.apache.flink:flink-sql-avro-confluent-registry:2.1.0"
#: The events' schema with --events-format protobuf-confluent (its only message: message index [0]).
PROTOBUF_SCHEMA = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Event { string user = 1; google.protobuf.Timestamp time = 2; int32 value = 3; }
"""
#: The events' writer schema with --events-format avro-confluent (BacklogProducer.java's field order): the
#: mapped fields and a decimal and a uuid besides (logical types the fast path certifies).
EVENT_SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "user", "type": "string"}, {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "value", "type": "int"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}]}
#: --registry-auth basic: the user the registry's gateway wants, and the variable holding its password.
REGISTRY_USER, REGISTRY_PASSWORD_ENV = "bench", "PWEVENT_BENCH_REGISTRY_PASSWORD"
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
    parallelism: int = 1
    cpu: dict[str, Any] | None = None  # cpu_account: CPU seconds per million events, per vertex and in all
    model: dict[str, Any] | None = None  # model(): single-task share, rates at parallelism 4, 8, 16

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
    add_flink_arguments(parser)
    parser.add_argument("--events-format", choices=("json", "avro-confluent", "protobuf-confluent"), default="json",
                        help="how the events are written and read (see above)")
    parser.add_argument("--registry-auth", choices=("none", "basic"), default="none",
                        help="avro-confluent: the registry behind HTTP basic auth (job and ceiling send it)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a run may take at most")
    parser.add_argument("--json-out", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--parallelism", default="1", help="job runs, one per comma-separated parallelism "
                        "(1: `pwevent run`; P > 1: a standalone cluster of P TaskManagers, one slot each); "
                        "several need --live-slots 0")
    parser.add_argument("--events-partitions", type=int, help="partitions of the events topic (default 2, or 4 "
                        "when a --parallelism is above 1; at least the largest parallelism)")
    parser.add_argument("--requirements-partitions", type=int,
                        help="partitions of the requirements topic (default the largest --parallelism; see the "
                        "module docstring)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the generated files and the broker's data in the work folder (deleted by "
                        "default: about 0.5 GB at full size; logs, configs and checkpoints stay)")
    args = parser.parse_args()
    if not (args.ceiling or args.job):
        args.ceiling = args.job = True
    args.registered = args.users if args.registered is None else args.registered
    # the input's slot 1, on the minute: the backlog and the live slots end about now, so the job's
    # release schedule (an hour behind, `job_config`) releases no slot before the backlog's
    args.origin_ms = (time.time_ns() // 1_000_000 // 60_000 - args.slots - args.live_slots - 5) * 60_000
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
    try:
        args.parallelisms = sorted({int(p) for p in args.parallelism.split(",") if p.strip()})
    except ValueError:
        parser.error("--parallelism takes comma-separated integers")
    if not args.parallelisms or args.parallelisms[0] < 1:
        parser.error("--parallelism takes positive integers")
    if args.events_partitions is None:
        args.events_partitions = 4 if args.parallelisms[-1] > 1 else 2
    if args.requirements_partitions is None:
        args.requirements_partitions = args.parallelisms[-1]
    if args.events_partitions < args.parallelisms[-1]:
        parser.error("--events-partitions must be at least the largest --parallelism")
    if len(args.parallelisms) * len(args.mechanisms) > 1 and args.job and args.live_slots:
        parser.error("several job runs (mechanisms or parallelisms) need --live-slots 0")
    if args.events_format != "json" and (args.producer != "java" or (args.job and args.live_slots)):
        parser.error(f"--events-format {args.events_format} needs --producer java and, with the job, --live-slots 0")
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the `finally` blocks stop the runs and the broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="pwevent-bench-"))
    args.broker_pid = None
    args.load_before = [round(x, 2) for x in os.getloadavg()]
    print(f"work folder: {work}; load average {args.load_before} (1, 5, 15 min), {os.cpu_count()} cores")
    args.registry_url = None
    if args.events_format != "json":
        registry_run = work / "registry"
        started = subprocess.run([str(REGISTRY_SH), "start", "--run-dir", str(registry_run),
                                  "--owner", str(os.getpid())], capture_output=True, text=True, check=True)
        args.registry_url = started.stdout.strip().splitlines()[-1]
        gateway = None
        if args.registry_auth == "basic":  # HTTP basic auth in front of the registry (tests/registry_gateway.py)
            sys.path.insert(0, str(REPO))
            from tests.registry_gateway import RegistryGateway

            password = secrets.token_urlsafe(12)
            os.environ[REGISTRY_PASSWORD_ENV] = password  # the job's and the ceiling's configs name the variable
            basic = base64.b64encode(f"{REGISTRY_USER}:{password}".encode()).decode()
            gateway = RegistryGateway(args.registry_url, None, f"Basic {basic}")
            args.registry_url = gateway.start()
        try:
            return with_broker(args, work)
        finally:
            if gateway is not None:
                print(f"registry gateway: {len(gateway.forwarded)} requests forwarded, {len(gateway.refused)} refused")
                gateway.stop()
            subprocess.run([str(REGISTRY_SH), "stop", "--run-dir", str(registry_run)], capture_output=True)
    return with_broker(args, work)


def add_flink_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's Flink settings that `job_config` reads (benchmarks/bench_schedule.py takes them too)."""
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
    parser.add_argument("--flink-extra", action="append", default=[], metavar="KEY=VALUE",
                        help="job and ceiling: a flink.extra entry (repeatable), e.g. "
                             "taskmanager.memory.managed.size=2g (RocksDB's block cache and write buffers)")


def with_broker(args: argparse.Namespace, work: Path,
                body: Callable[[argparse.Namespace, str, Path], int] | None = None) -> int:
    """`body(args, bootstrap, work)` (default `measure`) on --bootstrap, else on a broker of its own
    (started and stopped here; its pid in `args.broker_pid`)."""
    body = body or measure
    if args.bootstrap:
        try:
            return body(args, args.bootstrap, work)
        finally:
            if not args.keep:
                shutil.rmtree(work / "data", ignore_errors=True)
    kafka_run = work / "kafka"
    started = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(kafka_run)],
                             capture_output=True, text=True, check=True)
    with suppress(OSError, ValueError):
        args.broker_pid = int((kafka_run / "kafka.pid").read_text().split()[0])
    try:
        return body(args, started.stdout.strip().splitlines()[-1], work)
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(kafka_run)], capture_output=True)
        if not args.keep:
            for folder in (work / "data", kafka_run / "data"):
                shutil.rmtree(folder, ignore_errors=True)


def job_config(args: argparse.Namespace, bootstrap: str, name: str, topics: dict[str, str], work: Path,
               mechanism: str = "PBD", events_format: str = "json") -> dict:
    """The job's configuration (also the ceiling's: it reads the kafka: and flink: sections), its events
    in `events_format` (the registry's for the Confluent formats)."""
    from pwevent.jobs.common.slots import iso

    default = {}
    if args.default_requirement:
        w, epsilon = args.default_requirement.split(",")
        default = {"default_requirement": {"w": int(w), "epsilon": float(epsilon)}}
    registry: dict[str, Any] = {"url": args.registry_url}
    if args.registry_auth == "basic":
        registry.update(username=REGISTRY_USER, password=f"${{{REGISTRY_PASSWORD_ENV}}}")
    events = {"events": {"format": events_format, "schema_registry": registry}} if events_format != "json" else {}
    return {
        "mechanism": mechanism, "slot": "60s", "origin": iso(args.origin_ms), "domain": {"type": "binary"},
        "noise": "numpy-fast", "caps": {"max_w": 200}, **default, **events,
        "kafka": {"bootstrap": bootstrap, "group_id": name, "transactional_id_prefix": name, "topics": topics,
                  "event_time": args.event_time},
        "flink": {"checkpoint_interval": args.checkpoint_interval, "checkpoint_dir": str(work / f"checkpoints-{name}"),
                  "checkpoint_timeout": args.checkpoint_timeout,
                  "tolerable_failed_checkpoints": args.tolerable_failed_checkpoints,
                  "execution_mode": args.execution_mode, "bundle_size": args.bundle_size,
                  "bundle_time": args.bundle_time, "state_backend": args.state_backend,
                  "incremental_checkpoints": args.incremental,
                  # latency is measured from the event that moves the watermark past the slot: the
                  # release schedule (docs/streaming.md, "Time") stays an hour behind the input
                  "release_delay": "1h",
                  "extra": dict(item.split("=", 1) for item in args.flink_extra)},
    }


def write_requirements(args: argparse.Namespace, path: Path, slot_ms: int) -> tuple[int, int]:
    """One registration per registered user (at slot 1; the silent ones over `--register-slots`), then
    (dynamic, `--change-every`) the changes of the backlog slots, in time order. Returns
    (registrations, change records)."""
    import numpy as np

    from pwevent.jobs.common.slots import iso
    from pwevent.jobs.common.synthetic import RequirementDraw

    n = args.registered
    changes = 0
    with path.open("w", encoding="utf-8") as handle:
        if not args.dynamic:
            silent = max(n - args.users, 1)
            for user, req in enumerate(RequirementDraw(0.6, 120).fixed(n, 5)):
                slot = 1 if user < args.users else 1 + (user - args.users) * args.register_slots // silent
                time = iso(args.origin_ms + (slot - 1) * slot_ms)
                handle.write(f'{{"user":"u{user}","time":"{time}","w":{req.w},"epsilon":{req.epsilon}}}\n')
            return n, 0
        rng = np.random.default_rng([5, 7])

        def forward(count: int) -> tuple[np.ndarray, np.ndarray]:
            return rng.choice(FORWARD_W, count), rng.choice(FORWARD_EPSILON, count)

        def line(user: int, time: str, w: int, epsilon: float) -> str:
            return (f'{{"user":"u{user}","time":"{time}","backward":{{"w":1,"epsilon":10.0}},'
                    f'"forward":{{"w":{int(w)},"epsilon":{float(epsilon)}}}}}\n')

        for user, (w, epsilon) in enumerate(zip(*forward(n), strict=True)):
            handle.write(line(user, iso(args.origin_ms), w, epsilon))
        if args.change_every > 0:
            share = max(1, round(args.change_share * n))
            for slot in range(1 + args.change_every, args.slots + 1, args.change_every):
                time = iso(args.origin_ms + (slot - 1) * slot_ms)
                users = np.sort(rng.choice(n, share, replace=False))
                for user, w, epsilon in zip(users, *forward(share), strict=True):
                    handle.write(line(int(user), time, w, epsilon))
                    changes += 1
    return n, changes


def measure(args: argparse.Namespace, bootstrap: str, work: Path) -> int:
    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.common.files import write_synthetic
    from pwevent.jobs.common.synthetic import SyntheticStream
    from pwevent.jobs.streaming.settings import stream_settings

    name = f"bench{uuid.uuid4().hex[:6]}"
    shared = {r: f"{name}.{r}" for r in ("events", "requirements")}
    several = len(args.parallelisms) > 1 or args.parallelisms[0] > 1
    protobuf = args.events_format == "protobuf-confluent"
    job_formats = ["json", "protobuf-confluent"] if protobuf else [args.events_format]
    protobuf_events = f"{name}.events-protobuf"
    job_runs = {(m, p, f): (f"{m}-p{p}" if several else m) + (f"-{f}" if protobuf else "")
                for m in args.mechanisms for p in args.parallelisms for f in job_formats} if args.job else {}
    job_topics = {key: {**shared, **({"events": protobuf_events} if fmt == "protobuf-confluent" else {}),
                        **{r: f"{name}.{key}.{r}" for r in ("releases", "dead_letters", "audit")}}
                  for (_, _, fmt), key in job_runs.items()}
    formats = ["raw", "json"] if args.ceiling_format == "both" else [args.ceiling_format]
    if args.events_format == "avro-confluent":
        formats = ["avro-confluent"]
    counts_topics = {fmt: f"{name}.ceiling-{fmt}" for fmt in formats} if args.ceiling else {}
    first = args.mechanisms[0]
    raw = job_config(args, bootstrap, name, {**shared, **{r: f"{name}.{r}" for r in ("releases", "dead_letters",
                                                                                      "audit")}}, work, first,
                     "avro-confluent" if args.events_format == "avro-confluent" else "json")
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_config(str(config_path))
    kafka = stream_settings(config, str(work)).kafka
    create_topics = load_script("create-topics").create_topics
    outputs = {t for topics in job_topics.values() for r, t in topics.items() if r not in shared}
    outcome = create_topics(bootstrap, {shared["events"]: args.events_partitions,
                                        **({protobuf_events: args.events_partitions} if protobuf else {}),
                                        shared["requirements"]: args.requirements_partitions,
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
    events, _ = write_synthetic(stream, str(work / "data"), 0.6, 120, config.slot_ms, origin_ms=args.origin_ms)
    requirements = work / "data" / "registrations.jsonl"
    registrations, changes = write_requirements(args, requirements, config.slot_ms)
    no_requirements = work / "data" / "none.jsonl"  # the live phase sends no requirement record
    no_requirements.write_text("")
    closing_ms = args.origin_ms + args.slots * config.slot_ms
    closing = work / "data" / "closing.jsonl"
    closing.write_text(f'{{"user":"u0","time":{closing_ms},"value":0}}\n')
    written = time.monotonic() - t
    backlog = args.users * args.slots
    print(f"backlog: {backlog:,} events ({args.users:,} users x {args.slots} slots) + {registrations:,} "
          f"registrations + {changes:,} requirement changes + {args.events_partitions} closing events; "
          f"files written in {written:.1f}s")
    t = time.monotonic()
    avro = ""
    if args.events_format == "avro-confluent":
        from pwevent.jobs.common.avro_format import SchemaRegistry

        assert config.events.schema_registry is not None
        schema_id = SchemaRegistry(config.events.schema_registry).register(f"{shared['events']}-value", EVENT_SCHEMA)
        avro = f"%{schema_id}"
    if args.producer == "java":
        sent = produce_java(bootstrap, [
            (shared["requirements"], None, requirements, None), (shared["events"], None, events, backlog),
            *((shared["events"], partition, closing, None) for partition in range(args.events_partitions))], avro)
    else:
        sent = produce_python(kafka, config, shared["events"], events, requirements, args.slots, closing_ms,
                              args.events_partitions)
    if protobuf:
        sent += produce_protobuf(args, kafka, protobuf_events, events, backlog, closing_ms)
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
        run(result, LocalLaunch(argv, work / f"ceiling-{fmt}"), work / f"ceiling-{fmt}", kafka, counts_topic,
            window_slot, args.slots, ceiling_raw["flink"]["checkpoint_dir"], args.timeout,
            broker_pid=args.broker_pid)
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
    for (mechanism, parallelism, events_format), key in job_runs.items():
        topics = job_topics[key]
        job_name = f"{name}-{key}"
        job_raw = job_config(args, bootstrap, job_name, topics, work, mechanism, events_format)
        job_raw["flink"]["parallelism"] = parallelism
        job_path = work / f"job-{key}.yaml"
        launch: Launch
        if parallelism == 1:  # `pwevent run`, its REST API on a port of ours (for the busy times)
            job_raw["flink"]["web_port"] = free_port()
            argv = [sys.executable, "-m", "pwevent.jobs.cli.main", "run", "--config", str(job_path),
                    "--insecure-test-randomness"]  # numpy-fast noise: a benchmark, not production
            launch = LocalLaunch(argv, work / f"job-{key}", f"127.0.0.1:{job_raw['flink']['web_port']}")
        else:  # submit_command adds the test switch for numpy-fast noise
            launch = ClusterLaunch(job_path, work / f"job-{key}", parallelism)
        job_path.write_text(yaml.safe_dump(job_raw))
        label = f"job {mechanism}" + (f" p{parallelism}" if several else "") \
            + (f" ({events_format})" if protobuf else "")
        print(f"{label}: running" + (f" on a standalone cluster of {parallelism} TaskManagers" if parallelism > 1
                                     else " (pwevent run, mini-cluster)"))
        result = RunResult(label, backlog, parallelism=parallelism)

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

        run(result, launch, work / f"job-{key}", kafka, topics["releases"],
            lambda value: json.loads(value)["slot"], args.slots, job_raw["flink"]["checkpoint_dir"], args.timeout,
            after_backlog=live, phases=True, registered_slot=args.register_slots, broker_pid=args.broker_pid)
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

    add_models(results)
    print_table(args, results, written + produced)
    print_cpu(results)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "settings": settings_text(args), "users": args.users, "registered": args.registered,
            "slots": args.slots, "mechanisms": args.mechanisms, "change_every": args.change_every,
            "change_share": args.change_share, "requirement_changes": changes,
            "generation_s": round(written + produced, 1), "producer": args.producer,
            "parallelisms": args.parallelisms, "events_partitions": args.events_partitions,
            "load_before": args.load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
            "runs": [dict(asdict(r), rate=r.rate) for r in results], "ratio": ratio(results),
            "ratios": ratios(results), "format_ratios": format_ratios(results),
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


def produce_protobuf(args: argparse.Namespace, kafka: Any, topic: str, events: Path, backlog: int,
                     closing_ms: int) -> int:
    """The first `backlog` events of the JSON-lines file, then one closing event per partition, to
    `topic` as `bench.Event` messages in the Confluent wire format (PROTOBUF_SCHEMA, registered under
    `topic`-value), with kafka-python: keyed by user (the default partitioner is Java's murmur2, as
    BacklogProducer's), stamped with the event time."""
    from google.protobuf import message_factory

    from pwevent.jobs.common.avro_format import SchemaRegistry
    from pwevent.jobs.common.config import SchemaRegistrySection
    from pwevent.jobs.common.protobuf_format import confluent_value
    from pwevent.jobs.common.protobuf_schema import compile_schema, descriptor_pool_of
    from pwevent.jobs.streaming.kafka_io import producer

    registry = SchemaRegistry(SchemaRegistrySection.model_validate({"url": args.registry_url}))
    schema_id = registry.register(f"{topic}-value", PROTOBUF_SCHEMA, "PROTOBUF")
    pool = descriptor_pool_of(compile_schema(PROTOBUF_SCHEMA, "the benchmark's schema"), "the benchmark's schema")
    event_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Event"))

    def value(record: dict[str, Any]) -> bytes:
        message = event_class(user=record["user"], value=record["value"])
        message.time.FromMilliseconds(record["time"])
        return confluent_value(schema_id, [0], message.SerializeToString())

    client = producer(kafka)
    sent = 0
    try:
        with open(events, "rb") as lines:
            for line in itertools.islice(lines, backlog):
                record = json.loads(line)
                client.send(topic, value=value(record), key=record["user"].encode(), timestamp_ms=record["time"])
                sent += 1
        closing = value({"user": "u0", "time": closing_ms, "value": 0})
        for partition in range(args.events_partitions):
            client.send(topic, value=closing, key=b"u0", partition=partition, timestamp_ms=closing_ms)
            sent += 1
        client.flush()
    finally:
        client.close()
    return sent


def produce_python(kafka: Any, config: Any, events_topic: str, events: Path, requirements: Path, slots: int,
                   closing_ms: int, partitions: int) -> int:
    """kafka-python, slot by slot (`pwevent produce`), then the closing events."""
    from pwevent.jobs.streaming.kafka_io import producer
    from pwevent.jobs.streaming.produce import produce_files

    def show(slot: int, _: float) -> None:
        print(f"\rproduce: slot {slot}/{slots}", end="", file=sys.stderr, flush=True)

    sent = produce_files(kafka, config, str(events), str(requirements), 0.0, show, last_slot=slots)
    print(file=sys.stderr)
    client = producer(kafka)
    try:
        for partition in range(partitions):
            client.send(events_topic, value=f'{{"user":"u0","time":{closing_ms},"value":0}}'.encode(), key=b"u0",
                        partition=partition, timestamp_ms=closing_ms)
        client.flush()
    finally:
        client.close()
    return sent + partitions


class LocalLaunch:
    """`argv --ready-file F` in its own process group (`pwevent run`, ceiling.py: a mini-cluster in one
    JVM); RUNNING when the ready file (the job id) appears. `rest`: its REST address if it has one the
    benchmark chose (the job's flink.web_port)."""

    def __init__(self, argv: list[str], folder: Path, rest: str | None = None) -> None:
        self.argv, self.folder, self.rest = argv, folder, rest
        self.ready_file = folder / "ready"
        self.log_path = folder / "run.log"
        # the JVM's temporary files (the planner's and RPC system's jars, ~100 MB) in the run's folder,
        # removed below: a killed JVM leaves them (`pwevent run` puts the job's in its own run folder)
        self.jvm_tmp = folder / "jvm-tmp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        from pwevent.jobs.streaming.local_run import with_jvm_args

        self.jvm_tmp.mkdir(exist_ok=True)
        env = dict(os.environ)
        with suppress(ValueError):  # a folder with white space: the JVM keeps its default (/tmp)
            env["JVM_ARGS"] = with_jvm_args(os.environ.get("JVM_ARGS"), f"-Djava.io.tmpdir={self.jvm_tmp}")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([*self.argv, "--ready-file", str(self.ready_file)], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True, env=env)

    def ready(self) -> bool:
        return self.ready_file.exists()

    @property
    def job_id(self) -> str | None:
        return self.ready_file.read_text().strip() if self.ready_file.exists() else None

    def failed(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def log_tail(self) -> str:
        return self.log_path.read_text()[-3000:]

    def roots(self) -> list[int]:
        return [self.process.pid] if self.process else []

    def stop(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:  # SIGTERM first: `pwevent run` removes its tmp files
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.jvm_tmp, ignore_errors=True)


class ClusterLaunch:
    """The job submitted (`submit_command`, detached) to a standalone cluster of `taskmanagers`
    TaskManagers with one slot each (deploy/local/flink-cluster.sh in `folder`/cluster, stopped by
    its pids); RUNNING when the REST API shows the job and every vertex RUNNING."""

    def __init__(self, config_path: Path, folder: Path, taskmanagers: int) -> None:
        self.config_path, self.folder, self.taskmanagers = config_path, folder, taskmanagers
        self.run_dir = folder / "cluster"
        self.rest: str | None = None
        self.job_id: str | None = None
        self.submit_log = folder / "submit.log"
        self.checked = 0.0

    def start(self) -> None:
        from pwevent.jobs.streaming.job import submit_command

        t = time.monotonic()
        started = subprocess.run([str(CLUSTER_SH), "start", "--run-dir", str(self.run_dir), "--taskmanagers",
                                  str(self.taskmanagers), "--slots", "1"], capture_output=True, text=True, timeout=300)
        if started.returncode != 0:
            self.submit_log.write_text(started.stderr)
            return
        self.rest = started.stdout.strip().splitlines()[-1]
        print(f"  cluster of {self.taskmanagers} TaskManagers (one slot each) at {self.rest} after "
              f"{time.monotonic() - t:.0f}s; submitting", flush=True)
        command = submit_command(str(self.config_path), self.rest)
        submitted = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600,
                                   cwd=self.folder)
        self.submit_log.write_text(submitted.stdout + submitted.stderr)
        if "Job has been submitted with JobID" in submitted.stdout:
            self.job_id = submitted.stdout.split("JobID")[-1].split()[0]
            print(f"  job {self.job_id} submitted {time.monotonic() - t:.0f}s after the cluster's start", flush=True)

    def _job(self) -> dict[str, Any]:
        return dict(rest_get(str(self.rest), f"/jobs/{self.job_id}"))

    def ready(self) -> bool:
        if time.monotonic() - self.checked < 0.5:
            return False
        self.checked = time.monotonic()
        job = self._job()
        return job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"])

    def failed(self) -> bool:
        if self.job_id is None:
            return True
        if time.monotonic() - self.checked < 2:  # the REST API is asked at most every 2 s
            return False
        self.checked = time.monotonic()
        with suppress(OSError):
            return self._job()["state"] in ("FAILING", "FAILED", "CANCELED", "FINISHED", "RESTARTING")
        return True

    def log_tail(self) -> str:
        if self.job_id is None or self.rest is None:
            return self.submit_log.read_text()[-3000:] if self.submit_log.exists() else "cluster did not start"
        with suppress(OSError):
            return json.dumps(rest_get(self.rest, f"/jobs/{self.job_id}/exceptions"))[-3000:]
        return "REST API unreachable"

    def roots(self) -> list[int]:
        pids = []
        for pid_file in sorted(self.run_dir.glob("*.pid")):
            with suppress(ValueError, OSError):
                pids.append(int(pid_file.read_text().split()[0]))
        return pids

    def stop(self) -> None:
        try:
            if self.job_id is not None and self.rest is not None:
                with suppress(OSError):
                    request = urllib.request.Request(f"http://{self.rest}/jobs/{self.job_id}?mode=cancel",
                                                     method="PATCH")
                    urllib.request.urlopen(request, timeout=10).close()
                    deadline = time.monotonic() + 60
                    while self._job()["state"] not in ("CANCELED", "FAILED", "FINISHED") \
                            and time.monotonic() < deadline:
                        time.sleep(0.5)
        finally:
            subprocess.run([str(CLUSTER_SH), "stop", "--run-dir", str(self.run_dir)], capture_output=True, timeout=240)


Launch = LocalLaunch | ClusterLaunch


def rest_get(rest: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{rest}{path}", timeout=10) as response:
        return json.loads(response.read())


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(result: RunResult, launch: Launch, folder: Path, kafka: Any, topic: str, slot_of: Callable[[bytes], int],
        last_slot: int, checkpoint_dir: str, timeout: float,
        after_backlog: Callable[[dict[int, float]], None] | None = None, phases: bool = False,
        registered_slot: int = 1, broker_pid: int | None = None) -> None:
    """Start `launch`, time it from RUNNING until `last_slot`'s output on `topic` is committed, take
    the CPU account of the run's processes over that time (`cpu_account`), run
    `after_backlog(commits)`, record memory and checkpoint size, stop it. Fills `result`. `phases`:
    also record them when `registered_slot`'s output is committed ("registered"), when `last_slot`'s
    is ("backlog") and at the end ("live")."""
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
    begun = time.time()
    try:
        if not start_launch(launch, begun + timeout):
            result.error = f"did not start; see {folder}"
            return
        start_sample = cpu_sample(launch.roots(), broker_pid)
        running = time.time()
        load_running = os.getloadavg()[0]
        last_shown = running

        def sample(phase: str, at: float) -> None:
            if phases:
                jvm, python = tree_rss_mb(launch.roots())
                result.phases[phase] = (round(at - running, 1), jvm, python, checkpoint_mb(checkpoint_dir),
                                        shared_mb(checkpoint_dir), round(os.getloadavg()[0], 2))

        while last_slot not in commits:
            if registered_slot in commits and "registered" not in result.phases:
                sample("registered", commits[registered_slot])
            if launch.failed() or time.time() - begun > timeout:
                result.error = f"failed or too slow ({len(commits)} slots committed); see {folder}"
                print(launch.log_tail())
                return
            if time.time() - last_shown >= 10:
                last_shown = time.time()
                print(f"  {len(commits)}/{last_slot} slots committed after {last_shown - running:.0f}s", flush=True)
            time.sleep(0.02)
        end_sample = cpu_sample(launch.roots(), broker_pid)
        if "registered" not in result.phases:
            sample("registered", commits.get(registered_slot, commits[last_slot]))
        result.seconds = commits[last_slot] - running
        sample("backlog", commits[last_slot])
        first = min(commits)
        span = commits[last_slot] - commits[first]
        if last_slot - first >= 3 and span >= 2.0:
            result.warm_rate = result.events / last_slot * (last_slot - first) / span
        names = {pid: thread_names(pid) for pid in end_sample.java}
        vertices: dict[str, dict[str, Any]] = {}
        if launch.rest and launch.job_id:
            with suppress(OSError, KeyError, ValueError, IndexError):
                vertices = fresh_rest_vertices(launch.rest, launch.job_id)
        result.cpu = cpu_account(start_sample, end_sample, names, result.events, vertices)
        if after_backlog:
            after_backlog(commits)
        result.jvm_rss_mb, result.python_rss_mb = tree_rss_mb(launch.roots())
        result.checkpoint_mb = checkpoint_mb(checkpoint_dir)
        result.checkpoint_shared_mb = shared_mb(checkpoint_dir)
        result.load = (round(load_running, 2), round(os.getloadavg()[0], 2))
        if after_backlog and result.latencies_s:
            result.phases["live"] = (round(time.time() - running, 1), result.jvm_rss_mb, result.python_rss_mb,
                                     result.checkpoint_mb, result.checkpoint_shared_mb, result.load[1])
    finally:
        stop.set()
        launch.stop()


def start_launch(launch: Launch, deadline: float) -> bool:
    """Start `launch` and wait until it is RUNNING (True), or has failed or `deadline` (time.time())
    has passed (False, its log's tail printed). The caller stops it either way."""
    launch.start()
    while True:
        with suppress(OSError, KeyError):
            if launch.ready():
                return True
        if launch.failed() or time.time() > deadline:
            print(launch.log_tail())
            return False
        time.sleep(0.05)


def fresh_rest_vertices(rest: str, job_id: str) -> dict[str, dict[str, Any]]:
    """`rest_vertices` from a metric fetch begun after this call: the REST API answers from a cache
    that a request refreshes, in the background, once it is 10 s old, so the first answer may predate
    the call and so may the next one that differs (a fetch another request had begun); the second
    change comes from a fetch this loop's requests began, 10 s or more after the first."""
    seen = rest_vertices(rest, job_id)
    changes = 0
    deadline = time.monotonic() + 45
    while changes < 2 and time.monotonic() < deadline:
        time.sleep(1)
        latest = rest_vertices(rest, job_id)
        if latest != seen:
            changes, seen = changes + 1, latest
    return seen


def rest_vertices(rest: str, job_id: str) -> dict[str, dict[str, Any]]:
    """Per vertex name: parallelism, records read and accumulateBusyTimeMs (ms, summed over the
    subtasks), as the REST API says."""
    out = {}
    for vertex in rest_get(rest, f"/jobs/{job_id}")["vertices"]:
        busy = rest_get(rest, f"/jobs/{job_id}/vertices/{vertex['id']}/subtasks/metrics"
                              "?get=accumulateBusyTimeMs&agg=sum")
        out[vertex["name"]] = {"parallelism": vertex["parallelism"],
                               "records_read": int(vertex["metrics"]["read-records"]),
                               "busy_ms": float(busy[0]["sum"]) if busy else None}
    return out


@dataclass
class CpuSample:
    """CPU clock ticks (utime + stime) of every process of some trees and of their threads, at one time."""

    processes: dict[int, tuple[str, int]]  # pid -> (command name, ticks)
    threads: dict[tuple[int, int], int]  # (pid, tid) -> ticks
    java: list[int]  # the java processes
    broker: int | None  # the broker's ticks

    @property
    def total(self) -> int:
        return sum(ticks for _, ticks in self.processes.values())


def _ticks(stat: str) -> tuple[str, int]:
    """(command name, utime + stime) of a /proc stat line."""
    name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
    return name, int(rest[11]) + int(rest[12])


def process_tree(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError, IndexError):
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    seen, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.append(pid)
            todo.extend(children.get(pid, []))
    return seen


def cpu_sample(roots: list[int], broker_pid: int | None = None) -> CpuSample:
    processes, threads, java = {}, {}, []
    for pid in process_tree(roots):
        try:
            name, ticks = _ticks(Path(f"/proc/{pid}/stat").read_text())
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        processes[pid] = (name, ticks)
        if name == "java":
            java.append(pid)
            for tid in tids:
                with suppress(OSError):
                    threads[(pid, int(tid))] = _ticks(Path(f"/proc/{pid}/task/{tid}/stat").read_text())[1]
    broker = None
    if broker_pid:
        with suppress(OSError):
            broker = _ticks(Path(f"/proc/{broker_pid}/stat").read_text())[1]
    return CpuSample(processes, threads, java, broker)


def thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Java thread name, from `jcmd <pid> Thread.print`."""
    with suppress(OSError, subprocess.SubprocessError):
        dump = subprocess.run(["jcmd", str(pid), "Thread.print"], capture_output=True, text=True, timeout=60).stdout
        return parse_thread_dump(dump)
    return {}


def parse_thread_dump(dump: str) -> dict[int, str]:
    import re

    names = {}
    for line in dump.splitlines():
        found = re.match(r'^"(?P<name>.*)" .*\bnid=(?P<nid>0x[0-9a-fA-F]+|\d+)\b', line)
        if found:
            nid = found["nid"]
            names[int(nid, 16) if nid.startswith("0x") else int(nid)] = found["name"]
    return names


#: A task thread's name: "<vertex> (<subtask>/<parallelism>)#<attempt>".
TASK_THREAD = r"^(?P<vertex>.+) \((?P<subtask>\d+)/(?P<parallelism>\d+)\)#(?P<attempt>\d+)$"


def thread_group(name: str) -> str:
    """A name for the threads outside the vertices: digits folded, per-run ids cut."""
    import re

    return re.sub(r"\d+", "N", name.split(" | ")[0])[:60]


def cpu_account(start: CpuSample, end: CpuSample, names: dict[int, dict[int, str]], events: int,
                rest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """CPU seconds per million events between two samples: per vertex (its task threads and the
    threads named after them, e.g. the source's fetchers), the JVMs' other threads by group, the
    other processes, the total, the broker. `rest`: the REST API's view per vertex name."""
    import re

    tick = os.sysconf("SC_CLK_TCK")
    per_m = 1e6 / events / tick  # ticks -> seconds per million events

    def delta(key: tuple[int, int]) -> int:
        return end.threads[key] - start.threads.get(key, 0)

    vertices: dict[str, dict[str, Any]] = {}
    task_threads: dict[str, str] = {}  # "<vertex> (i/P)#a" -> vertex
    shaped = {names.get(pid, {}).get(tid, "") for pid, tid in end.threads}
    shaped = {name for name in shaped if re.match(TASK_THREAD, name)}
    # a helper's name ends with its task's ("Source Data Fetcher for ", "OutputFlusher for ", "Time Trigger for ")
    tasks = {name for name in shaped if not any(name != other and name.endswith(" " + other) for other in shaped)}
    for (pid, tid) in end.threads:
        name = names.get(pid, {}).get(tid, "")
        found = re.match(TASK_THREAD, name)
        if found and name in tasks:
            vertex = vertices.setdefault(found["vertex"], {"parallelism": int(found["parallelism"]), "task": 0,
                                                           "helpers": 0})
            vertex["task"] += delta((pid, tid))
            task_threads[name] = found["vertex"]
    groups: dict[str, int] = {}
    in_vertices = 0
    for (pid, tid) in end.threads:
        name = names.get(pid, {}).get(tid, "")
        if name in task_threads:
            in_vertices += delta((pid, tid))
            continue
        owner = next((v for t, v in task_threads.items() if name.endswith(" " + t)), None) if name else None
        if owner is not None:
            vertices[owner]["helpers"] += delta((pid, tid))
            in_vertices += delta((pid, tid))
        else:
            group = thread_group(name) if name else "(unnamed: not a Java thread, or ended before the dump)"
            groups[group] = groups.get(group, 0) + delta((pid, tid))
    jvm_total = sum(end.processes[pid][1] - start.processes.get(pid, ("", 0))[1] for pid in end.java)
    jvm_threads = sum(delta(key) for key in end.threads)
    if jvm_total > jvm_threads:
        groups["(threads ended before the last sample)"] = jvm_total - jvm_threads
    others: dict[str, int] = {}
    for pid, (name, ticks) in end.processes.items():
        if pid not in end.java:
            others[name] = others.get(name, 0) + ticks - start.processes.get(pid, ("", 0))[1]
    total = end.total - sum(ticks for pid, (_, ticks) in start.processes.items() if pid in end.processes)
    rows = []
    for name, v in sorted(vertices.items(), key=lambda item: -(item[1]["task"] + item[1]["helpers"])):
        seen = rest.get(name, {})
        busy = seen.get("busy_ms")
        rows.append({"name": name, "parallelism": v["parallelism"],
                     "cpu_s_per_m": round((v["task"] + v["helpers"]) * per_m, 3),
                     "helper_cpu_s_per_m": round(v["helpers"] * per_m, 3),
                     "busy_s_per_m": None if busy is None else round(busy / 1000 * 1e6 / events, 3),
                     "records_read": seen.get("records_read")})
    return {
        "vertices": rows,
        "vertices_s_per_m": round(in_vertices * per_m, 3),
        "other_jvm_s_per_m": round((jvm_total - in_vertices) * per_m, 3),
        "other_jvm_groups": {g: round(t * per_m, 3) for g, t in sorted(groups.items(), key=lambda i: -i[1])
                             if t > 0},
        "other_processes_s_per_m": {n: round(t * per_m, 3) for n, t in others.items()},
        "total_s_per_m": round(total * per_m, 3),
        "total_cpu_s": round(total / tick, 1),
        "broker_s_per_m": None if end.broker is None or start.broker is None
        else round((end.broker - start.broker) * per_m, 3),
    }


def model(cpu: dict[str, Any], single: set[str], rate: float | None,
          parallelisms: tuple[int, ...] = (4, 8, 16)) -> dict[str, Any]:
    """rate(p) = min over vertices of p_v / cost_v (cost_v: the vertex's CPU seconds per event, all
    subtasks; p_v = 1 for the vertices named in `single`, else p), its bottleneck, and the cores the
    run's whole CPU per event needs at that rate. Also the single-task share of the CPU per event."""
    costs = {v["name"]: v["cpu_s_per_m"] / 1e6 for v in cpu["vertices"] if v["cpu_s_per_m"] > 0}
    total = cpu["total_s_per_m"] / 1e6
    single_cost = sum(cost for name, cost in costs.items() if name in single)
    in_vertices = sum(costs.values())
    out: dict[str, Any] = {
        "single_task_s_per_m": round(single_cost * 1e6, 3),
        "single_task_share": round(single_cost / total, 4) if total else None,
        "single_task_share_of_vertices": round(single_cost / in_vertices, 4) if in_vertices else None,
        "measured_rate": None if rate is None else round(rate),
        "rates": {}}
    for p in parallelisms:
        bounds = {name: (1 if name in single else p) / cost for name, cost in costs.items()}
        if not bounds:
            continue
        bottleneck = min(bounds, key=lambda name: bounds[name])
        out["rates"][str(p)] = {"events_per_s": round(bounds[bottleneck]), "bottleneck": bottleneck,
                                "single_task": bottleneck in single,
                                "cores": round(bounds[bottleneck] * total, 1),
                                "p_cores_events_per_s": round(p / total) if total else None}
    return out


def tree_rss_mb(roots: list[int]) -> tuple[float, float]:
    """RSS (MB) of `roots` and their descendants: (java processes, the others), from /proc."""
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
    todo = list(roots)
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


#: The ceiling a job's ratio is of: the raw one, or Flink's avro-confluent format in an Avro run.
RATIO_CEILINGS = ("ceiling (raw)", "ceiling (avro-confluent)")


def ratios(results: list[RunResult]) -> dict[str, float]:
    """job / ceiling (RATIO_CEILINGS, the first there is) for every job run."""
    ceiling = next((r.rate for name in RATIO_CEILINGS for r in results if r.name == name), None)
    return {r.name: round(r.rate / ceiling, 3) for r in results
            if r.name.startswith("job") and r.parallelism == 1 and r.rate and ceiling}


def format_ratios(results: list[RunResult]) -> dict[str, float]:
    """With --events-format protobuf-confluent: each Protobuf job run / the JSON job run of the same
    mechanism and parallelism."""
    rates = {r.name: r.rate for r in results if r.rate}
    return {name: round(rate / rates[json_name], 3) for name, rate in rates.items()
            if name.endswith(" (protobuf-confluent)")
            and (json_name := name.replace(" (protobuf-confluent)", " (json)")) in rates}


def settings_text(args: argparse.Namespace) -> str:
    runs = ", ".join(f"{p} (standalone cluster, {p} TaskManagers of one slot)" if p > 1 else "1 (mini-cluster)"
                     for p in args.parallelisms)
    return (f"execution mode {args.execution_mode}, job parallelism {runs}, ceiling parallelism 1, "
            f"checkpoint interval {args.checkpoint_interval} "
            f"(exactly once), state backend {args.state_backend}"
            f"{' (incremental checkpoints)' if args.incremental else ''}, job event time from {args.event_time}, "
            "exactly-once Kafka sinks (the benchmark reads the releases read_committed); "
            f"{args.events_partitions}-partition events topic")


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
    ceiling = next((name for name in RATIO_CEILINGS for r in results if r.name == name), "")
    for name, value in ratios(results).items():
        print(f"ratio = {name} / {ceiling} = {value:.3f}")
    for name, value in format_ratios(results).items():
        print(f"ratio = {name} / {name.replace('(protobuf-confluent)', '(json)')} = {value:.3f}")
    for r in results:
        if "registered" in r.phases:
            at = r.phases["registered"][0]
            print(f"{r.name}: {args.registered:,} registrations absorbed (slot {args.register_slots} released) "
                  f"{at:.1f}s after RUNNING "
                  f"({args.registered / at:,.0f} registrations/s, job warm-up included)")


def operators(vertex: str) -> list[str]:
    """The operators chained into a vertex (Flink joins their names with " -> ")."""
    return vertex.split(" -> ")


def single_task_vertices(results: list[RunResult]) -> dict[str, set[str]]:
    """Per job run, the names of its vertices that run at parallelism 1 whatever `flink.parallelism`:
    in a run above 1, those at 1; in a parallelism-1 run, those holding an operator of one (chains
    differ between the two when an operator's neighbours run at another parallelism). Empty when no
    job run is above 1."""
    pinned = {op for r in results if r.cpu and r.name.startswith("job") and r.parallelism > 1
              for v in r.cpu["vertices"] if v["parallelism"] == 1 for op in operators(v["name"])}
    out = {}
    for r in results:
        if r.cpu and r.name.startswith("job") and pinned:
            out[r.name] = {v["name"] for v in r.cpu["vertices"]
                           if (v["parallelism"] == 1 if r.parallelism > 1 else pinned & set(operators(v["name"])))}
    return out


def add_models(results: list[RunResult]) -> None:
    for name, single in single_task_vertices(results).items():
        r = next(r for r in results if r.name == name)
        assert r.cpu is not None
        r.model = model(r.cpu, single, r.rate)
        for v in r.cpu["vertices"]:
            v["single_task"] = v["name"] in single


def short(vertex: str, width: int = 100) -> str:
    ops = operators(vertex)
    text = vertex if len(ops) <= 3 else f"{ops[0]} -> ... ({len(ops) - 2} more) -> {ops[-1]}"
    return text if len(text) <= width else text[:width - 3] + "..."


def print_cpu(results: list[RunResult]) -> None:
    """Each run's CPU account and model (see the module docstring)."""
    for r in results:
        if not r.cpu:
            continue
        c = r.cpu
        print(f"\n{r.name}: CPU seconds per million events (thread CPU from /proc, RUNNING -> last backlog slot; "
              f"busy = Flink's accumulateBusyTimeMs, wall time; * = single-task vertex)")
        print(f"  {'p':>2}  {'CPU s/M':>8}  {'busy s/M':>8}  {'records read':>12}  vertex")
        for v in c["vertices"]:
            busy = "-" if v["busy_s_per_m"] is None else f"{v['busy_s_per_m']:.2f}"
            read = "-" if v["records_read"] is None else f"{v['records_read']:,}"
            mark = "*" if v.get("single_task") else " "
            print(f"{mark} {v['parallelism']:>2}  {v['cpu_s_per_m']:>8.2f}  {busy:>8}  {read:>12}  {short(v['name'])}")
        groups = ", ".join(f"{g} {t:.2f}" for g, t in list(c["other_jvm_groups"].items())[:6])
        others = ", ".join(f"{n} {t:.2f}" for n, t in c["other_processes_s_per_m"].items())
        print(f"  vertices {c['vertices_s_per_m']:.2f}; other JVM threads {c['other_jvm_s_per_m']:.2f} ({groups}); "
              f"other processes {others or '-'}; total {c['total_s_per_m']:.2f} s/M "
              f"({c['total_cpu_s']:.0f} CPU-s"
              + (f", {c['total_cpu_s'] / r.seconds:.2f} cores on average" if r.seconds else "") + ")"
              + ("" if c["broker_s_per_m"] is None else f"; broker {c['broker_s_per_m']:.2f} s/M"))
        m = r.model
        if m is None:
            print("  model: needs a job run above parallelism 1 (to tell the single-task vertices)")
            continue
        share = "-" if m["single_task_share"] is None else f"{100 * m['single_task_share']:.2f}%"
        of_vertices = "-" if m["single_task_share_of_vertices"] is None \
            else f"{100 * m['single_task_share_of_vertices']:.2f}%"
        print(f"  single-task vertices: {m['single_task_s_per_m']:.3f} s/M = {share} of the run's CPU per event, "
              f"{of_vertices} of the vertices' (goal: under 2%)")
        print("  model rate(p) = min over vertices of p_v / cost_v (single-task p_v = 1): " + "; ".join(
            f"p={p}: {x['events_per_s']:,} events/s (bottleneck {short(x['bottleneck'], 50)}"
            f"{', single-task' if x['single_task'] else ''}; {x['cores']:.1f} cores at the run's total CPU/event)"
            for p, x in m["rates"].items()))
        print("  with p cores in all (p / the run's total CPU per event): " + "; ".join(
            f"p={p}: {x['p_cores_events_per_s']:,} events/s" for p, x in m["rates"].items()))


if __name__ == "__main__":
    sys.exit(main())
