"""Nested field paths and Confluent-framed JSON, end to end (docs/streaming.md, "Parsing"): the job against
a real broker and PyFlink's mini-cluster equals `pwevent replay` of the same files, field by field, with
the full audit, while invalid records of the new kinds are mixed in."""

from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.streaming.kafka_io import producer
from tests.integration.conftest import (
    backlog_with_bad_events,
    generate,
    make_job,
    replay,
    slot_time,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

NESTED = {"events": {"user": "payload.user_id", "time": "meta.ts", "value": "payload.reading"},
          "requirements": {"user": "subject.id", "time": "issued\\.at"}}


def frame(text: bytes, schema_id: int) -> bytes:
    """Confluent wire format: byte 0, the 4-byte big-endian schema id (ids here hold no newline byte)."""
    return b"\x00" + struct.pack(">I", schema_id) + text


def nested_event(flat: dict[str, Any], n: int) -> bytes:
    """A generated event in the nested shape, every third framed; every fifth with an extra member, so
    valid events of both parsers share each partition (docs/streaming.md, "Time")."""
    record: dict[str, Any] = {"payload": {"user_id": flat["user"], "reading": flat["value"]},
                              "meta": {"ts": flat["time"]}}
    if n % 5 == 4:
        record["meta"]["source"] = "gateway"  # not the fast path's shape; the reference parser takes it
    text = json.dumps(record).encode()
    return frame(text, 1 + n % 2) if n % 3 == 0 else text


def nested_requirement(flat: dict[str, Any], n: int) -> bytes:
    record = {"subject": {"id": flat.pop("user")}, "issued.at": flat.pop("time"), **flat}
    text = json.dumps(record).encode()
    return frame(text, 3) if n % 2 == 0 else text


def rewrite(path: str, convert: Any) -> str:
    out = Path(path).with_suffix(".nested.jsonl")
    lines = Path(path).read_text().splitlines()
    out.write_bytes(b"".join(convert(json.loads(line), n) + b"\n" for n, line in enumerate(lines)))
    return str(out)


def invalid_events(slot: int) -> list[bytes]:
    """Events the parser refuses, the nested time of the first two readable and 50 minutes ahead (an
    event of a user without a requirement would be a valid record: it moves time, docs/streaming.md,
    "Which records move time")."""
    far = slot_time(slot, 50 * 60_000)
    return [
        frame(json.dumps({"payload": {"user_id": "u1", "reading": -1}, "meta": {"ts": far}}).encode(), 1),  # domain
        b'{"payload": {"user_id": "u2", "user_id": "u3", "reading": 1}, "meta": {"ts": %d}}' % far,  # duplicate key
        json.dumps({"payload": [{"user_id": "u1", "reading": 1}], "meta": {"ts": slot_time(slot)}}).encode(),  # array
        json.dumps({"payload": None, "meta": {"ts": slot_time(slot)}}).encode(),  # null on the path
        json.dumps({"user_id": "u1", "reading": 1, "ts": slot_time(slot)}).encode(),  # flat: the paths miss
        b"\x00\x00\x00\x01",  # a frame cut short
    ]


INVALID_REQUIREMENTS = [
    json.dumps({"subject": [{"id": "new1"}], "issued.at": slot_time(2), "w": 10, "epsilon": 1.0}).encode(),
    frame(json.dumps({"subject": {"id": "new2"}, "issued": {"at": slot_time(2)}, "w": 10, "epsilon": 1.0}).encode(), 3),
]


def test_nested_paths_and_framed_json_equal_the_replay_with_invalid_records_mixed_in(streaming_job: Any) -> None:
    """Events at `payload.user_id`, `meta.ts`, `payload.reading`, requirements at `subject.id` and the
    top-level key `issued.at`; a third of the events and half of the requirements Confluent-framed.
    The whole input waits in the topics
    and is read at full speed beside a CPU burner; before slot 7's events, on both events partitions,
    invalid records: arrays and null on a path, a flat record, a short frame, and ones whose nested
    time reads 50 minutes ahead (out of the domain, a duplicate key). The job equals the replay of the
    same files, field by field, spend log line for line, with the full audit; the replay of the files
    with the invalid records in them is the same; nothing valid is `late`; the dead letters are the
    replay's rejects."""
    slots, bad_at = 12, 7
    job = make_job(streaming_job, "PBD", NESTED)
    flat_events, flat_requirements = generate(job.folder, users=40, slots=slots)
    events = rewrite(flat_events, nested_event)
    requirements = rewrite(flat_requirements, nested_requirement)
    expected = replay(job, events, requirements, slots)
    assert len(expected["releases"]) == slots and not expected["rejects"]

    bad = invalid_events(bad_at)
    mixed_events = job.folder / "mixed-events.jsonl"
    mixed_events.write_bytes(Path(events).read_bytes() + b"".join(record + b"\n" for record in bad + bad))
    mixed_requirements = job.folder / "mixed-requirements.jsonl"
    mixed_requirements.write_bytes(Path(requirements).read_bytes()
                                   + b"".join(record + b"\n" for record in INVALID_REQUIREMENTS))
    whole = replay(job, str(mixed_events), str(mixed_requirements), slots)
    assert whole["releases"] == expected["releases"] and whole["spend"] == expected["spend"]

    client = producer(job.kafka)
    for record in INVALID_REQUIREMENTS:
        client.send(job.topics["requirements"], value=record)
    client.close()
    dead = backlog_with_bad_events(job, events, requirements, slots, expected, [KafkaRecord(v) for v in bad], bad_at,
                                   whole["rejects"])
    reasons = Counter(d["reason"] for d in dead)
    assert reasons == Counter({"out_of_domain": 2, "duplicate_key": 2, "mistyped_field": 3, "missing_field": 5,
                            "unparsable": 2}), reasons
    framed = [d for d in dead if d["original_bytes"] == 4]
    assert len(framed) == 2 and all("Confluent-framed value of 4 bytes" in d["detail"] for d in framed)
