"""Live slot latency against the public release schedule, `flink.release_delay` (docs/streaming.md, "Time").

    .venv/bin/python benchmarks/bench_schedule.py [--slot 10s] [--release-delay 5s] [--checkpoint-interval 1s]
        [--users 300] [--events-partitions 2] [--dense 6] [--quiet 4] [--lull 3] [--lull-part 0.3]
        [--parallelism 1[,2]] [--lead 45] [--timeout 300] [--json-out FILE] [--bootstrap HOST:PORT] [--keep]
        [Flink settings of bench_stream.py: --execution-mode, --state-backend, ...]

A live slot is released when event time on every events partition has passed its end, or at the
latest at its end + `flink.release_delay` of wall clock, whether or not anything arrived; the release
writer writes it once the checkpoint holding it completes (so up to a checkpoint interval more).
benchmarks/bench_stream.py dates its records in the past (its delay is 1h and event time closes every
slot it measures), so it says nothing about that schedule; this does. A script of its own rather
than a mode of bench_stream.py: it has no backlog, no throughput, CPU account or ceiling, and its
records are sent in real time on a plan of phases, which would be one more exception in every step
of bench_stream's `measure` and `run`; it imports bench_stream's pieces instead (broker start and
stop `with_broker`, the job's configuration `job_config` and Flink flags, the job's start
`LocalLaunch`/`ClusterLaunch` and `start_launch`, the topics `load_script("create-topics")`, the
registrations `write_requirements`) and kafka_io's `consumer`, `producer` and `read_topic`.

Per `--parallelism` (default 1: `pwevent run`, a mini-cluster; P > 1: a local standalone cluster of P
TaskManagers with one slot each, as in bench_stream.py), one after the other, each with fresh topics
(events `--events-partitions`, requirements the largest parallelism, releases, dead letters, audit)
and its own job (PBD, numpy-fast noise, `slot: --slot`, `flink.release_delay: --release-delay`,
exactly-once checkpoints every `--checkpoint-interval`). The origin is the first slot boundary at
least `--lead` seconds ahead of the start, so the job is RUNNING before slot 1; the plan starts at the
first slot that begins at least 1 s after RUNNING (slot 1 unless the start took longer than the
lead). Its first instant carries one registration per user (requirements topic), then, in wall-clock
time, each record stamped with the instant it is due (the `time` field and the Kafka timestamp):

1. dense, `--dense` slots: each of `--users` users (user i on events partition i mod partitions) sends
   one event per slot, the users spread evenly through the slot, so every partition gets events
   throughout and the next slot's first events pass the slot's end on every partition promptly;
2. quiet, `--quiet` slots: no record on any topic;
3. lull, `--lull` slots: the same events squeezed into the first `--lull-part` of each slot, then
   nothing until the next slot begins.

Two consumers (read_committed and read_uncommitted, fetch wait 100 ms) follow the release topic from
its start and note when each slot's release first becomes visible to them. Per slot: its end (wall
clock = event time here), the event close (when the last events partition got its first event stamped
at or after the end, as sent; none when a partition got none before the end + delay), the expected
release = min(end + delay, event close), what closed it ("event" when the event close came first,
else "schedule"), the visible times, latency = visible - end and latency - delay. After the last slot
end + delay it waits for every planned slot's release (at most 60 s more), then reads the topic whole
(read_committed, and read_uncommitted with aborted records) for the count per slot, and the dead
letters by reason (an event a producer sent too late for the schedule is `late`).

Checks: every planned slot released exactly once in both reads (none missing, no second record, no
aborted copy), none visible before its end, none before its expected release; printed, with the slots
visible more than checkpoint interval + 2 s after the expected release. Exit 1 if a check fails or a
run does not start. Prints progress, a table per slot, min/median/max per (phase, closer), the load
average (1, 5, 15 min) before and after each run; `--json-out` writes it all. Not a pass/fail test of
the latency itself: the figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pwevent.jobs.common.slots import SlotClock, iso, parse_duration_ms

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_stream import (  # noqa: E402 (the broker, the job's start and its configuration: one definition)
    ClusterLaunch,
    Launch,
    LocalLaunch,
    add_flink_arguments,
    job_config,
    load_script,
    start_launch,
    with_broker,
    write_requirements,
)

PHASES = ("dense", "quiet", "lull")


@dataclass
class Plan:
    """The records of one run, in send order: (due ms, topic role, partition or None, key, value)."""

    first: int  # the first planned slot
    kinds: list[str]  # phase of slot first + i
    records: list[tuple[int, str, int | None, bytes, bytes]] = field(default_factory=list)


@dataclass
class Seen:
    """What one consumer of the release topic saw: per slot, the wall times of its records (and the
    records' Kafka timestamps: when the writer produced them)."""

    times: dict[int, list[float]] = field(default_factory=dict)
    stamps: dict[int, list[int]] = field(default_factory=dict)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slot", default="10s", help="the job's slot length")
    parser.add_argument("--release-delay", default="5s", help="the job's flink.release_delay")
    parser.add_argument("--users", type=int, default=300, help="registered users, each one event per non-quiet slot")
    parser.add_argument("--events-partitions", type=int, default=2, help="partitions of the events topic")
    parser.add_argument("--dense", type=int, default=6, help="slots with events spread through the whole slot")
    parser.add_argument("--quiet", type=int, default=4, help="then slots without any record")
    parser.add_argument("--lull", type=int, default=3, help="then slots with events in their first part only")
    parser.add_argument("--lull-part", type=float, default=0.3, help="the part of a lull slot that gets events")
    parser.add_argument("--parallelism", default="1", help="job runs, one per comma-separated parallelism "
                        "(1: `pwevent run`; P > 1: a standalone cluster of P TaskManagers, one slot each)")
    parser.add_argument("--lead", type=float, default=45.0, help="seconds from the start to the origin (at least)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a job may take to be RUNNING")
    parser.add_argument("--json-out", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--keep", action="store_true", help="keep the broker's data in the work folder")
    add_flink_arguments(parser)
    args = parser.parse_args()
    args.slot_ms = parse_duration_ms(args.slot)
    args.delay_ms = parse_duration_ms(args.release_delay, "release_delay")
    args.checkpoint_ms = parse_duration_ms(args.checkpoint_interval, "checkpoint_interval")
    try:
        args.parallelisms = sorted({int(p) for p in args.parallelism.split(",") if p.strip()})
    except ValueError:
        parser.error("--parallelism takes comma-separated integers")
    if not args.parallelisms or args.parallelisms[0] < 1 or args.events_partitions < args.parallelisms[-1]:
        parser.error("--parallelism takes positive integers, none above --events-partitions")
    if args.events_partitions < 2 or args.users < args.events_partitions or min(args.dense, args.lull) < 1:
        parser.error("needs 2+ events partitions, a user per partition and a dense and a lull slot at least")
    if not 0 < args.lull_part < 1:
        parser.error("--lull-part must be between 0 and 1")
    # what job_config reads besides the Flink flags: no default requirement, JSON events
    args.default_requirement = args.registry_url = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds like Ctrl-C: the runs and the broker stop
    work = Path(tempfile.mkdtemp(prefix="pwevent-schedule-"))
    args.broker_pid = None
    print(f"work folder: {work}; load average {load()} (1, 5, 15 min), {os.cpu_count()} cores", flush=True)
    return with_broker(args, work, measure)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(args: argparse.Namespace, bootstrap: str, work: Path) -> int:
    runs = [one_run(args, bootstrap, work, p) for p in args.parallelisms]
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "settings": settings_text(args), "slot": args.slot, "release_delay": args.release_delay,
            "checkpoint_interval": args.checkpoint_interval, "users": args.users,
            "events_partitions": args.events_partitions, "phases": {k: getattr(args, k) for k in PHASES},
            "lull_part": args.lull_part, "runs": runs}, indent=2) + "\n")
    return 0 if all(r.get("ok") for r in runs) else 1


