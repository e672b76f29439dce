"""What the SQL fast path's validation costs (jobs/streaming/event_sql.py), printed, not asserted.

Writes N canonical events (the shape `pwevent generate` writes) to a JSON-lines file, reads it back
through Flink's filesystem connector (format raw, one record per line: a bounded source of raw bytes
like the Kafka table's `value`) on the local mini-cluster (parallelism 1) into a blackhole sink, in
three variants, each timed from submission to the end of the job:

- read: the raw bytes only (source and sink cost);
- extract: JSON_VALUE/TRY_CAST of user, time and value, no validation (what the job would do if it
  trusted its input);
- fast path: `event_sql.fast_path_sql`, the shape check, extraction and domain mapping (one call
  of the Java table function `RecordGroups` per record).

Usage:

    .venv/bin/python benchmarks/bench_event_sql.py                 # 1,000,000 events, cells domain
    .venv/bin/python benchmarks/bench_event_sql.py --events 200000 --domain grid --repeat 3
"""

from __future__ import annotations

import argparse
import sys
import time

from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.streaming.event_sql import fast_path_sql, register_record_groups
from pwevent.jobs.streaming.jars import jvm_jar
from pwevent.operators.domain import GridDomain

ORIGIN_MS = 1_704_067_200_000
DOMAINS = {
    "cells": {"type": "cells", "d": 100},
    "grid": {"type": "grid", "rows": 10, "cols": 10,
             "bbox": {"min_lat": 40.55, "max_lat": 40.99, "min_lon": -74.27, "max_lon": -73.68}},
}


def events_view(config: Config) -> str:
    """The view `events` over the sequence table `seq` (id): canonical events (the shape
    `jobs/common/files.py` writes), 10,000 users, made in SQL so no file or Python enters the measure."""
    domain = config.domain
    if isinstance(domain, GridDomain):
        value = ("'{\"lat\":', CAST(40.55 + MOD(id * 7919, 44000) / 100000.0 AS STRING), ',\"lon\":',"
                 " CAST(-74.27 + MOD(id * 104729, 59000) / 100000.0 AS STRING), '}'")
    else:
        value = f"CAST(MOD(id * 7919, {domain.d}) AS STRING)"
    record = (f"CONCAT('{{\"user\":\"u', CAST(MOD(id, 10000) AS STRING), '\",\"time\":',"
              f" CAST({ORIGIN_MS} + id * 6 AS STRING), ',\"value\":', {value}, '}}')")
    return (f"CREATE TEMPORARY VIEW events AS SELECT CAST({record} AS BYTES) AS `value`, 0 AS `partition`,"
            " id AS `offset`, CAST(0 AS BIGINT) AS `ts_ms` FROM seq")


def variants(config: Config) -> dict[str, str]:
    value = ("CAST(TRY_CAST(JSON_VALUE(s, '$.value.lat') AS DOUBLE) + TRY_CAST(JSON_VALUE(s, '$.value.lon') AS DOUBLE)"
             " AS INT)" if isinstance(config.domain, GridDomain) else "TRY_CAST(JSON_VALUE(s, '$.value') AS INT)")
    extract = ("SELECT JSON_VALUE(s, '$.user'), TRY_CAST(JSON_VALUE(s, '$.time') AS BIGINT),"
               f" {value} FROM (SELECT CAST(`value` AS STRING) AS s FROM events)")
    return {
        "read": "INSERT INTO sink_read SELECT `value` FROM events",
        "extract": f"INSERT INTO sink_extract {extract}",
        "fast path": f"INSERT INTO sink_fast {fast_path_sql(config, 'events')}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--domain", choices=sorted(DOMAINS), default="cells")
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant (the best is printed too)")
    args = parser.parse_args(argv)
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN_MS, "domain": DOMAINS[args.domain]})
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
        t_env.execute_sql(events_view(config))
    batch, t_env = environments["batch"], environments["streaming"]
    with batch.execute_sql("SELECT CAST(`value` AS STRING) FROM events LIMIT 2").collect() as rows:
        print("generated events:", *(row[0] for row in rows))
    with batch.execute_sql("SELECT COUNT(*) FROM (" + fast_path_sql(config, "events") + ")").collect() as rows:
        fast = next(iter(rows))[0]
    print(f"fast path share: {fast}/{args.events} = {fast / args.events:.4f}")
    sinks = {"sink_read": "`v` BYTES", "sink_extract": "`u` STRING, `t` BIGINT, `c` INT",
             "sink_fast": "`u` STRING, `t` BIGINT, `c` INT, `p` INT, `o` BIGINT"}
    for name, columns in sinks.items():
        t_env.execute_sql(f"CREATE TEMPORARY TABLE {name} ({columns}) WITH ('connector' = 'blackhole')")
    print(f"streaming mode, parallelism 1, {args.events} events, domain {args.domain}")
    print(f"{'variant':<10} {'best s':>8} {'records/s':>11} {'us/record':>10}  runs (s)")
    best: dict[str, float] = {}
    for label, statement in variants(config).items():
        runs = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            t_env.execute_sql(statement).wait()
            runs.append(time.perf_counter() - started)
        best[label] = min(runs)
        print(f"{label:<10} {best[label]:8.2f} {args.events / best[label]:11,.0f} "
              f"{best[label] / args.events * 1e6:10.2f}  {', '.join(f'{r:.2f}' for r in runs)}", flush=True)
    cost = (best["fast path"] - best["extract"]) / args.events * 1e6
    print(f"validation over plain extraction: {cost:+.2f} us/record (job start-up included in every run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
