"""Streaming job benchmark: sustained input rate and slot latency, exactly-once on.

    .venv/bin/python benchmarks/bench_stream.py [--users 10000] [--backlog-slots 10] [--live-slots 6]
        [--pace 6] [--checkpoint-interval 1s] [--execution-mode thread|process] [--bundle-size N]
        [--bundle-time 100ms] [--bootstrap HOST:PORT]

Starts its own broker with deploy/local/kafka.sh (fresh run folder, stopped by pid) unless
--bootstrap is given, fresh topics, and the real job (`pwevent run`, mini-cluster, PBD, numpy-fast
noise, exactly-once sinks). Two phases on one job run:
1. rate: `--backlog-slots` slots of a synthetic stream (every registered user present every slot)
   are in the events topic before the job starts; rate = events / (time from job RUNNING to the
   last backlog slot's release being committed). Includes per-slot timers of every user.
2. latency: `--live-slots` more slots, one per `--pace` seconds; latency of slot t = time a
   read_committed consumer receives slot t's release - time the first event of slot t+1 was sent
   (the event that moves the watermark past slot t's end). Target: <= 2 x checkpoint interval + 1 s.
Prints the figures; it is not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--backlog-slots", type=int, default=10)
    parser.add_argument("--live-slots", type=int, default=6)
    parser.add_argument("--pace", type=float, default=6.0, help="seconds per live slot")
    parser.add_argument("--checkpoint-interval", default="1s")
    parser.add_argument("--execution-mode", choices=("thread", "process"), default="thread")
    parser.add_argument("--bundle-size", type=int, default=1000)
    parser.add_argument("--bundle-time", default="100ms")
    parser.add_argument("--state-backend", choices=("hashmap", "rocksdb"), default="hashmap")
    parser.add_argument("--event-time", choices=("field", "kafka"), default="field",
                        help="field: Python timestamp assigner on the parsed time; kafka: record timestamps")
    parser.add_argument("--source-idleness", default="500ms",
                        help="kafka event time: a quiet partition (the requirements topic) stops holding the "
                        "watermark after this")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the `finally` below stops the job and the broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="pwevent-bench-"))
    print(f"work folder: {work}")
    if args.bootstrap:
        return measure(args, args.bootstrap, work)
    kafka_run = work / "kafka"
    started = subprocess.run([str(REPO / "deploy/local/kafka.sh"), "start", "--run-dir", str(kafka_run)],
                             capture_output=True, text=True, check=True)
    try:
        return measure(args, started.stdout.strip().splitlines()[-1], work)
    finally:
        subprocess.run([str(REPO / "deploy/local/kafka.sh"), "stop", "--run-dir", str(kafka_run)], capture_output=True)


def measure(args: argparse.Namespace, bootstrap: str, work: Path) -> int:
    """Both phases on one job run against `bootstrap`; the job is killed (its process group) at the end."""
    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.common.files import write_synthetic
    from pwevent.jobs.common.slots import parse_duration_ms
    from pwevent.jobs.common.synthetic import SyntheticStream
    from pwevent.jobs.streaming.kafka_io import follow
    from pwevent.jobs.streaming.produce import produce_files
    from pwevent.jobs.streaming.settings import stream_settings

    name = f"bench{uuid.uuid4().hex[:6]}"
    topics = {r: f"{name}.{r}" for r in ("events", "requirements", "releases", "dead_letters", "audit")}
    raw = {
        "mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"},
        "noise": "numpy-fast", "caps": {"max_w": 200},
        "kafka": {"bootstrap": bootstrap, "group_id": name, "transactional_id_prefix": name, "topics": topics,
                  "event_time": args.event_time},
        "flink": {"checkpoint_interval": args.checkpoint_interval, "checkpoint_dir": str(work / "checkpoints"),
                  "execution_mode": args.execution_mode, "bundle_size": args.bundle_size,
                  "bundle_time": args.bundle_time, "state_backend": args.state_backend,
                  "source_idleness": args.source_idleness},
    }
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_config(str(config_path))
    kafka = stream_settings(config, str(work)).kafka
    import importlib.util

    spec = importlib.util.spec_from_file_location("ct", REPO / "deploy/local/create-topics.py")
    assert spec and spec.loader
    ct = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ct)
    ct.create_topics(bootstrap, {topics["events"]: 2, **{topics[r]: 1 for r in topics if r != "events"}})

    total_slots = args.backlog_slots + args.live_slots + 1
    stream = SyntheticStream("Sin", args.users, total_slots, seed=5)
    events, requirements = write_synthetic(stream, str(work / "data"), 0.6, 120, 60_000)
    t = time.monotonic()
    sent = produce_files(kafka, config, str(events), str(requirements), 0.0, last_slot=args.backlog_slots)
    print(f"backlog: {sent} messages ({args.users} users x {args.backlog_slots} slots + requirements) "
          f"produced in {time.monotonic() - t:.1f}s")

    commits: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        for message in follow(kafka, topics["releases"]):
            if message is not None:
                commits.setdefault(json.loads(message.value)["slot"], time.time())
            if stop.is_set():
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready = work / "ready"
    log = open(work / "job.log", "wb")
    job = subprocess.Popen([sys.executable, "-m", "pwevent.jobs.cli.main", "run", "--config", str(config_path),
                            "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        while not ready.exists():
            if job.poll() is not None:
                print((work / "job.log").read_text()[-3000:])
                return 1
            time.sleep(0.1)
        running = time.time()
        backlog_done = args.backlog_slots - 1  # the last backlog slot closes only with live input
        while backlog_done not in commits:
            if job.poll() is not None or time.time() - running > 900:
                print("job failed or too slow; log:", (work / "job.log").read_text()[-3000:])
                return 1
            time.sleep(0.05)
        elapsed = commits[backlog_done] - running
        events_in = args.users * backlog_done
        print(f"rate: {events_in} events (+ {args.users * backlog_done} user-slot timers) in {elapsed:.1f}s "
              f"from job RUNNING to slot {backlog_done} committed: {events_in / elapsed:,.0f} events/s "
              "(includes job warm-up)")
        first = min(commits)
        span = commits[backlog_done] - commits[first]
        if backlog_done - first >= 3 and span >= 2.0:
            print(f"rate (first to last backlog commit, warm): {args.users * (backlog_done - first) / span:,.0f} "
                  f"events/s over {span:.1f}s")
        else:
            print(f"rate (warm): n/a, slots {first}..{backlog_done} committed within {span:.1f}s (one checkpoint)")

        starts: dict[int, float] = {}
        produce_files(kafka, config, str(events), str(requirements), args.pace,
                      first_slot=args.backlog_slots + 1, last_slot=total_slots,
                      before_slot=lambda slot, at: starts.__setitem__(slot, at))
        deadline = time.time() + 60
        last_live = total_slots - 1
        while last_live not in commits and time.time() < deadline:
            time.sleep(0.1)
        interval_s = parse_duration_ms(args.checkpoint_interval) / 1000
        latencies = [commits[s] - starts[s + 1] for s in range(args.backlog_slots + 1, total_slots)
                     if s in commits and s + 1 in starts]
        print(f"latency (watermark past slot end -> release committed), {len(latencies)} live slots of "
              f"{args.users} users: " + ", ".join(f"{x:.2f}" for x in latencies) + " s")
        if latencies:
            print(f"latency median {statistics.median(latencies):.2f}s, max {max(latencies):.2f}s; "
                  f"target <= 2 x {interval_s:g}s + 1s = {2 * interval_s + 1:.1f}s")
        print(f"settings: execution mode {args.execution_mode}, parallelism 1, bundle size {args.bundle_size}, "
              f"bundle time {args.bundle_time}, checkpoint interval {args.checkpoint_interval}, state backend "
              f"{args.state_backend}, event time from {args.event_time}, exactly-once Kafka sinks, "
              "read_committed read-back")
    finally:
        stop.set()
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