def settings_text(args: argparse.Namespace) -> str:
    return (f"slot {args.slot}, release_delay {args.release_delay}, checkpoint interval {args.checkpoint_interval} "
            f"(exactly once), {args.users} users, {args.events_partitions} events partitions, phases dense "
            f"{args.dense} / quiet {args.quiet} / lull {args.lull} (first {args.lull_part:g} of the slot), "
            f"PBD, execution mode {args.execution_mode}, state backend {args.state_backend}")


def one_run(args: argparse.Namespace, bootstrap: str, work: Path, parallelism: int) -> dict[str, Any]:
    """One job at `parallelism` on fresh topics through the plan; its rows, groups and checks."""
    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.streaming.settings import stream_settings

    name = f"sched{uuid.uuid4().hex[:6]}-p{parallelism}"
    topics = {r: f"{name}.{r}" for r in ("events", "requirements", "releases", "dead_letters", "audit")}
    created = load_script("create-topics").create_topics(bootstrap, {
        topics["events"]: args.events_partitions, topics["requirements"]: args.parallelisms[-1],
        **{topics[r]: 1 for r in ("releases", "dead_letters", "audit")}})
    if any(state != "created" for state in created.values()):
        print(f"topics: {created}")
        return {"parallelism": parallelism, "ok": False, "error": f"topics: {created}"}
    now_ms = time.time_ns() // 1_000_000
    args.origin_ms = -(-(now_ms + int(args.lead * 1000)) // args.slot_ms) * args.slot_ms
    raw = job_config(args, bootstrap, name, topics, work)
    raw["slot"], raw["origin"] = args.slot, iso(args.origin_ms)
    raw["flink"].update(release_delay=args.release_delay, parallelism=parallelism)
    folder = work / name
    folder.mkdir(parents=True)
    config_path = folder / "job.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    kafka = stream_settings(load_config(str(config_path)), str(folder)).kafka
    clock = SlotClock(args.origin_ms, args.slot_ms)
    launch: Launch
    if parallelism == 1:
        launch = LocalLaunch([sys.executable, "-m", "pwevent.jobs.cli.main", "run", "--config", str(config_path),
                              "--insecure-test-randomness"], folder)  # numpy-fast noise: a benchmark
    else:
        launch = ClusterLaunch(config_path, folder, parallelism)
    label = f"p{parallelism}"
    print(f"{label}: origin {iso(args.origin_ms)} ({(args.origin_ms - now_ms) / 1000:.0f}s ahead); starting the job"
          + (f" on a standalone cluster of {parallelism} TaskManagers" if parallelism > 1 else " (pwevent run)"),
          flush=True)
    seen = {level: Seen() for level in ("read_committed", "read_uncommitted")}
    stop = threading.Event()
    watchers = [threading.Thread(target=watch, args=(kafka, topics["releases"], level, seen[level], stop), daemon=True)
                for level in seen]
    for watcher in watchers:
        watcher.start()
    load_before = load()
    started = time.time()
    try:
        if not start_launch(launch, started + args.timeout):
            return {"parallelism": parallelism, "ok": False, "error": f"the job did not start; see {folder}"}
        running = time.time()
        plan = make_plan(args, clock, clock.slot_of(int(running * 1000) + 1000 - 1) + 1, folder)
        print(f"{label}: RUNNING after {running - started:.0f}s; slot {plan.first} (first planned) starts in "
              f"{clock.start_ms(plan.first) / 1000 - running:.0f}s; load {load()}", flush=True)
        sends = send(kafka, topics, plan, clock, args, label)
        last = plan.first + len(plan.kinds) - 1
        deadline = clock.end_ms(last) / 1000 + args.delay_ms / 1000 + 60
        while time.time() < deadline and not all(
                s in seen[level].times for level in seen for s in range(plan.first, last + 1)):
            time.sleep(0.2)
        time.sleep(3)  # a second record of a slot would come with the next checkpoints
        counts = final_counts(kafka, topics)
    finally:
        stop.set()
        launch.stop()
    load_after = load()
    rows = slot_rows(args, clock, plan, sends, seen, counts)
    out = {"parallelism": parallelism, "origin": iso(args.origin_ms), "first_slot": plan.first,
           "running_after_s": round(running - started, 1), "load_before": load_before, "load_after": load_after,
           "rows": rows, "groups": groups(rows), **checks(args, rows),
           "other_slots_released": sorted(s for s in counts["read_committed"] if not plan.first <= s <= last),
           "dead_letters": counts["dead_letters"], "producer_lag_max_s": sends["lag_max"]}
    report(args, out)
    return out


def make_plan(args: argparse.Namespace, clock: SlotClock, first: int, folder: Path) -> Plan:
    """Registrations at the first slot's start, then each phase's events (see the module docstring)."""
    first = max(first, 1)
    kinds = [kind for kind in PHASES for _ in range(getattr(args, kind))]
    plan = Plan(first, kinds)
    start = clock.start_ms(first)
    registrations = folder / "registrations.jsonl"
    write_requirements(argparse.Namespace(registered=args.users, users=args.users, dynamic=False, register_slots=1,
                                          origin_ms=start), registrations, args.slot_ms)
    for line in registrations.read_bytes().splitlines():
        plan.records.append((start, "requirements", None, json.loads(line)["user"].encode(), line))
    for index, kind in enumerate(kinds):
        slot = first + index
        span = {"dense": 1.0, "lull": args.lull_part}.get(kind)
        if span is None:
            continue
        for user in range(args.users):
            due = clock.start_ms(slot) + int((user + 0.5) / args.users * span * args.slot_ms)
            value = f'{{"user":"u{user}","time":{due},"value":{(user + slot) % 2}}}'.encode()
            plan.records.append((due, "events", user % args.events_partitions, f"u{user}".encode(), value))
    plan.records.sort(key=lambda r: (r[0], r[1] != "requirements"))
    return plan


def send(kafka: Any, topics: dict[str, str], plan: Plan, clock: SlotClock, args: argparse.Namespace,
         label: str) -> dict[str, Any]:
    """Send the plan's records, each at its due wall time (stamped with it); print each slot's start.
    Returns the events' (partition, due ms, sent wall time) and the largest send lag."""
    from pwevent.jobs.streaming.kafka_io import producer

    client = producer(kafka)
    sent: list[tuple[int, int, float]] = []
    futures = []
    lag_max = 0.0
    starts = [(clock.start_ms(plan.first + i), plan.first + i, kind) for i, kind in enumerate(plan.kinds)]
    try:
        for due, role, partition, key, value in plan.records:
            while starts and starts[0][0] <= due:  # announce every slot started by now, quiet ones too
                at, slot, kind = starts.pop(0)
                pause(at)
                print(f"{label}: slot {slot} ({kind}) starts; load {load()[0]}", flush=True)
            pause(due)
            futures.append(client.send(topics[role], value=value, key=key, partition=partition, timestamp_ms=due))
            now = time.time()
            lag_max = max(lag_max, now - due / 1000)
            if partition is not None:
                sent.append((partition, due, now))
        for at, slot, kind in starts:
            pause(at)
            print(f"{label}: slot {slot} ({kind}) starts; load {load()[0]}", flush=True)
        client.flush(timeout=60)
    finally:
        client.close()
    failed = sum(1 for f in futures if f.failed())
    if failed:
        print(f"{label}: {failed} records refused by the broker")
    return {"events": sent, "lag_max": round(lag_max, 3), "refused": failed}


def pause(due_ms: int) -> None:
    wait = due_ms / 1000 - time.time()
    if wait > 0:
        time.sleep(wait)


def watch(kafka: Any, topic: str, level: str, seen: Seen, stop: threading.Event) -> None:
    """Note when each slot's release records become visible at isolation `level`, until `stop`."""
    from kafka import TopicPartition

    from pwevent.jobs.streaming.kafka_io import consumer

    client = consumer(kafka, isolation_level=level, fetch_max_wait_ms=100)
    try:
        numbers = client.partitions_for_topic(topic)
        while not numbers and not stop.wait(0.2):  # a topic just created may not be in the metadata yet
            numbers = client.partitions_for_topic(topic)
        partitions = [TopicPartition(topic, p) for p in sorted(numbers or ())]
        client.assign(partitions)
        client.seek_to_beginning(*partitions)
        while not stop.is_set():
            for records in client.poll(timeout_ms=100).values():
                at = time.time()
                for record in records:
                    slot = int(json.loads(record.value)["slot"])
                    seen.times.setdefault(slot, []).append(at)
                    seen.stamps.setdefault(slot, []).append(record.timestamp)
                    if level == "read_committed" and len(seen.times[slot]) == 1:
                        print(f"  slot {slot} released: visible (read_committed) at "
                              f"{time.strftime('%H:%M:%S', time.gmtime(at))}.{int(at * 1000) % 1000:03d}", flush=True)
    finally:
        client.close()


def final_counts(kafka: Any, topics: dict[str, str]) -> dict[str, Any]:
    """The release topic read whole: records per slot, read_committed and read_uncommitted (aborted
    records included); the dead letters by reason."""
    from pwevent.jobs.streaming.kafka_io import read_topic

    out: dict[str, Any] = {}
    for level, committed in (("read_committed", True), ("read_uncommitted", False)):
        per_slot: dict[int, int] = {}
        for message in read_topic(kafka, topics["releases"], idle_s=2.0, max_s=60.0, committed=committed):
            slot = int(message.json()["slot"])
            per_slot[slot] = per_slot.get(slot, 0) + 1
        out[level] = per_slot
    reasons: dict[str, int] = {}
    for message in read_topic(kafka, topics["dead_letters"], idle_s=2.0, max_s=60.0):
        reason = str(message.json().get("reason"))
        reasons[reason] = reasons.get(reason, 0) + 1
    out["dead_letters"] = reasons
    return out


def slot_rows(args: argparse.Namespace, clock: SlotClock, plan: Plan, sends: dict[str, Any], seen: dict[str, Seen],
              counts: dict[str, Any]) -> list[dict[str, Any]]:
    delay = args.delay_ms / 1000
    rows = []
    for index, kind in enumerate(plan.kinds):
        slot = plan.first + index
        end_ms = clock.end_ms(slot)
        end = end_ms / 1000
        # when the last events partition got its first event stamped at or after the end
        firsts: dict[int, float] = {}
        for partition, due, at in sends["events"]:
            if due >= end_ms and partition not in firsts:
                firsts[partition] = at
        close = max(firsts.values()) if len(firsts) == args.events_partitions else None
        if close is not None and close > end + delay:
            close = None
        expected = end + delay if close is None else min(close, end + delay)
        committed = min(seen["read_committed"].times.get(slot, []), default=None)
        uncommitted = min(seen["read_uncommitted"].times.get(slot, []), default=None)
        written = min(seen["read_committed"].stamps.get(slot, []), default=None)

        def rel(x: float | None, base: float = end) -> float | None:
            return None if x is None else round(x - base, 3)

        rows.append({
            "slot": slot, "phase": kind, "end": iso(end_ms), "closer": "event" if close is not None else "schedule",
            "event_close_s": rel(close), "expected_s": rel(expected), "written_s": rel(None if written is None
                                                                                        else written / 1000),
            "committed_s": rel(committed), "uncommitted_s": rel(uncommitted),
            "committed_minus_delay_s": rel(committed, end + delay),
            "uncommitted_minus_delay_s": rel(uncommitted, end + delay),
            "after_expected_s": rel(committed, expected), "after_event_close_s": rel(committed, close)
            if close is not None else None,
            "count_committed": counts["read_committed"].get(slot, 0),
            "count_uncommitted": counts["read_uncommitted"].get(slot, 0),
            "seen_committed": len(seen["read_committed"].times.get(slot, [])),
            "seen_uncommitted": len(seen["read_uncommitted"].times.get(slot, []))})
    return rows


def spread(values: list[float]) -> dict[str, float] | None:
    return {"min": min(values), "median": round(statistics.median(values), 3), "max": max(values)} \
        if values else None


def groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """min/median/max per phase, and per (phase, closer)."""
    out = []
    keys = [(phase, None) for phase in PHASES] + [(phase, c) for phase in PHASES for c in ("event", "schedule")]
    for phase, closer in keys:
        chosen = [r for r in rows if r["phase"] == phase and closer in (None, r["closer"])]
        if not chosen or (closer is not None and len({r["closer"] for r in rows if r["phase"] == phase}) == 1):
            continue  # a closer's line only where the phase has both
        out.append({"phase": phase, "closer": closer or "all", "slots": len(chosen), **{
            key: spread([r[key] for r in chosen if r[key] is not None])
            for key in ("committed_s", "committed_minus_delay_s", "uncommitted_s", "after_expected_s")}})
    return out


def checks(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    slack = args.checkpoint_ms / 1000 + 2
    found = {
        "missing": [r["slot"] for r in rows if r["count_committed"] == 0],
        "not_once": [r["slot"] for r in rows if r["count_committed"] > 1 or r["count_uncommitted"] > 1],
        "before_end": [r["slot"] for r in rows if r["uncommitted_s"] is not None and r["uncommitted_s"] < 0],
        "before_expected": [r["slot"] for r in rows
                            if r["uncommitted_s"] is not None and r["uncommitted_s"] < r["expected_s"]],
        f"over_expected_plus_{slack:g}s": [r["slot"] for r in rows
                                            if r["after_expected_s"] is not None and r["after_expected_s"] > slack],
    }
    ok = not (found["missing"] or found["not_once"] or found["before_end"] or found["before_expected"])
    return {"checks": found, "ok": ok}


def report(args: argparse.Namespace, run: dict[str, Any]) -> None:
    def show(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    label = f"p{run['parallelism']}"
    print(f"\n{label}: {settings_text(args)}; origin {run['origin']}, slot {run['first_slot']} first planned; "
          f"load {run['load_before']} -> {run['load_after']}; producer lag max {run['producer_lag_max_s']:.3f}s")
    print("seconds after the slot's end: event close (the last partition's first event at or after the end, sent), "
          "expected release = min(event close, end + delay), written (the record's Kafka timestamp), visible "
          "read_uncommitted / read_committed; count = records in the topic (committed / with uncommitted and aborted)")
    header = ("slot", "phase", "end (UTC)", "closer", "event close", "expected", "written", "uncommitted",
              "committed", "- delay", "count")
    table = [header] + [(str(r["slot"]), r["phase"], r["end"][11:19], r["closer"], show(r["event_close_s"]),
                         show(r["expected_s"]), show(r["written_s"]), show(r["uncommitted_s"]), show(r["committed_s"]),
                         show(r["committed_minus_delay_s"]), f"{r['count_committed']}/{r['count_uncommitted']}")
                        for r in run["rows"]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    print(f"\n{label}: latency (read_committed visible - slot end), min / median / max, seconds; delay "
          f"{args.delay_ms / 1000:g}s, checkpoint interval {args.checkpoint_ms / 1000:g}s")
    for g in run["groups"]:
        def trio(key: str, g: dict[str, Any] = g) -> str:
            s = g[key]
            return "-" if s is None else f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}"

        print(f"  {g['phase']:<5} {g['closer']:<8} {g['slots']:>2} slots: latency {trio('committed_s')}; "
              f"minus delay {trio('committed_minus_delay_s')}; after expected {trio('after_expected_s')}; "
              f"read_uncommitted {trio('uncommitted_s')}")
    c = run["checks"]
    print(f"{label}: checks {'passed' if run['ok'] else 'FAILED'}: " + "; ".join(
        f"{k.replace('_', ' ')}: {v or 'none'}" for k, v in c.items())
          + f"; other slots released {run['other_slots_released'] or 'none'}; dead letters "
            f"{run['dead_letters'] or 'none'}")


if __name__ == "__main__":
    sys.exit(main())
