"""Avro events with a Schema Registry, end to end (docs/streaming.md, "Parsing"): the job against a real
broker and PyFlink's mini-cluster equals `pwevent replay` of the same framed-records file, field by
field, with the full audit, while invalid Avro records are mixed in. The registry is a real one
(Rivven's rivven-schema, started by deploy/local/schema-registry.sh: tests/schema_registry.py)."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
import pytest

from pwevent.jobs.common.avro_format import encode_datum, frame, framed_line
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    check_equals_replay,
    cpu_burner,
    framed_backlog_equals_replay,
    generate,
    make_job,
    replay,
    slot_time,
)
from tests.registry_gateway import RegistryGateway
from tests.schema_registry import LocalSchemaRegistry

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]
registry_test = pytest.mark.registry

EVENT_V1 = {"type": "record", "name": "Reading", "namespace": "sensors", "fields": [
    {"name": "meta", "type": {"type": "record", "name": "Meta", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}},
    {"name": "payload", "type": {"type": "record", "name": "Payload", "fields": [
        {"name": "user_id", "type": "string"}, {"name": "reading", "type": ["null", "int"], "default": None}]}},
]}
#: v1 with a field added, with a default: registered mid-stream.
EVENT_V2 = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "site", "type": "string", "default": "north"}]}
NO_READING = {"type": "record", "name": "Other", "fields": [
    {"name": "meta", "type": {"type": "record", "name": "M2", "fields": [{"name": "ts", "type": "long"}]}},
    {"name": "payload", "type": {"type": "record", "name": "P2", "fields": [{"name": "user_id", "type": "string"}]}}]}
DOUBLE_USER = {"type": "record", "name": "Odd", "fields": [
    {"name": "meta", "type": {"type": "record", "name": "M3", "fields": [{"name": "ts", "type": "long"}]}},
    {"name": "payload", "type": {"type": "record", "name": "P3", "fields": [
        {"name": "user_id", "type": "double"}, {"name": "reading", "type": "int"}]}}]}
AVRO_EVENTS = {"user": "payload.user_id", "time": "meta.ts", "value": "payload.reading"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def avro_value(schema_id: int, writer: dict[str, Any], record: dict[str, Any]) -> bytes:
    return frame(schema_id, encode_datum(record, fastavro.parse_schema(writer)))


def reading(user: Any, time_ms: int, value: Any, **more: Any) -> dict[str, Any]:
    """A record of EVENT_V1 / EVENT_V2."""
    return {"meta": {"ts": _EPOCH + timedelta(milliseconds=time_ms)}, "payload": {"user_id": user, "reading": value},
            **more}


@registry_test
def test_avro_confluent_equals_the_replay_with_invalid_records_mixed_in(streaming_job: Any,
                                                                       schema_registry: LocalSchemaRegistry) -> None:
    """Events in the Confluent wire format, nested fields; schema v1 for slots 1-6, v2 (a field added
    with a default) registered for slots 7-12. Before slot 7's events, on both events partitions,
    invalid Avro records: a far-ahead one (50 minutes, out of domain, stamped with that time as
    produce does), truncated bytes, a wrong magic byte, an id the registry does not know, a schema
    lacking the mapped value, a user of the wrong type, JSON. The whole input is a backlog, read
    beside a CPU burner. The job equals the replay of the valid records, field by field, spend log
    line for line, with the full audit; nothing valid is `late`; the dead letters are the replay's
    rejects; the job asked the registry for v2."""
    registry, subject = schema_registry, f"events-{uuid.uuid4().hex[:8]}-value"
    slots, bad_at = 12, 7
    job = make_job(streaming_job, "PBD", {"events": {**AVRO_EVENTS, "format": "avro-confluent",
                                                     "schema_registry": {"url": registry.url, "retry_for": "60s"}}})
    flat_events, requirements = generate(job.folder, users=40, slots=slots)
    v1 = registry.add(subject, EVENT_V1)
    registry.set_compatibility(subject, "NONE")  # its check refuses logical types (tests/schema_registry.py)
    v2_schema_id: list[int] = []

    def value(flat: dict[str, Any]) -> bytes:
        if flat["time"] < slot_time(bad_at):
            return avro_value(v1, EVENT_V1, reading(flat["user"], flat["time"], flat["value"]))
        if not v2_schema_id:
            v2_schema_id.append(registry.add(subject, EVENT_V2))  # registered mid-stream
        return avro_value(v2_schema_id[0], EVENT_V2, reading(flat["user"], flat["time"], flat["value"], site="south"))

    flat = [json.loads(line) for line in Path(flat_events).read_text().splitlines()]
    values = [value(record) for record in sorted(flat, key=lambda r: r["time"])]
    assert v2_schema_id and v2_schema_id[0] != v1

    far = slot_time(bad_at, 50 * 60_000)
    no_reading = registry.add(f"other-{subject}", NO_READING)
    double_user = registry.add(f"odd-{subject}", DOUBLE_USER)
    good = avro_value(v1, EVENT_V1, reading("u1", slot_time(bad_at), 1))
    bad = [
        (avro_value(v1, EVENT_V1, reading("u1", far, -1)), far),  # out of domain, far ahead
        (good[:-3], far),  # truncated
        (b"\x01" + good[1:], far),  # wrong magic byte
        (frame(424242, good[5:]), far),  # an id the registry does not know
        (avro_value(no_reading, NO_READING, {"meta": {"ts": far}, "payload": {"user_id": "u1"}}), far),  # no reading
        (avro_value(double_user, DOUBLE_USER, {"meta": {"ts": far}, "payload": {"user_id": 1.5, "reading": 1}}),
         far),  # a user of the wrong type
        (json.dumps({"payload": {"user_id": "u1", "reading": 1}, "meta": {"ts": far}}).encode(), far),  # JSON
    ]
    dead = framed_backlog_equals_replay(job, values, requirements, slots, bad, bad_at)
    reasons = Counter(d["reason"] for d in dead)
    assert reasons == Counter({"out_of_domain": 2, "undecodable": 6, "unknown_schema": 2, "missing_field": 2,
                            "mistyped_field": 2}), reasons
    assert registry.requests(f"/schemas/ids/{v2_schema_id[0]}") >= 1


def test_plain_avro_container_file_equals_the_replay(streaming_job: Any, tmp_path: Path) -> None:
    """Events in plain Avro (`format: avro`, the writer schema a file): an Avro object container file,
    which `pwevent produce` sends record by record and `pwevent replay` reads; the backlog read at
    full speed beside a CPU burner; a truncated record and one of the wrong schema are dead letters."""
    schema_file = tmp_path / "reading.avsc"
    schema_file.write_text(json.dumps(EVENT_V1))
    slots = 8
    job = make_job(streaming_job, "PBD", {"events": {**AVRO_EVENTS, "format": "avro", "schema_file": str(schema_file)}})
    flat_events, requirements = generate(job.folder, users=30, slots=slots)
    flat = sorted((json.loads(line) for line in Path(flat_events).read_text().splitlines()), key=lambda r: r["time"])
    events = job.folder / "events.avro"
    with open(events, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(EVENT_V1), [reading(r["user"], r["time"], r["value"]) for r in flat])
    expected = replay(job, str(events), requirements, slots)
    assert len(expected["releases"]) == slots and not expected["rejects"]
    produce_files(job.kafka, job.config, str(events), requirements, 0.0)
    good = encode_datum(reading("u1", slot_time(2), 1), fastavro.parse_schema(EVENT_V1))
    client = producer(job.kafka)
    for record in (good[:-2], frame(1, good)):  # truncated; Confluent-framed, not plain
        client.send(job.topics["events"], value=record, timestamp_ms=slot_time(2))
    client.close()
    with cpu_burner():
        job.start(seed=SEED)
        check_equals_replay(job, str(events), requirements, slots, expected)
    dead = [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    assert Counter(d["reason"] for d in dead) == Counter({"undecodable": 2}), dead


#: Failures the job rides out in the outage test: more than the default fixed-delay's 3 attempts.
OUTAGE_FAILURES = 5


@registry_test
def test_a_registry_outage_longer_than_the_fixed_restarts_is_ridden_out_with_exponential_delay(
        streaming_job: Any, schema_registry: LocalSchemaRegistry) -> None:
    """The runbook's long Schema Registry outage (docs/operations.md): the registry's address is dark
    when the job starts and stays dark while the job fails OUTAGE_FAILURES times (each task asks for
    `retry_for`, then fails; `flink.restart_strategy: exponential-delay` waits 1 s, 2 s, 2 s ...
    between restarts). The default strategy (3 attempts) would have ended the job FAILED; this one is
    still running, and once the address answers again, with the registry's schemas as they were (a
    registry comes back with its store), the job equals the replay, spend log and audit included.
    The job reaches the registry through a gateway on a fixed port, stopped for the outage: a restarted
    in-memory registry would answer 404 until the schema is registered again, and the job would rightly
    make dead letters (`unknown_schema`) of what it read in that moment."""
    gateway = RegistryGateway(schema_registry.url, None, None, port=free_loopback_port())
    url = gateway.start()
    gateway.stop()
    try:
        slots = 6
        job = make_job(streaming_job, "PBD", {
            "events": {**AVRO_EVENTS, "format": "avro-confluent",
                       "schema_registry": {"url": url, "retry_for": "1s", "timeout": "1s"}},
            "flink": {"restart_strategy": "exponential-delay", "restart_attempts": 100, "restart_delay": "1s",
                      "restart_max_delay": "2s"}})
        flat_events, requirements = generate(job.folder, users=20, slots=slots)
        schema_id = schema_registry.add(f"outage-{uuid.uuid4().hex[:8]}-value", EVENT_V1)
        flat = sorted((json.loads(line) for line in Path(flat_events).read_text().splitlines()),
                      key=lambda r: r["time"])
        events = job.folder / "events.b64"
        events.write_bytes(b"".join(
            framed_line(avro_value(schema_id, EVENT_V1, reading(r["user"], r["time"], r["value"]))) + b"\n"
            for r in flat))
        gateway.start()  # the replay reads the schema through the same address
        expected = replay(job, str(events), requirements, slots)
        gateway.stop()
        assert len(expected["releases"]) == slots and not expected["rejects"]
        produce_files(job.kafka, job.config, str(events), requirements, 0.0)
        job.start(seed=SEED, wait_tasks=False)  # it fails at its first record, and again after each restart
        rest, deadline = job.rest(), time.monotonic() + 300
        while len(rest.call(f"/jobs/{job.job_id}/exceptions")["exceptionHistory"]["entries"]) < OUTAGE_FAILURES:
            assert job.alive() and rest.job_state(job.job_id) != "FAILED", job.log_tail()
            assert time.monotonic() < deadline, "the job did not fail on the missing registry"
            time.sleep(0.5)
        failures = rest.call(f"/jobs/{job.job_id}/exceptions")["exceptionHistory"]["entries"]
        assert all("RegistryUnavailable" in str(entry) for entry in failures), str(failures)[:3000]
        gateway.start()
        check_equals_replay(job, str(events), requirements, slots, expected)
        assert job.alive()  # (the REST API's job state may lag: its cache can still say RESTARTING)
        assert not [m.json() for m in job.read("dead_letters", idle_s=1.0)]
    finally:
        gateway.stop()
