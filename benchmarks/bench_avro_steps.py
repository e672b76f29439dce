"""What each JVM step of an event's parsing costs per record (issue "Existing pipelines": the part of
the cost each format adds), printed, not asserted.

Compiles benchmarks/AvroSteps.java against the job's JVM jar, Flink's Avro jar and the venv's Flink
jars, and runs it in one JVM without Flink's runtime: N Confluent-framed Avro events of
bench_stream.py's writer schema ({user: string, time: timestamp-millis, value: int}) and the same
events as canonical JSON, each step timed over all of them (best of `--rounds`, after a warm-up
round): Avro decoding alone; decoding + re-encoding + comparing the bytes (AvroCertifier's
certificate that the value is the one canonical datum); the whole AvroFields projection (with the
field paths' JSON text); the fast path's regular expression (RecordGroups, the regex of a
`format: avro-confluent` configuration) over that text; and the same regex over the JSON events
(a JSON event's only JVM parsing step). The regex must match every record of both, or it fails.

    .venv/bin/python benchmarks/bench_avro_steps.py [--records 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyflink

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.streaming.event_sql import record_regex
from pwevent.jobs.streaming.jars import avro_jar, jvm_jar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_stream import EVENT_SCHEMA  # noqa: E402 (the benchmark's writer schema, one definition)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="events per step (default 1,000,000)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds after the warm-up; the best is printed")
    args = parser.parse_args(argv)
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z",
                           "domain": {"type": "cells", "d": 100},
                           "events": {"format": "avro-confluent", "schema_registry": {"url": "http://127.0.0.1:1"}}})
    regex = record_regex(config)
    assert regex is not None
    flink_lib = Path(pyflink.__file__).parent / "lib"
    classpath = os.pathsep.join([str(jvm_jar()), str(avro_jar()), str(flink_lib / "*")])
    with tempfile.TemporaryDirectory(prefix="avro-steps-") as classes:
        source = REPO / "benchmarks" / "AvroSteps.java"
        subprocess.run(["javac", "-Xlint:all,-processing", "-Werror", "-d", classes, "-cp", classpath, str(source)],
                       check=True)
        done = subprocess.run(["java", "-Xmx2g", "-cp", os.pathsep.join([classes, classpath]),
                               "pwevent.flink.avro.AvroSteps", str(args.records), str(args.rounds),
                               json.dumps(EVENT_SCHEMA), regex, str(config.max_record_bytes)],
                              check=True, capture_output=True, text=True)
    print(f"{args.records:,} events, best of {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    print(done.stdout, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
