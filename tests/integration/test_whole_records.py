"""Fields outside the value, end to end (docs/formats.md, "Whole Kafka records"): events whose user id is
the Kafka key and whose time is the Kafka timestamp, requirement records whose user id is a header and
whose time is the Kafka timestamp. The job against a real broker and PyFlink's mini-cluster equals
`pwevent replay` of the same whole-records files, field by field, spend log line for line, with the
full audit (which reads the whole-records requirements), while invalid records of these kinds are
mixed in: a missing key, undecodable key bytes, a missing header, a header that is not UTF-8."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import fastavro
import pytest

from pwevent.jobs.common.avro_format import encode_datum, frame
from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.streaming.kafka_io import producer
from tests.integration.conftest import (
    backlog_with_bad_events,
    generate,
    make_job,
    replay,
    send_record,
    slot_time,
)
from tests.schema_registry import LocalSchemaRegistry
from tests.whole_records import EVENTS, JSON_KEY_EVENTS, REQUIREMENTS, event_record, requirement_record, rewrite

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def invalid_events(slot: int, json_key: bool) -> list[KafkaRecord]:
    """Events the parser refuses, timed by their Kafka timestamps 50 minutes ahead (a valid record
    would move its partition's time that far): a missing key, key bytes that do not decode, a valid
    key with a value out of the domain."""
    far = slot_time(slot, 50 * 60_000)
    good_key = json.dumps({"id": "u1"}).encode() if json_key else b"u1"
    return [
        KafkaRecord(b'{"value": 1}', None, far),  # a missing key
        KafkaRecord(b'{"value": 1}', b'{"id": ' if json_key else b"\xff\xfeu1", far),  # undecodable key bytes
        KafkaRecord(b'{"value": 7}', good_key, far),  # out of the domain
    ]


def invalid_requirements(slot: int) -> list[KafkaRecord]:
    """Requirement records the parser refuses: no `user-id` header, one that is not UTF-8."""
    value = b'{"w": 10, "epsilon": 1.0}'
    return [KafkaRecord(value, None, slot_time(slot), (("trace", b"t-9"),)),
            KafkaRecord(value, None, slot_time(slot), (("user-id", b"\xc3"),))]


@pytest.mark.parametrize("events_mapping", [EVENTS, JSON_KEY_EVENTS], ids=["string-key", "json-key"])
def test_key_timestamp_and_headers_equal_the_replay_with_invalid_records_mixed_in(streaming_job: Any,
                                                                                  events_mapping: dict[str, str]
                                                                                  ) -> None:
    """Events: the user id the key (a string, or a JSON key's member `id`), the time the Kafka
    timestamp, the value in the value; requirements: the user id the header `user-id`, the time the
    Kafka timestamp. The whole input waits in the topics (`pwevent produce` sends each record with
    its key, timestamp and headers) and is read at full speed beside a CPU burner; before slot 7's
    events, on both events partitions, invalid events (a missing key, undecodable key bytes, a value
    out of the domain, each 50 minutes ahead), and invalid requirement records (no header, a header
    that is not UTF-8). The job equals the replay of the files, field by field, spend log line for
    line, with the full audit; the replay of the files with the invalid records is the same; nothing
    valid is `late`; the dead letters are the replay's rejects, reasons and kept values."""
    slots, bad_at = 12, 7
    json_key = "key_format" in events_mapping
    job = make_job(streaming_job, "PBD", {"events": events_mapping, "requirements": REQUIREMENTS})
    flat_events, flat_requirements = generate(job.folder, users=40, slots=slots)
    events = rewrite(flat_events, lambda record: event_record(record, json_key))
    requirements = rewrite(flat_requirements, requirement_record)
    expected = replay(job, events, requirements, slots)
    assert len(expected["releases"]) == slots and not expected["rejects"]

    bad_events, bad_requirements = invalid_events(bad_at, json_key), invalid_requirements(bad_at)
    mixed_events = job.folder / "mixed-events.records"
    mixed_events.write_bytes(Path(events).read_bytes()
                             + b"".join(record.line() + b"\n" for record in bad_events + bad_events))
    mixed_requirements = job.folder / "mixed-requirements.records"
    mixed_requirements.write_bytes(Path(requirements).read_bytes()
                                   + b"".join(record.line() + b"\n" for record in bad_requirements))
    whole = replay(job, str(mixed_events), str(mixed_requirements), slots)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]

    client = producer(job.kafka)
    for record in bad_requirements:
        send_record(client, job.topics["requirements"], record)
    client.close()
    dead = backlog_with_bad_events(job, events, requirements, slots, expected, bad_events, bad_at, whole["rejects"])
    reasons = Counter(d["reason"] for d in dead)
    assert reasons == Counter({"missing_field": 3, "undecodable": 3, "out_of_domain": 2}), reasons
    details = Counter(d["detail"].split(":")[0] for d in dead if d["reason"] != "out_of_domain")
    key_field = "$key.id" if json_key else "$key"
    assert details[f"field {key_field!r}"] == 4 and details["field '$headers.user-id'"] == 2, details
    # each keeps the Kafka value, as the replay's reject does
    assert Counter((d["reason"], d["original_sha256"]) for d in dead) == \
        Counter((r["reason"], r["original_sha256"]) for r in whole["rejects"])


USER_KEY = {"type": "record", "name": "UserKey", "namespace": "sensors", "fields": [{"name": "id", "type": "string"}]}


@pytest.mark.registry
def test_an_avro_key_through_the_registry_equals_the_replay(streaming_job: Any,
                                                           schema_registry: LocalSchemaRegistry) -> None:
    """Events whose key is Confluent-framed Avro (`key_format: avro-confluent`, a record with the
    user id in `id`, its schema from the real registry), the time the Kafka timestamp, the value
    JSON; requirements with the user id in a header. A backlog beside a CPU burner, with invalid keys
    mixed in (an id the registry does not know, truncated Avro, no key): the job equals the replay,
    spend log line for line, with the full audit; the dead letters are the replay's rejects."""
    slots, bad_at = 10, 6
    subject = f"events-{uuid.uuid4().hex[:8]}-key"
    key_id = schema_registry.add(subject, USER_KEY)
    parsed = fastavro.parse_schema(USER_KEY)
    mapping = {"user": "$key.id", "time": "$timestamp", "value": "value", "key_format": "avro-confluent",
               "schema_registry": {"url": schema_registry.url, "retry_for": "60s"}}
    job = make_job(streaming_job, "PBD", {"events": mapping, "requirements": REQUIREMENTS})
    flat_events, flat_requirements = generate(job.folder, users=30, slots=slots)

    def avro_keyed(flat: dict[str, Any]) -> KafkaRecord:
        record = event_record(flat)
        assert record.key is not None
        return KafkaRecord(record.value, frame(key_id, encode_datum({"id": record.key.decode()}, parsed)),
                           record.timestamp_ms, record.headers)

    events = rewrite(flat_events, avro_keyed)
    requirements = rewrite(flat_requirements, requirement_record)
    expected = replay(job, events, requirements, slots)
    assert len(expected["releases"]) == slots and not expected["rejects"]
    far = slot_time(bad_at, 50 * 60_000)
    good_key = frame(key_id, encode_datum({"id": "u1"}, parsed))
    bad = [KafkaRecord(b'{"value": 1}', frame(424242, good_key[5:]), far),  # an id the registry does not know
           KafkaRecord(b'{"value": 1}', good_key[:-2], far),  # truncated Avro
           KafkaRecord(b'{"value": 1}', None, far)]  # no key
    mixed = job.folder / "mixed-events.records"
    mixed.write_bytes(Path(events).read_bytes() + b"".join(record.line() + b"\n" for record in bad + bad))
    whole = replay(job, str(mixed), requirements, slots)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]

    dead = backlog_with_bad_events(job, events, requirements, slots, expected, bad, bad_at, whole["rejects"])
    assert Counter(d["reason"] for d in dead) == Counter({"unknown_schema": 2, "undecodable": 2,
                                                          "missing_field": 2})
