"""The reference parser's cost per record by input format (docs/benchmarks.md, "The reference parser
per input format"): `parse_event` over the same events as JSON lines, Confluent-framed JSON, plain Avro
(`format: avro`), Avro in the Confluent wire format (`format: avro-confluent`), plain Protobuf
(`format: protobuf`, a descriptor set), Protobuf in the Confluent wire format (`format:
protobuf-confluent`; each registry schema fetched, and a `.proto` one compiled, once from the local
Schema Registry of deploy/local/schema-registry.sh, then cached) and whole Kafka records (JSON
values, the user id the key, the time the Kafka timestamp: each record's whole-records line read as
the job's slow path reads it, then parsed).
Reports microseconds per record and each format's ratio to JSON measured in the same run, best of
`--repeat` passes.

    .venv/bin/python benchmarks/bench_parse.py [--records 200000] [--repeat 3] [--nested]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fastavro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pwevent.jobs.common.avro_format import encode_datum, frame  # noqa: E402
from pwevent.jobs.common.config import parse_config  # noqa: E402
from pwevent.jobs.common.kafka_record import KafkaRecord  # noqa: E402
from pwevent.jobs.common.protobuf_format import confluent_value  # noqa: E402
from pwevent.jobs.common.records import parse_event  # noqa: E402
from tests.protobuf_schemas import Messages, encode  # noqa: E402
from tests.schema_registry import LocalSchemaRegistry  # noqa: E402

ORIGIN_MS = 1_704_067_200_000
FLAT = {"type": "record", "name": "Event", "fields": [
    {"name": "user", "type": "string"},
    {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "value", "type": "int"}]}
NESTED = {"type": "record", "name": "Envelope", "fields": [
    {"name": "meta", "type": {"type": "record", "name": "Meta", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "source", "type": "string"}]}},
    {"name": "payload", "type": {"type": "record", "name": "Payload", "fields": [
        {"name": "user_id", "type": "string"}, {"name": "reading", "type": ["null", "int"]}]}}]}
#: The same two shapes in Protobuf, times as google.protobuf.Timestamp; the event is message [1].
PROTO_FLAT = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Unused { int32 x = 1; }
message Event { string user = 1; google.protobuf.Timestamp time = 2; int32 value = 3; }
"""
PROTO_NESTED = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Unused { int32 x = 1; }
message Event {
  message Meta { google.protobuf.Timestamp ts = 1; string source = 2; }
  message Payload { string user_id = 1; optional int32 reading = 2; }
  Meta meta = 1;
  Payload payload = 2;
}
"""


def records(n: int, nested: bool) -> list[dict]:
    """`n` events (as decoded Avro records: times are datetimes)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        moment = epoch + timedelta(milliseconds=ORIGIN_MS + 37 * i)
        user, value = f"user-{i % 5000}", i % 100
        out.append({"meta": {"ts": moment, "source": "sensor-7"}, "payload": {"user_id": user, "reading": value}}
                   if nested else {"user": user, "time": moment, "value": value})
    return out


def plain(value):
    """A record's values with times as epoch milliseconds."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return value


def as_json(record: dict) -> bytes:
    return json.dumps(plain(record)).encode()


def best_us(values: list[bytes], fields, domain, repeat: int) -> float:
    whole = fields.whole_records
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for value in values:
            parse_event(KafkaRecord.of_line(value) if whole else value, fields, domain)
        best = min(best, time.perf_counter() - start)
    return best / len(values) * 1e6


def whole_line(record: dict, value_path: str) -> bytes:
    """A record as a whole-records line: the user id the key, the time the Kafka timestamp, the value
    at `value_path` in a JSON value."""
    plain = json.loads(as_json(record))
    user, stamp, value = ((plain["payload"]["user_id"], plain["meta"]["ts"], plain["payload"]["reading"])
                          if "payload" in plain else (plain["user"], plain["time"], plain["value"]))
    keys = value_path.split(".")
    body: dict = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        body = {key: body}
    return KafkaRecord(json.dumps(body).encode(), user.encode(), stamp).line()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nested", action="store_true", help="nested records (payload.user_id, meta.ts)")
    args = parser.parse_args()
    schema = NESTED if args.nested else FLAT
    paths = ({"user": "payload.user_id", "time": "meta.ts", "value": "payload.reading"} if args.nested
             else {"user": "user", "time": "time", "value": "value"})
    parsed = fastavro.parse_schema(schema)
    data = records(args.records, args.nested)
    with tempfile.TemporaryDirectory() as folder:
        registry = LocalSchemaRegistry(Path(folder) / "registry")  # deploy/local/schema-registry.sh
        url = registry.start()
        schema_id = registry.add("events-value", schema)
        avsc = os.path.join(folder, "events.avsc")
        Path(avsc).write_text(json.dumps(schema))
        proto = PROTO_NESTED if args.nested else PROTO_FLAT
        messages = Messages(proto)
        descriptors = str(messages.write_descriptor_set(Path(folder) / "events.desc"))
        proto_id = registry.add_protobuf("events-proto-value", proto)
        encoded = [encode(messages, "bench.Event", plain(r)) for r in data]
        base = {"slot": "60s", "origin": ORIGIN_MS, "domain": {"type": "cells", "d": 100}}
        cases = {
            "json": ({}, [as_json(r) for r in data]),
            "json, Confluent-framed": ({}, [frame(1, as_json(r)) for r in data]),
            "avro (schema_file)": ({"format": "avro", "schema_file": avsc}, [encode_datum(r, parsed) for r in data]),
            "avro-confluent (registry)": ({"format": "avro-confluent", "schema_registry": {"url": url}},
                                          [frame(schema_id, encode_datum(r, parsed)) for r in data]),
            "protobuf (descriptor_set)": ({"format": "protobuf", "protobuf": {"descriptor_set": descriptors,
                                                                              "message": "bench.Event"}}, encoded),
            "protobuf-confluent (registry)": ({"format": "protobuf-confluent", "schema_registry": {"url": url}},
                                              [confluent_value(proto_id, [1], m) for m in encoded]),
            "whole records ($key, $timestamp)": ({"user": "$key", "time": "$timestamp"},
                                                  [whole_line(r, paths["value"]) for r in data]),
        }
        results = {}
        for name, (fmt, values) in cases.items():
            config = parse_config({**base, "events": {**paths, **fmt}})
            best_us(values[:1], config.events, config.domain, 1)  # the registry's one request, outside the timing
            results[name] = (best_us(values, config.events, config.domain, args.repeat),
                             sum(map(len, values)) / len(values))
        registry.stop()
    load = os.getloadavg()[0]
    print(f"{args.records} records ({'nested' if args.nested else 'flat'}), best of {args.repeat}, "
          f"load average {load:.1f}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print("| format | bytes/record | us/record | ratio to json |")
    print("|---|---|---|---|")
    reference = results["json"][0]
    for name, (us, size) in results.items():
        print(f"| {name} | {size:.0f} | {us:.2f} | {us / reference:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
