"""`pwevent tail`: follow the release topic (read_committed) and print a live table: per cell the
smoothed value with its 95% interval (docs/formats.md, Release), what an analyst should read; the raw
noisy counts with `--raw` or for releases without `smoothed` (`postprocess: none`). It reads every
release format (jobs/streaming/release_format.py; an Avro release's schema from `release.schema_registry`)."""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from typing import Any

from pwevent.jobs.common.slots import duration_arg
from pwevent.jobs.streaming.kafka_io import CONNECT_TIMEOUT_S, follow
from pwevent.jobs.streaming.release_format import release_decoder
from pwevent.jobs.streaming.settings import load_settings

#: The table's header; its last column is HEADER_CELLS, or "counts" with --raw.
HEADER = f"{'slot':>6} {'end':>24} {'kind':>8} {'users':>8} {'thresh':>8}  "
HEADER_CELLS = "smoothed [95% interval] per cell (raw counts where a release has none)"


def row(release: dict[str, Any], cells: int, raw: bool = False) -> str:
    counts = release["counts"]
    if raw or "smoothed" not in release or "interval" not in release:
        shown = " ".join(f"{c:>6}" for c in counts[:cells]) + ("" if raw else "  (raw counts)")
    else:
        shown = "  ".join(f"{m:.1f} [{lo:.1f}, {hi:.1f}]" for m, (lo, hi) in
                          zip(release["smoothed"][:cells], release["interval"][:cells], strict=True))
    shown += " ..." if len(counts) > cells else ""
    threshold = release.get("threshold")
    return (f"{release['slot']:>6} {release['end']:>24} {release['kind']:>8} {release['population']:>8} "
            f"{'-' if threshold is None else f'{threshold:8.2f}':>8}  {shown}")


def cmd_tail(args: argparse.Namespace) -> int:
    config, settings = load_settings(args.config)
    names = [s.name for s in config.statistics]
    if args.statistic not in names and not (args.statistic is None and names == [None]):
        listed = ", ".join(str(name) for name in names if name is not None)
        what = f"--statistic {args.statistic}: not a statistic of the configuration" if args.statistic else \
            "the configuration has several statistics, each with its release topic"
        print(f"pwevent tail: {what}; name one with --statistic ({listed or 'none: leave it out'})", file=sys.stderr)
        return 2
    topic = settings.kafka.release_topic(args.statistic)
    decoder = release_decoder(settings.release)
    seen = 0
    start = last = time.monotonic()
    # --timeout bounds the whole run, the wait for an unreachable broker included
    timeout_s = args.timeout / 1000 if args.timeout else None
    idle_exit_s = args.idle_exit / 1000 if args.idle_exit else None
    wait_s = min(timeout_s, CONNECT_TIMEOUT_S) if timeout_s else CONNECT_TIMEOUT_S
    messages = follow(settings.kafka, topic, from_beginning=not args.from_end, wait_s=wait_s)
    first = next(messages)  # a broker answered and the topic exists (else BrokerUnavailableError: exit 4)
    print(HEADER + ("counts" if args.raw else HEADER_CELLS), flush=True)
    for message in itertools.chain([first], messages):
        now = time.monotonic()
        if message is not None:
            last = now
            try:
                print(row(decoder.decode(message.value), args.cells, args.raw), flush=True)
            except (ValueError, KeyError, TypeError):
                print(f"(not a release at offset {message.offset})", file=sys.stderr)
            seen += 1
            if args.max_slots and seen >= args.max_slots:
                break
        if (idle_exit_s and now - last >= idle_exit_s) or (timeout_s and now - start >= timeout_s):
            break
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tail", help="print the committed releases as they arrive",
        description="Follow the release topic with isolation.level=read_committed (only releases whose "
        "Kafka transaction committed) and print one line per slot. Reads every release format (json, "
        "json-confluent, avro-confluent; the Avro one's schema from release.schema_registry).",
    )
    p.add_argument("--config", required=True)
    p.add_argument("--from-end", action="store_true", help="only releases committed from now on")
    p.add_argument("--statistic", metavar="NAME", help="with several statistics under one budget: the one to "
                   "follow (its release topic, topics.releases.NAME)")
    p.add_argument("--cells", type=int, default=8, help="cells shown per line")
    p.add_argument("--raw", action="store_true", help="show the raw noisy counts instead of the smoothed values "
                   "and their 95%% intervals")
    p.add_argument("--max-slots", type=int, default=0, help="stop after this many releases (0: never)")
    p.add_argument("--idle-exit", type=duration_arg, help="stop after this long without a release, e.g. 20s "
                   "(a bare number: seconds; default: never)")
    p.add_argument("--timeout", type=duration_arg, help="stop after this long, waiting for an unreachable broker "
                   "included, e.g. 60s (a bare number: seconds; default: no limit, the broker gets 30 s to answer)")
    p.set_defaults(func=cmd_tail)
