"""What the SQL fast path's validation costs (jobs/streaming/event_sql.py), printed, not asserted.

Makes N canonical events (the shape `pwevent generate` writes; with `--shapes`, also nested under
field paths or behind a Confluent frame) in SQL from a sequence (a bounded source of raw bytes like
the Kafka table's `value`) on the local mini-cluster (parallelism 1) into a blackhole sink, in
three variants per shape, each timed from submission to the end of the job (the runs go round robin
over shapes and variants, `--repeat` rounds, so that the machine's load drifts over all of them):

- read: the raw bytes only (source and sink cost);
- extract: JSON_VALUE/TRY_CAST of user, time and value, no validation (what the job would do if it
  trusted its input);
- fast path: `event_sql.fast_path_sql`, the shape check, extraction and domain mapping (one call
  of the Java table function `RecordGroups` per record).

Usage:

    .venv/bin/python benchmarks/bench_event_sql.py                 # 1,000,000 events, cells domain
    .venv/bin/python benchmarks/bench_event_sql.py --events 200000 --domain grid --repeat 3
    .venv/bin/python benchmarks/bench_event_sql.py --shapes flat,nested,framed   # paths and frames vs flat
"""

from __future__ import annotations

import argparse
import sys
import time

from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.common.field_paths import field_path
from pwevent.jobs.streaming.event_sql import fast_path_sql, register_record_groups
from pwevent.jobs.streaming.jars import jvm_jar
from pwevent.operators.domain import GridDomain

ORIGIN_MS = 1_704_067_200_000
DOMAINS = {
    "cells": {"type": "cells", "d": 100},
    "grid": {"type": "grid", "rows": 10, "cols": 10,
             "bbox": {"min_lat": 40.55, "max_lat": 40.99, "min_lon": -74.27, "max_lon": -73.68}},
}


#: The record shapes (`--shapes`): the field paths of the configuration, and whether a value is framed.
SHAPES: dict[str, tuple[dict[str, str], bool]] = {
    "flat": ({}, False),
    "nested": ({"user": "payload.user_id", "time": "meta.ts", "value": "payload.reading"}, False),
    "framed": ({}, True),
}


def shape_config(domain: str, shape: str) -> Config:
    return parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN_MS, "domain": DOMAINS[domain],
                         "events": SHAPES[shape][0]})


def events_view(config: Config, shape: str) -> str:
    """The view `events_<shape>` over the sequence table `seq` (id): canonical events (the shape
    `jobs/common/files.py` writes; nested as `shape`'s paths say, or behind a Confluent frame),
    10,000 users, made in SQL so no file or Python enters the measure."""
    domain = config.domain
    if isinstance(domain, GridDomain):
        value = ("'{\"lat\":', CAST(40.55 + MOD(id * 7919, 44000) / 100000.0 AS STRING), ',\"lon\":',"
                 " CAST(-74.27 + MOD(id * 104729, 59000) / 100000.0 AS STRING), '}'")
    else:
        value = f"CAST(MOD(id * 7919, {domain.d}) AS STRING)"
    user, time = "'u', CAST(MOD(id, 10000) AS STRING)", f"CAST({ORIGIN_MS} + id * 6 AS STRING)"
    if SHAPES[shape][0]:
        record = (f"CONCAT('{{\"payload\":{{\"user_id\":\"', {user}, '\",\"reading\":', {value},"
                  f" '}},\"meta\":{{\"ts\":', {time}, '}}}}')")
    else:
        record = f"CONCAT('{{\"user\":\"', {user}, '\",\"time\":', {time}, ',\"value\":', {value}, '}}')"
    if SHAPES[shape][1]:
        record = f"CONCAT(CHR(0), CHR(0), CHR(0), CHR(0), CHR(1), {record})"
    return (f"CREATE TEMPORARY VIEW events_{shape} AS SELECT CAST({record} AS BYTES) AS `value`, 0 AS `partition`,"
            " id AS `offset`, CAST(0 AS BIGINT) AS `ts_ms` FROM seq")


