"""Streaming job benchmark: the job's rate against a bare Flink SQL ceiling, and slot latency (issue 8).

    .venv/bin/python benchmarks/bench_stream.py [--ceiling] [--job] [--users 10000] [--slots 300]
        [--ceiling-format raw|json|both] [--live-slots 6] [--pace 6] [--producer java|python]
        [--checkpoint-interval 1s] [--execution-mode thread|process] [--state-backend hashmap|rocksdb]
        [--event-time field|kafka] [--timeout 1200] [--json-out FILE] [--bootstrap HOST:PORT]

Starts its own broker with deploy/local/kafka.sh (fresh run folder, stopped by pid) unless
--bootstrap is given, and fresh topics (events: 2 partitions; all with retention.ms=-1, the records
carry 2024 timestamps). Then:

0. backlog: a synthetic stream (Sin, every registered user present every slot, one event per user
   and one-minute slot) of `--users` x `--slots` events in the events topic, one requirement record
   per user in the requirements topic, and one closing event (first instant of slot `--slots`+1)
   in each events partition, so the last backlog slot's window can close. `--producer java` (the
   default) sends with benchmarks/BacklogProducer.java on the broker's kafka-clients jar;
   `--producer python` with kafka-python (`pwevent produce`'s code; slow, for comparison). The
   generation time (writing the files + producing) is printed and not part of any rate.
1. `--ceiling`: benchmarks/ceiling.py, the bare SQL pipeline (raw STRING value -> JSON_VALUE/TRY_CAST
   per field -> event time from the JSON field, watermark on the source -> window deduplication,
   latest event per user and window -> count per (window, cell) -> exactly-once Kafka sink), with
   the job's Flink configuration. `--ceiling-format json|both`: the `format json` variant (instead of
   / as well as JSON_VALUE).
2. `--job`: the real job (`python -m pwevent.jobs.cli.main run --config ... --ready-file ...`, PBD,
   numpy-fast noise, exactly-once sinks) on the same backlog, then `--live-slots` more slots, one per
   `--pace` seconds, for the latency: latency of slot t = time a read_committed consumer receives
   slot t's release - time the first event of slot t+1 was sent (the event that moves the watermark
   past slot t's end). Target: <= 2 x checkpoint interval + 1 s.
Neither flag: both, ceiling first, on the same backlog (each run reads it from the earliest offset
with its own consumer group and transactional ids), and `ratio = job / ceiling` (raw ceiling).

Rate of a run = backlog events / (time from the job RUNNING (its ready file) to the commit of the
last backlog slot's output: the slot's counts for the ceiling, its release for the job, seen by a
read_committed consumer). It includes the job's warm-up; "warm" is the rate from the first to the
last backlog slot's commit. Each run also reports the RSS of its process tree at the end (JVM and
Python separately) and the size of its latest completed checkpoint folder. Each run is killed (its
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
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO / "deploy" / "local" / "kafka.sh"
KAFKA_JARS = Path(os.environ.get("PWEVENT_CACHE", REPO / ".cache" / "jars")) / "kafka"


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

    @property
    def rate(self) -> float | None:
        return self.events / self.seconds if self.seconds else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ceiling", action="store_true", help="run the bare SQL ceiling (see above)")
    parser.add_argument("--job", action="store_true", help="run the real job (see above); neither flag: both")
    parser.add_argument("--users", type=int, default=10_000, help="registered users, one event each per slot")
    parser.add_argument("--slots", type=int, default=300, help="backlog slots (one minute each)")
    parser.add_argument("--ceiling-format", choices=("raw", "json", "both"), default="raw",
                        help="raw: JSON_VALUE per field (the reference of the ratio); json: `format json`")
    parser.add_argument("--live-slots", type=int, default=6, help="job only: paced slots after the backlog")
    parser.add_argument("--pace", type=float, default=6.0, help="seconds per live slot")
    parser.add_argument("--producer", choices=("java", "python"), default="java",
                        help="backlog producer: BacklogProducer.java (fast) or kafka-python")
    parser.add_argument("--checkpoint-interval", default="1s")
    parser.add_argument("--execution-mode", choices=("thread", "process"), default="thread")
    parser.add_argument("--bundle-size", type=int, default=1000)
    parser.add_argument("--bundle-time", default="100ms")
    parser.add_argument("--state-backend", choices=("hashmap", "rocksdb"), default="hashmap")
    parser.add_argument("--event-time", choices=("field", "kafka"), default="field",
                        help="job only: field: the parsed time field; kafka: record timestamps")
    parser.add_argument("--source-idleness", default="500ms",
                        help="job with kafka event time: a quiet partition (the requirements topic) stops "
                        "holding the watermark after this")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a run may take at most")
    parser.add_argument("--json-out", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--keep", action="store_true",
                        help="keep the generated files and the broker's data in the work folder (deleted by "
                        "default: about 0.5 GB at full size; logs, configs and checkpoints stay)")
    args = parser.parse_args()
    if not (args.ceiling or args.job):
        args.ceiling = args.job = True
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the `finally` blocks stop the runs and the broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="pwevent-bench-"))
    print(f"work folder: {work}")
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


def job_config(args: argparse.Namespace, bootstrap: str, name: str, topics: dict[str, str], work: Path) -> dict:
    """The job's configuration (also the ceiling's: it reads the kafka: and flink: sections)."""
    return {
        "mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"},
        "noise": "numpy-fast", "caps": {"max_w": 200},
        "kafka": {"bootstrap": bootstrap, "group_id": name, "transactional_id_prefix": name, "topics": topics,
                  "event_time": args.event_time},
        "flink": {"checkpoint_interval": args.checkpoint_interval, "checkpoint_dir": str(work / f"checkpoints-{name}"),
                  "execution_mode": args.execution_mode, "bundle_size": args.bundle_size,
                  "bundle_time": args.bundle_time, "state_backend": args.state_backend,
                  "source_idleness": args.source_idleness},
    }


def measure(args: argparse.Namespace, bootstrap: str, work: Path) -> int:
    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.common.files import DEMO_ORIGIN_MS, write_synthetic
    from pwevent.jobs.common.synthetic import SyntheticStream
    from pwevent.jobs.streaming.settings import stream_settings

    name = f"bench{uuid.uuid4().hex[:6]}"
    topics = {r: f"{name}.{r}" for r in ("events", "requirements", "releases", "dead_letters", "audit")}
    formats = ["raw", "json"] if args.ceiling_format == "both" else [args.ceiling_format]
    counts_topics = {fmt: f"{name}.ceiling-{fmt}" for fmt in formats} if args.ceiling else {}
    raw = job_config(args, bootstrap, name, topics, work)
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_config(str(config_path))
    kafka = stream_settings(config, str(work)).kafka
    create_topics = load_script("create-topics").create_topics
    outcome = create_topics(bootstrap, {topics["events"]: 2, **{t: 1 for r, t in topics.items() if r != "events"},
                                        **{t: 1 for t in counts_topics.values()}})
    if any(state != "created" for state in outcome.values()):
        print(f"topics: {outcome}")
        return 1

    # Backlog: slots 1..--slots, then one closing event per events partition at the start of the
    # next slot; the live slots (job only) start one slot later.
    live_first = args.slots + 2
    total_slots = args.slots + 1 + (args.live_slots if args.job else 0)
    t = time.monotonic()
    stream = SyntheticStream("Sin", args.users, total_slots, seed=5)
    events, requirements = write_synthetic(stream, str(work / "data"), 0.6, 120, config.slot_ms)
    closing_ms = DEMO_ORIGIN_MS + args.slots * config.slot_ms
    closing = work / "data" / "closing.jsonl"
    closing.write_text(f'{{"user":"u0","time":{closing_ms},"value":0}}\n')
    written = time.monotonic() - t
    backlog = args.users * args.slots
    print(f"backlog: {backlog:,} events ({args.users:,} users x {args.slots} slots) + {args.users:,} requirements "
          f"+ 2 closing events; files written in {written:.1f}s")
    t = time.monotonic()
    if args.producer == "java":
        sent = produce_java(bootstrap, [
            (topics["requirements"], None, requirements, None), (topics["events"], None, events, backlog),
            (topics["events"], 0, closing, None), (topics["events"], 1, closing, None)])
    else:
        sent = produce_python(kafka, config, topics["events"], events, requirements, args.slots, closing_ms)
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

    if args.job:
        argv = [sys.executable, "-m", "pwevent.jobs.cli.main", "run", "--config", str(config_path)]
        print("job: running")
        result = RunResult("job", backlog)

        # The live slots' lines only (produce_files reads a whole file into memory, slot by slot).
        live_events = work / "data" / "live.jsonl"
        with open(events, "rb") as source, open(live_events, "wb") as target:
            target.writelines(itertools.islice(source, args.users * (live_first - 1), None))

        def live(commits: dict[int, float]) -> None:
            from pwevent.jobs.streaming.produce import produce_files

            starts: dict[int, float] = {}
            produce_files(kafka, config, str(live_events), str(requirements), args.pace, first_slot=live_first,
                          last_slot=total_slots, before_slot=lambda slot, at: starts.__setitem__(slot, at))
            deadline = time.time() + 60
            while total_slots - 1 not in commits and time.time() < deadline:
                time.sleep(0.1)
            result.latencies_s = [commits[s] - starts[s + 1] for s in range(live_first, total_slots)
                                  if s in commits and s + 1 in starts]

        run(result, argv, work / "job", kafka, topics["releases"], lambda value: json.loads(value)["slot"],
            args.slots, raw["flink"]["checkpoint_dir"], args.timeout, after_backlog=live)
        result.checked = "release of every backlog slot" if not result.error else ""
        results.append(result)
        report(result)

    print_table(args, results, written + produced)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "settings": settings_text(args), "users": args.users, "slots": args.slots,
            "generation_s": round(written + produced, 1), "producer": args.producer,
            "runs": [dict(asdict(r), rate=r.rate) for r in results], "ratio": ratio(results),
        }, indent=2) + "\n")
    return 0 if all(r.error is None for r in results) else 1


def load_script(stem: str) -> Any:
    """A module from deploy/local/ (its file names have dashes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(stem.replace("-", "_"), REPO / "deploy" / "local" / f"{stem}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def produce_java(bootstrap: str, specs: list[tuple[str, int | None, Path, int | None]]) -> int:
    """BacklogProducer.java: (topic, partition or None, JSON-lines file, first lines only or None)."""
    if not (KAFKA_JARS / ".complete").is_file():
        subprocess.run([str(REPO / "deploy" / "local" / "fetch-jars.sh")], check=True, stdout=subprocess.DEVNULL)
    argv = ["java", "-cp", str(KAFKA_JARS / "*"), str(REPO / "benchmarks" / "BacklogProducer.java"), bootstrap]
    for topic, partition, path, lines in specs:
        target = topic if partition is None else f"{topic}@{partition}"
        argv.append(f"{target}={path}" + ("" if lines is None else f"#{lines}"))
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
        after_backlog: Callable[[dict[int, float]], None] | None = None) -> None:
    """Start `argv --ready-file ...` in its own process group, time it from RUNNING until `last_slot`'s
    output on `topic` is committed, run `after_backlog(commits)`, record memory and checkpoint size,
    kill the group. Fills `result`."""
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
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*argv, "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
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
        while last_slot not in commits:
            if process.poll() is not None or time.time() - begun > timeout:
                result.error = f"failed or too slow ({len(commits)} slots committed); log {log_path}"
                print(log_path.read_text()[-3000:])
                return
            if time.time() - last_shown >= 10:
                last_shown = time.time()
                print(f"  {len(commits)}/{last_slot} slots committed after {last_shown - running:.0f}s", flush=True)
            time.sleep(0.02)
        result.seconds = commits[last_slot] - running
        first = min(commits)
        span = commits[last_slot] - commits[first]
        if last_slot - first >= 3 and span >= 2.0:
            result.warm_rate = result.events / last_slot * (last_slot - first) / span
        if after_backlog:
            after_backlog(commits)
        result.jvm_rss_mb, result.python_rss_mb = tree_rss_mb(process.pid)
        result.checkpoint_mb = checkpoint_mb(checkpoint_dir)
        result.load = (round(load_running, 2), round(os.getloadavg()[0], 2))
    finally:
        stop.set()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


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


def report(result: RunResult) -> None:
    if result.error:
        print(f"{result.name}: {result.error}")
        return
    warm = f", warm {result.warm_rate:,.0f} events/s" if result.warm_rate else ""
    print(f"{result.name}: {result.events:,} events in {result.seconds:.1f}s from RUNNING to the last backlog "
          f"slot committed: {result.rate:,.0f} events/s{warm}; {result.checked}")
    if result.latencies_s:
        print(f"{result.name}: latency (watermark past slot end -> release committed) of {len(result.latencies_s)} "
              "live slots: " + ", ".join(f"{x:.2f}" for x in result.latencies_s) + " s")


def ratio(results: list[RunResult]) -> float | None:
    rates = {r.name: r.rate for r in results}
    ceiling = rates.get("ceiling (raw)")
    job = rates.get("job")
    return round(job / ceiling, 3) if job and ceiling else None


def settings_text(args: argparse.Namespace) -> str:
    return (f"execution mode {args.execution_mode}, parallelism 1, checkpoint interval {args.checkpoint_interval} "
            f"(exactly once), state backend {args.state_backend}, job event time from {args.event_time}, "
            "exactly-once Kafka sinks; 2-partition events topic")


def print_table(args: argparse.Namespace, results: list[RunResult], generation_s: float) -> None:
    from pwevent.jobs.common.slots import parse_duration_ms

    print()
    print(f"backlog {args.users:,} users x {args.slots} slots = {args.users * args.slots:,} events; "
          f"generation {generation_s:.1f}s ({args.producer} producer)")
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
    job = next((r for r in results if r.name == "job"), None)
    if job and job.latencies_s:
        interval_s = parse_duration_ms(args.checkpoint_interval) / 1000
        print(f"job latency median {statistics.median(job.latencies_s):.2f}s, max {max(job.latencies_s):.2f}s "
              f"over {len(job.latencies_s)} live slots; target <= 2 x {interval_s:g}s + 1s = {2 * interval_s + 1:.1f}s")
    value = ratio(results)
    if value is not None:
        print(f"ratio = job / ceiling (raw) = {value:.3f} (issue 8 target: >= 0.6)")


if __name__ == "__main__":
    sys.exit(main())
