"""The Protobuf input formats (jobs/common/protobuf_format.py; docs/formats.md, "Input formats"):
decoding to the JSON object model, the JSON rules after it (one definition of validity), the reasons
of bad bytes, the Confluent frame's message indexes, and the replay and the full audit over
framed-records files. The registry is a real one (Rivven's rivven-schema, started by
deploy/local/schema-registry.sh: tests/schema_registry.py); descriptor sets are protoc's own
(grpcio-tools)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pwevent.jobs.common.avro_format import framed_line
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.protobuf_format import confluent_value, message_indexes
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import load_record, parse_event, parse_requirement_update
from pwevent.jobs.offline.replay import run_replay
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

ORIGIN = "2024-01-01T00:00:00Z"
T0_MS = 1_704_067_200_000
EVENTS = Messages(EVENT_PROTO)
registry_tests = pytest.mark.registry


def _config(events: dict | None = None, **extra) -> object:
    return parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
                         **({} if events is None else {"events": events}), **extra})


def _plain(tmp_path: Path, message: str = "sensors.Reading") -> object:
    descriptors = EVENTS.write_descriptor_set(tmp_path / "events.desc")
    return _config({**EVENT_FIELDS, "format": "protobuf",
                    "protobuf": {"descriptor_set": str(descriptors), "message": message}})


def _confluent(url: str) -> object:
    return _config({**EVENT_FIELDS, "format": "protobuf-confluent", "schema_registry": {"url": url,
                                                                                     "retry_for": "2s"}})


def _outcome(raw: bytes, config) -> object:
    try:
        return parse_event(raw, config.events, config.domain)
    except Rejected as err:
        return err.reason


def test_a_plain_record_decodes_as_its_json_twin(tmp_path):
    config = _plain(tmp_path)
    raw = encode(EVENTS, "sensors.Reading", reading("u1", T0_MS + 61_005, 3))
    twin = parse_event(json.dumps({"user": "u1", "time": T0_MS + 61_005, "value": 3}), _config().events,
                       config.domain)
    assert parse_event(raw, config.events, config.domain) == twin


def test_the_object_model_of_every_kind_of_field(tmp_path):
    """Nested messages by their .proto names, a Timestamp as epoch ms (nanoseconds floored), a
    repeated field an array, a map an object, an enum its name, a wrapper its value, the set member of
    a oneof only; an unset field with presence is absent, a proto3 scalar without presence always
    there (its default)."""
    config = _plain(tmp_path)
    message = EVENTS.new("sensors.Reading")
    message.meta.ts.seconds, message.meta.ts.nanos = 1_704_067_200, 1_999_999
    payload = message.payload
    payload.user_id, payload.reading, payload.kind, payload.zone = "u1", 0, 2, 7
    payload.tags.extend(["a", "b"])
    payload.counts["x"] = 5
    payload.note.value = "hi"
    assert load_record(message.SerializeToString(), config.events) == {
        "meta": {"ts": T0_MS + 1}, "payload": {"user_id": "u1", "reading": 0, "kind": "APP", "tags": ["a", "b"],
                                               "counts": {"x": 5}, "note": "hi", "zone": 7}}
    bare = encode(EVENTS, "sensors.Reading", {"payload": {"user_id": "u2"}})
    assert load_record(bare, config.events) == {
        "payload": {"user_id": "u2", "kind": "KIND_UNSPECIFIED", "tags": [], "counts": {}}}
    message.payload.kind = 9  # a number the (open) enum does not name
    assert load_record(message.SerializeToString(), config.events)["payload"]["kind"] == 9


def test_field_rules_after_decoding(tmp_path):
    """The JSON rules decide: a reading set to 0 (cell 0) counts, an unset optional one is missing, an
    unset Timestamp is missing, a path through an array is mistyped, a cell past d out of domain."""
    config = _plain(tmp_path)
    event = parse_event(encode(EVENTS, "sensors.Reading", reading("u1", T0_MS, 0)), config.events, config.domain)
    assert (event.user, event.time_ms, event.cell) == ("u1", T0_MS, 0)
    assert _outcome(encode(EVENTS, "sensors.Reading", reading("u1", T0_MS, None)), config) is Reason.MISSING_FIELD
    assert _outcome(encode(EVENTS, "sensors.Reading", {"payload": {"user_id": "u1", "reading": 1}}),
                    config) is Reason.MISSING_FIELD
    assert _outcome(encode(EVENTS, "sensors.Reading", reading("u1", T0_MS, 9)), config) is Reason.OUT_OF_DOMAIN
    through_array = _config({**EVENT_FIELDS, "user": "payload.tags.x", "format": "protobuf",
                             "protobuf": dict(config.events.protobuf)})
    assert _outcome(encode(EVENTS, "sensors.Reading", reading("u1", T0_MS, 1)), through_array) \
        is Reason.MISTYPED_FIELD


def test_plain_bad_bytes_are_undecodable(tmp_path):
    config = _plain(tmp_path)
    good = encode(EVENTS, "sensors.Reading", reading("u1", T0_MS, 1, note="x"))
    assert _outcome(good, config) != Reason.UNDECODABLE
    far = EVENTS.new("sensors.Reading")
    far.meta.ts.seconds = 253_402_300_800  # the year 10000
    cases = {
        "truncated": good[:-2],
        "a malformed tag": b"\xff\xff\xff\xff",
        "a length past the end": b"\x12\x7f\x0a",
        "invalid UTF-8 in a string": encode(EVENTS, "sensors.Reading.Payload", {}) + b"\x0a\x02\xc3\x28",
        "a Timestamp out of its range": far.SerializeToString(),
    }
    assert {name: _outcome(raw, config) for name, raw in cases.items()} == dict.fromkeys(cases, Reason.UNDECODABLE)
    assert _outcome(b"\x00" * 70_000, config) is Reason.TOO_LARGE


def test_message_indexes_of_the_confluent_frame():
    """Zigzag varints: the count, then each index; the byte 0 alone stands for [0]."""
    assert message_indexes(confluent_value(1, [0], b"x"), 5) == ([0], 6)
    assert message_indexes(confluent_value(1, [1], b"x"), 5) == ([1], 7)
    assert message_indexes(confluent_value(1, [1, 0], b"x"), 5) == ([1, 0], 8)
    assert message_indexes(confluent_value(1, [300], b""), 5) == ([300], 8)
    for bad in (b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x01\x01", b"\x00\x00\x00\x00\x01\x02\x01",
                b"\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\x01"):
        with pytest.raises(Rejected) as err:
            message_indexes(bad, 5)
        assert err.value.reason is Reason.UNDECODABLE


@pytest.mark.parametrize(("protobuf", "message"), [
    (None, "format protobuf needs it"),
    ({"descriptor_set": "/nonexistent.desc", "message": "a.B"}, "events.protobuf.descriptor_set: cannot read"),
    ({"descriptor_set": "DESC", "message": "Reading"}, "events.protobuf.message: no message 'Reading'"),
    ({"descriptor_set": "NOT_A_SET", "message": "a.B"}, "events.protobuf.descriptor_set: .* is not a descriptor set"),
])
def test_protobuf_settings_are_checked(tmp_path, protobuf, message):
    descriptors = str(EVENTS.write_descriptor_set(tmp_path / "events.desc"))
    (tmp_path / "text.desc").write_text("syntax = 'proto3';")
    if protobuf is not None:
        protobuf = {key: {"DESC": descriptors, "NOT_A_SET": str(tmp_path / "text.desc")}.get(value, value)
                    for key, value in protobuf.items()}
    with pytest.raises(ConfigError, match=message):
        _config({"format": "protobuf", **({} if protobuf is None else {"protobuf": protobuf})})
    with pytest.raises(ConfigError, match="protobuf .* goes with format protobuf"):
        _config({"protobuf": {"descriptor_set": descriptors, "message": "sensors.Reading"}})
    with pytest.raises(ConfigError, match="schema_registry goes with .*, and format protobuf-confluent needs it"):
        _config({"format": "protobuf-confluent"})


def test_requirement_records_fixed_and_dynamic(tmp_path):
    """Requirement records in plain Protobuf: w/epsilon (optional: absent when unset) or backward/forward
    messages, read as from JSON records."""
    messages = Messages(REQUIREMENT_PROTO)
    descriptors = messages.write_descriptor_set(tmp_path / "requirement.desc")
    config = _config(requirements={"format": "protobuf", "protobuf": {"descriptor_set": str(descriptors),
                                                                       "message": "prefs.Requirement"}})
    fixed = encode(messages, "prefs.Requirement", {"user": "u1", "time": T0_MS, "w": 10, "epsilon": 1.0})
    twin = parse_requirement_update(json.dumps({"user": "u1", "time": ORIGIN, "w": 10, "epsilon": 1.0}),
                                    _config().requirements, config.caps)
    assert parse_requirement_update(fixed, config.requirements, config.caps) == twin
    dynamic = encode(messages, "prefs.Requirement", {"user": "u2", "time": T0_MS, "backward": {"w": 3, "epsilon": 0.5},
                                                     "forward": {"w": 5, "epsilon": 2.0}})
    assert parse_requirement_update(dynamic, config.requirements, config.caps).requirement.backward.w == 3
    with pytest.raises(Rejected) as err:
        parse_requirement_update(fixed[:-1], config.requirements, config.caps)
    assert err.value.reason is Reason.UNDECODABLE


def test_replay_and_full_audit_over_framed_records_files(tmp_path):
    """Events and requirements in plain Protobuf, framed-records files: the replay equals the replay
    of their JSON twins, release for release and spend line for spend line, with a bad line and
    undecodable bytes mixed in as rejects; the full audit reads the Protobuf requirements."""
    from pwevent.jobs.offline.audit import audit_file

    events_desc = EVENTS.write_descriptor_set(tmp_path / "events.desc")
    requirement_messages = Messages(REQUIREMENT_PROTO)
    requirements_desc = requirement_messages.write_descriptor_set(tmp_path / "requirement.desc")
    base = {"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
            "noise": "numpy-fast"}
    proto = parse_config({**base, "events": {**EVENT_FIELDS, "format": "protobuf", "protobuf": {
        "descriptor_set": str(events_desc), "message": "sensors.Reading"}}, "requirements": {
        "format": "protobuf", "protobuf": {"descriptor_set": str(requirements_desc), "message": "prefs.Requirement"}}})
    twin_config = parse_config(base)
    requirements = [{"user": f"u{n}", "time": T0_MS + 60_000 * n, "w": 3 + n, "epsilon": 1.0} for n in range(5)]
    events = [{"user": f"u{n % 5}", "time": T0_MS + 20_000 * n, "value": n % 4} for n in range(60)]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "r.b64").write_bytes(b"".join(framed_line(encode(requirement_messages, "prefs.Requirement", r)) + b"\n"
                                              for r in requirements))
    (tmp_path / "e.b64").write_bytes(b"".join(framed_line(encode(EVENTS, "sensors.Reading", reading(
        e["user"], e["time"], e["value"]))) + b"\n" for e in events)
        + b"not base64!\n" + framed_line(b"\xff\xff") + b"\n")
    outputs = {}
    for name, config, suffix in (("twin", twin_config, "jsonl"), ("proto", proto, "b64")):
        out = {key: tmp_path / f"{name}-{key}.jsonl" for key in ("releases", "spend", "rejects")}
        run_replay(config, str(tmp_path / f"e.{suffix}"), str(tmp_path / f"r.{suffix}"), str(out["releases"]),
                   str(out["spend"]), seed=5, rejects_out=str(out["rejects"]), through=20)
        outputs[name] = {key: path.read_text().splitlines() for key, path in out.items()}
    assert outputs["proto"]["releases"] == outputs["twin"]["releases"]
    assert outputs["proto"]["spend"] == outputs["twin"]["spend"]
    reasons = {name: Counter(json.loads(r)["reason"] for r in out["rejects"]) for name, out in outputs.items()}
    assert reasons["proto"] - reasons["twin"] == Counter({"undecodable": 2}) and reasons["twin"] <= reasons["proto"]
    assert audit_file(str(tmp_path / "proto-spend.jsonl"), str(tmp_path / "r.b64"),
                      str(tmp_path / "proto-releases.jsonl"), proto).ok


def test_protobuf_events_take_the_reference_parser(tmp_path):
    """The JVM does not decode Protobuf: no fast-path regex, every record to `parse_event`."""
    from pwevent.jobs.streaming.event_sql import record_regex

    assert record_regex(_plain(tmp_path)) is None
    assert record_regex(_confluent("http://127.0.0.1:9")) is None
    assert record_regex(_config()) is not None


@registry_tests
def test_registry_schemas_and_the_reasons_of_bad_frames(schema_registry: LocalSchemaRegistry):
    """Registered .proto texts, compiled; the frame's indexes pick the message; an unknown id, a
    wrong message index, an Avro schema's id, bad bytes and a message lacking the mapped field each
    have their reason."""
    schema_id = schema_registry.add_protobuf("pb-reasons-value", EVENT_PROTO)
    lacking = schema_registry.add_protobuf("pb-lacking-value", NO_READING_PROTO)
    mistyped = schema_registry.add_protobuf("pb-mistyped-value", DOUBLE_USER_PROTO)
    avro = schema_registry.add("pb-avro-value", {"type": "record", "name": "A", "fields": [
        {"name": "user", "type": "string"}]})
    schema_registry.add_protobuf("pb-dep", 'syntax = "proto3";\npackage dep;\nmessage Id { string v = 1; }\n')
    importing = schema_registry.add_protobuf(
        "pb-importing-value", 'syntax = "proto3";\nimport "dep.proto";\nmessage E { dep.Id user = 1; }\n',
        [{"name": "dep.proto", "subject": "pb-dep", "version": 1}])
    served = schema_registry.served(f"/schemas/ids/{schema_id}?format=serialized")
    assert served["schemaType"] == "PROTOBUF" and "message Reading" in served["schema"]  # the text, not serialized
    config = _confluent(schema_registry.url)
    message = encode(EVENTS, "sensors.Reading", reading("u1", T0_MS + 5, 2))
    good = confluent_value(schema_id, [1], message)
    twin = parse_event(json.dumps({"user": "u1", "time": T0_MS + 5, "value": 2}), _config().events, config.domain)
    assert parse_event(good, config.events, config.domain) == twin
    nested = confluent_value(schema_id, [1, 0], encode(EVENTS, "sensors.Reading.Payload", {"user_id": "u1"}))
    assert load_record(nested, config.events) == {"user_id": "u1", "kind": "KIND_UNSPECIFIED", "tags": [],
                                                  "counts": {}}
    cases = {
        "unknown schema id": (confluent_value(424242, [1], message), Reason.UNKNOWN_SCHEMA),
        "a message index past the file's messages": (confluent_value(schema_id, [2], message), Reason.UNDECODABLE),
        "a nested index past the nested messages": (confluent_value(schema_id, [1, 1], message), Reason.UNDECODABLE),
        "the first message, which is another type": (confluent_value(schema_id, [0], message), Reason.MISSING_FIELD),
        "truncated": (good[:-2], Reason.UNDECODABLE),
        "wrong magic byte": (b"\x01" + good[1:], Reason.UNDECODABLE),
        "shorter than the frame": (b"\x00\x00\x01", Reason.UNDECODABLE),
        "JSON": (b'{"user": "u1", "time": 0, "value": 1}', Reason.UNDECODABLE),
        "an Avro schema's id": (confluent_value(avro, [0], message), Reason.UNDECODABLE),
        "a schema lacking the mapped field": (confluent_value(lacking, [2], encode(
            Messages(NO_READING_PROTO), "other.NoReading", {"meta": {"ts": T0_MS}, "payload": {"user_id": "u1"}})),
            Reason.MISSING_FIELD),
        "a user of the wrong type": (confluent_value(mistyped, [2], encode(
            Messages(DOUBLE_USER_PROTO), "odd.DoubleUser", {"meta": {"ts": T0_MS}, "payload": {
                "user_id": 1.5, "reading": 1}})), Reason.MISTYPED_FIELD),
    }
    asked_before = schema_registry.requests("/schemas/ids/424242")  # the registry is the session's: other tests ask too
    got = {name: _outcome(raw, config) for name, (raw, _) in cases.items()}
    assert got == {name: reason for name, (_, reason) in cases.items()}
    for schema, said in ((importing, "references ['dep.proto']"), (avro, "is AVRO, not PROTOBUF")):
        with pytest.raises(Rejected) as err:  # said as such, not as a schema that does not compile
            parse_event(confluent_value(schema, [0], b""), config.events, config.domain)
        assert err.value.reason is Reason.UNDECODABLE and said in err.value.detail
    assert schema_registry.requests(f"/schemas/ids/{avro}") == 1  # a refused schema is not asked for again
    assert schema_registry.requests("/schemas/ids/424242") == asked_before + 1  # an unknown id is asked once
    assert _outcome(confluent_value(424242, [1], message), config) is Reason.UNKNOWN_SCHEMA
    assert schema_registry.requests("/schemas/ids/424242") == asked_before + 1