def variants(config: Config, shape: str) -> dict[str, str]:
    table = f"events_{shape}"
    paths = {name: "$." + ".".join(field_path(getattr(config.events, name))) for name in ("user", "time", "value")}
    value = (f"CAST(TRY_CAST(JSON_VALUE(s, '{paths['value']}.lat') AS DOUBLE)"
             f" + TRY_CAST(JSON_VALUE(s, '{paths['value']}.lon') AS DOUBLE) AS INT)"
             if isinstance(config.domain, GridDomain) else f"TRY_CAST(JSON_VALUE(s, '{paths['value']}') AS INT)")
    text = "SUBSTRING(CAST(`value` AS STRING) FROM 6)" if SHAPES[shape][1] else "CAST(`value` AS STRING)"
    extract = (f"SELECT JSON_VALUE(s, '{paths['user']}'), TRY_CAST(JSON_VALUE(s, '{paths['time']}') AS BIGINT),"
               f" {value} FROM (SELECT {text} AS s FROM {table})")
    return {
        "read": f"INSERT INTO sink_read SELECT `value` FROM {table}",
        "extract": f"INSERT INTO sink_extract {extract}",
        "fast path": f"INSERT INTO sink_fast {fast_path_sql(config, table)}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--domain", choices=sorted(DOMAINS), default="cells")
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant (the best is printed too)")
    parser.add_argument("--shapes", default="flat",
                        help="comma-separated record shapes, measured in one run: flat (top-level user, time, "
                             "value), nested (payload.user_id, meta.ts, payload.reading), framed (flat behind a "
                             "Confluent frame); each shape's fast path is also given as a ratio to the first's")
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    if not shapes or any(shape not in SHAPES for shape in shapes):
        parser.error(f"--shapes: a comma-separated list of {', '.join(SHAPES)}")
    from pyflink.table import EnvironmentSettings, TableEnvironment

    configs = {shape: shape_config(args.domain, shape) for shape in shapes}
    environments = {}
    for mode in ("batch", "streaming"):
        settings = EnvironmentSettings.in_batch_mode() if mode == "batch" else EnvironmentSettings.in_streaming_mode()
        t_env = environments[mode] = TableEnvironment.create(settings)
        t_env.get_config().set("parallelism.default", "1")
        t_env.get_config().set("pipeline.jars", jvm_jar().as_uri())
        register_record_groups(t_env)
        t_env.execute_sql(f"CREATE TEMPORARY TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'fields.id.kind' "
                          f"= 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '{args.events - 1}', "
                          f"'number-of-rows' = '{args.events}', 'rows-per-second' = '1000000000')")
        for shape, config in configs.items():
            t_env.execute_sql(events_view(config, shape))
    batch, t_env = environments["batch"], environments["streaming"]
    for shape, config in configs.items():
        with batch.execute_sql(f"SELECT `value` FROM events_{shape} LIMIT 2").collect() as rows:
            print(f"generated events ({shape}):", *(bytes(row[0]) for row in rows))
        with batch.execute_sql("SELECT COUNT(*) FROM (" + fast_path_sql(config, f"events_{shape}") + ")").collect() \
                as rows:
            fast = next(iter(rows))[0]
        print(f"fast path share ({shape}): {fast}/{args.events} = {fast / args.events:.4f}")
    sinks = {"sink_read": "`v` BYTES", "sink_extract": "`u` STRING, `t` BIGINT, `c` INT",
             "sink_fast": "`u` STRING, `t` BIGINT, `c` INT, `p` INT, `o` BIGINT"}
    for name, columns in sinks.items():
        t_env.execute_sql(f"CREATE TEMPORARY TABLE {name} ({columns}) WITH ('connector' = 'blackhole')")
    print(f"streaming mode, parallelism 1, {args.events} events, domain {args.domain}")
    print(f"{'shape':<7} {'variant':<10} {'best s':>8} {'records/s':>11} {'us/record':>10}  runs (s)")
    statements = {(shape, label): statement for shape, config in configs.items()
                  for label, statement in variants(config, shape).items()}
    runs: dict[tuple[str, str], list[float]] = {key: [] for key in statements}
    for _ in range(args.repeat):  # round robin: a change of the machine's load hits every shape alike
        for key, statement in statements.items():
            started = time.perf_counter()
            t_env.execute_sql(statement).wait()
            runs[key].append(time.perf_counter() - started)
    best = {key: min(times) for key, times in runs.items()}
    for (shape, label), times in runs.items():
        print(f"{shape:<7} {label:<10} {best[shape, label]:8.2f} {args.events / best[shape, label]:11,.0f} "
              f"{best[shape, label] / args.events * 1e6:10.2f}  {', '.join(f'{r:.2f}' for r in times)}", flush=True)
    for shape in shapes:
        cost = (best[shape, "fast path"] - best[shape, "extract"]) / args.events * 1e6
        over_read = (best[shape, "fast path"] - best[shape, "read"]) / args.events * 1e6
        print(f"{shape}: validation over plain extraction {cost:+.2f} us/record, fast path over reading "
              f"{over_read:+.2f} us/record, fast path time / {shapes[0]}'s: "
              f"{best[shape, 'fast path'] / best[shapes[0], 'fast path']:.3f} (job start-up included in every run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
