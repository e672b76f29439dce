"""Protobuf events end to end (docs/streaming.md, "Parsing"): the job against a real broker and PyFlink's
mini-cluster equals `pwevent replay` of the same framed-records file, release for release, spend log
line for line, with the full audit, from a backlog read beside a CPU burner, while invalid Protobuf
records are mixed in. With a Schema Registry (a real one: Rivven's rivven-schema, started by
deploy/local/schema-registry.sh, serving `.proto` texts) and plain, with a descriptor set written by
protoc (grpcio-tools)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.avro_format import framed_line
from pwevent.jobs.common.protobuf_format import confluent_value
from pwevent.jobs.common.slots import parse_time_ms
from tests.integration.conftest import framed_backlog_equals_replay, generate, make_job, slot_time
from tests.protobuf_schemas import (
    DOUBLE_USER_PROTO,
    EVENT_FIELDS,
    EVENT_PROTO,
    NO_READING_PROTO,
    REQUIREMENT_PROTO,
    Messages,
    encode,
    reading,
)
from tests.schema_registry import LocalSchemaRegistry

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

EVENTS = Messages(EVENT_PROTO)
#: EVENT_PROTO with a field added to the event: registered mid-stream.
EVENT_V2_PROTO = EVENT_PROTO.replace("  Payload payload = 2;\n", "  Payload payload = 2;\n  string site = 20;\n")
EVENTS_V2 = Messages(EVENT_V2_PROTO)
REQUIREMENTS = Messages(REQUIREMENT_PROTO)
#: `sensors.Reading` is the second message of its file.
READING = [1]


def _flat_events(path: str) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for line in Path(path).read_text().splitlines()), key=lambda r: r["time"])


@pytest.mark.registry
def test_protobuf_confluent_equals_the_replay_with_invalid_records_mixed_in(streaming_job: Any,
                                                                           schema_registry: LocalSchemaRegistry):
    """Events in the Confluent wire format with message indexes, nested fields, the time a
    google.protobuf.Timestamp; the schema's v1 for slots 1-6, v2 (a field added) registered for slots
    7-12. Before slot 7's events, on both events partitions: a far-ahead record out of the domain,
    truncated bytes, a wrong magic byte, an id the registry does not know, message indexes that name
    no message, a schema lacking the mapped value, a user of the wrong type, JSON. Nothing valid is
    `late`; the dead letters are the replay's rejects; the job asked the registry for v2."""
    registry, subject = schema_registry, f"events-{uuid.uuid4().hex[:8]}-value"
    slots, bad_at = 12, 7
    job = make_job(streaming_job, "PBD", {"events": {**EVENT_FIELDS, "format": "protobuf-confluent",
                                                     "schema_registry": {"url": registry.url, "retry_for": "60s"}}})
    flat_events, requirements = generate(job.folder, users=40, slots=slots)
    v1 = registry.add_protobuf(subject, EVENT_PROTO)
    v2: list[int] = []

    def value(flat: dict[str, Any]) -> bytes:
        record = reading(flat["user"], flat["time"], flat["value"])
        if flat["time"] < slot_time(bad_at):
            return confluent_value(v1, READING, encode(EVENTS, "sensors.Reading", record))
        if not v2:
            v2.append(registry.add_protobuf(subject, EVENT_V2_PROTO))  # registered mid-stream
        return confluent_value(v2[0], READING, encode(EVENTS_V2, "sensors.Reading", {**record, "site": "south"}))

    values = [value(flat) for flat in _flat_events(flat_events)]
    assert v2 and v2[0] != v1
    far = slot_time(bad_at, 50 * 60_000)
    no_reading = registry.add_protobuf(f"other-{subject}", NO_READING_PROTO)
    double_user = registry.add_protobuf(f"odd-{subject}", DOUBLE_USER_PROTO)
    message = encode(EVENTS, "sensors.Reading", reading("u1", slot_time(bad_at), 1))
    good = confluent_value(v1, READING, message)
    bad = [
        (confluent_value(v1, READING, encode(EVENTS, "sensors.Reading", reading("u1", far, 7))), far),  # out of domain
        (good[:-3], far),  # truncated inside the payload message
        (b"\x01" + good[1:], far),  # wrong magic byte
        (confluent_value(424242, READING, message), far),  # an id the registry does not know
        (confluent_value(v1, [5], message), far),  # message indexes that name no message
        (confluent_value(no_reading, [2], encode(Messages(NO_READING_PROTO), "other.NoReading", {
            "meta": {"ts": far}, "payload": {"user_id": "u1"}})), far),  # no reading
        (confluent_value(double_user, [2], encode(Messages(DOUBLE_USER_PROTO), "odd.DoubleUser", {
            "meta": {"ts": far}, "payload": {"user_id": 1.5, "reading": 1}})), far),  # a user of the wrong type
        (json.dumps({"payload": {"user_id": "u1", "reading": 1}, "meta": {"ts": far}}).encode(), far),  # JSON
    ]
    dead = framed_backlog_equals_replay(job, values, requirements, slots, bad, bad_at)
    assert Counter(d["reason"] for d in dead) == Counter({"out_of_domain": 2, "undecodable": 8, "unknown_schema": 2,
                                                          "missing_field": 2, "mistyped_field": 2})
    assert registry.requests(f"/schemas/ids/{v2[0]}") >= 1


def test_plain_protobuf_equals_the_replay_with_invalid_records_mixed_in(streaming_job: Any, tmp_path: Path):
    """Events and requirement records in plain Protobuf (`format: protobuf`, the message type of a
    descriptor set file; the requirements' time a Timestamp): truncated bytes, a Confluent-framed
    record (not plain), bytes that are no Protobuf and a record without its reading, mixed in before
    slot 5; the full audit reads the Protobuf requirement records."""
    descriptors = EVENTS.write_descriptor_set(tmp_path / "events.desc")
    requirement_descriptors = REQUIREMENTS.write_descriptor_set(tmp_path / "requirement.desc")
    slots, bad_at = 8, 5
    job = make_job(streaming_job, "PBD", {
        "events": {**EVENT_FIELDS, "format": "protobuf", "protobuf": {"descriptor_set": str(descriptors),
                                                                      "message": "sensors.Reading"}},
        "requirements": {"format": "protobuf", "protobuf": {"descriptor_set": str(requirement_descriptors),
                                                            "message": "prefs.Requirement"}}})
    flat_events, flat_requirements = generate(job.folder, users=30, slots=slots)
    requirements = str(job.folder / "requirements.b64")
    Path(requirements).write_bytes(b"".join(framed_line(encode(REQUIREMENTS, "prefs.Requirement", {
        **record, "time": parse_time_ms(record["time"], "time")})) + b"\n"
        for record in map(json.loads, Path(flat_requirements).read_text().splitlines())))
    values = [encode(EVENTS, "sensors.Reading", reading(r["user"], r["time"], r["value"]))
              for r in _flat_events(flat_events)]
    stamp = slot_time(bad_at)
    good = encode(EVENTS, "sensors.Reading", reading("u1", stamp, 1))
    bad = [(good[:-3], stamp), (confluent_value(1, READING, good), stamp), (b"\xff\xfe\xfd", stamp),
           (encode(EVENTS, "sensors.Reading", reading("u1", stamp, None)), stamp)]
    dead = framed_backlog_equals_replay(job, values, requirements, slots, bad, bad_at)
    assert Counter(d["reason"] for d in dead) == Counter({"undecodable": 6, "missing_field": 2})
