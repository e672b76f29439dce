"""Field paths of the field mappings (`events.user: payload.user_id`) and Confluent-framed JSON, in the
configuration and the reference parser (docs/streaming.md, "Parsing")."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.field_paths import field_path, path_text
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import Event, KafkaTimestamp, field_value, parse_event, parse_requirement_update

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "schemas" / "config.schema.json").read_text())
BASE = {"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "cells", "d": 10}}


def config(events=None, requirements=None):
    return parse_config({**BASE, **({"events": events} if events else {}),
                         **({"requirements": requirements} if requirements else {})})


def framed(text: bytes, schema_id: int = 7) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + text


def outcome(data: bytes, fields, domain, kafka_ts=None):
    try:
        return parse_event(data, fields, domain, None if kafka_ts is None else KafkaTimestamp(kafka_ts))
    except Rejected as err:
        return err.reason


@pytest.mark.parametrize(("text", "keys"), [
    ("user", ("user",)),
    ("payload.user_id", ("payload", "user_id")),
    ("a.b.c", ("a", "b", "c")),
    ("a\\.b", ("a.b",)),
    ("a\\\\b", ("a\\b",)),
    ("a\\\\.b", ("a\\", "b")),
    ("\\.", (".",)),
    ("x.\\.\\.", ("x", "..")),
    ("ünï.cödé", ("ünï", "cödé")),
])
def test_path_syntax(text, keys):
    assert field_path(text) == keys
    assert path_text(keys) == text


@pytest.mark.parametrize(("text", "message"), [
    ("", "at least one key"),
    ("a..b", "empty key"),
    (".a", "empty key"),
    ("a.", "empty key"),
    ("a\\", "ends in a backslash"),
    ("a\\\\\\", "ends in a backslash"),
    ("a\\b", "only \\. (a dot in a key), \\\\"),
])
def test_bad_paths_are_refused(text, message):
    with pytest.raises(ValueError, match=None) as err:
        field_path(text)
    assert message in str(err.value)


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4))
def test_any_keys_round_trip(keys):
    assert field_path(path_text(tuple(keys))) == tuple(keys)


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("events", "user", "payload..user", "events.user: field path 'payload..user' has an empty key"),
    ("events", "time", "meta.ts\\", "events.time: field path 'meta.ts\\\\' ends in a backslash"),
    ("events", "value", ".v", "events.value: field path '.v' has an empty key"),
    ("events", "lat", "pos.", "events.lat: field path 'pos.' has an empty key"),
    ("requirements", "user", "a\\x", "requirements.user: field path 'a\\\\x' holds \\x"),
    ("requirements", "time", "t.", "requirements.time: field path 't.' has an empty key"),
])
def test_the_configuration_names_the_field_of_a_bad_path(section, key, value, message):
    fields = {key: value, **({"lon": "lon"} if key == "lat" else {})}
    with pytest.raises(ConfigError) as err:
        config(**{section: fields})
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize(("section", "fields"), [
    ("events", {"user": "p", "time": "p.t"}),
    ("events", {"value": "a.b.c", "time": "a.b"}),
    ("requirements", {"user": "m.u", "time": "m"}),
])
def test_a_path_inside_another_is_refused(section, fields):
    with pytest.raises(ConfigError, match="lies inside"):
        config(**{section: fields})


def test_equal_paths_and_unused_value_are_allowed():
    config({"user": "p.a", "time": "p.a"})  # one value read twice, as two equal top-level names were
    cfg = parse_config({**BASE, "domain": {"type": "grid", "rows": 2, "cols": 2, "bbox": {
        "min_lat": 0.0, "max_lat": 1.0, "min_lon": 0.0, "max_lon": 1.0}}, "events": {
        "value": "pos", "lat": "pos.lat", "lon": "pos.lon"}})  # value is unused with lat and lon
    assert cfg.events.lat == "pos.lat"


NESTED = config({"user": "payload.user_id", "time": "meta.ts", "value": "payload.v\\.x"})


@pytest.mark.parametrize(("record", "expected"), [
    ({"payload": {"user_id": "u1", "v.x": 3}, "meta": {"ts": 120_000}}, Event("u1", 120_000, 3)),
    ({"meta": {"ts": "1970-01-01T00:02:00Z", "extra": [1]}, "payload": {"v.x": 3, "user_id": 7}, "o": {}},
     Event("7", 120_000, 3)),
    ({"payload": [{"user_id": "u1", "v.x": 3}], "meta": {"ts": 1}}, Reason.MISTYPED_FIELD),
    ({"payload": "u1", "meta": {"ts": 1}}, Reason.MISTYPED_FIELD),
    ({"payload": None, "meta": {"ts": 1}}, Reason.MISSING_FIELD),
    ({"payload": {"user_id": None, "v.x": 3}, "meta": {"ts": 1}}, Reason.MISSING_FIELD),
    ({"payload": {"user_id": "u1", "v": {"x": 3}}, "meta": {"ts": 1}}, Reason.MISSING_FIELD),
    ({"payload": {"user_id": "u1", "v.x": 3}, "meta": {}}, Reason.MISSING_FIELD),
    ({"payload": {"user_id": "u1", "v.x": 3}, "meta": [{"ts": 1}]}, Reason.MISTYPED_FIELD),
    ({"payload": {"user_id": "u1", "v.x": 3}, "meta.ts": 1}, Reason.MISSING_FIELD),
    ({"payload": {"user_id": ["u1"], "v.x": 3}, "meta": {"ts": 1}}, Reason.MISTYPED_FIELD),
    ({"payload": {"user_id": "u1", "v.x": 10}, "meta": {"ts": 1}}, Reason.OUT_OF_DOMAIN),
])
def test_nested_events(record, expected):
    assert outcome(dumps(record).encode(), NESTED.events, NESTED.domain) == expected


def test_duplicate_keys_inside_a_nested_object_are_refused():
    data = b'{"payload": {"user_id": "u1", "user_id": "u2", "v.x": 1}, "meta": {"ts": 1}}'
    assert outcome(data, NESTED.events, NESTED.domain) == Reason.DUPLICATE_KEY


def test_the_reasons_name_the_path():
    with pytest.raises(Rejected, match=r"field 'meta\.ts': 'meta' is an array \(field paths do not index arrays\)"):
        parse_event(b'{"payload": {"user_id": "u1", "v.x": 3}, "meta": []}', NESTED.events, NESTED.domain)
    with pytest.raises(Rejected, match=r"field 'payload\.v\\\\\.x' is missing"):
        parse_event(b'{"payload": {"user_id": "u1"}, "meta": {"ts": 1}}', NESTED.events, NESTED.domain)


def test_with_the_kafka_timestamp_the_time_path_is_not_read_at_all():
    ok = {"payload": {"user_id": "u1", "v.x": 3}}
    for meta in ({}, {"ts": 120_000}, 5, None, []):
        record = dumps({**ok, "meta": meta}).encode()
        assert outcome(record, NESTED.events, NESTED.domain, 60_000) == Event("u1", 60_000, 3)
    assert outcome(dumps(ok).encode(), NESTED.events, NESTED.domain, 60_000) == Event("u1", 60_000, 3)
    assert outcome(dumps(ok).encode(), NESTED.events, NESTED.domain) == Reason.MISSING_FIELD
    assert outcome(dumps({**ok, "meta": 5}).encode(), NESTED.events, NESTED.domain) == Reason.MISTYPED_FIELD


def test_nested_requirements():
    cfg = config(requirements={"user": "who.id", "time": "when"})
    record = {"who": {"id": "u1"}, "when": 60_000, "w": 3, "epsilon": 1.0}
    update = parse_requirement_update(dumps(record).encode(), cfg.requirements, cfg.caps)
    assert (update.user, update.time_ms, update.requirement.w) == ("u1", 60_000, 3)
    update = parse_requirement_update(framed(dumps(record).encode(), 0), cfg.requirements, cfg.caps)
    assert (update.user, update.time_ms) == ("u1", 60_000)
    with pytest.raises(Rejected) as err:
        parse_requirement_update(dumps({**record, "who": [{"id": "u1"}]}).encode(), cfg.requirements, cfg.caps)
    assert err.value.reason == Reason.MISTYPED_FIELD


def test_top_level_names_are_unchanged():
    flat = config()
    record = b'{"user": "u1", "time": 60000, "value": 2}'
    assert outcome(record, flat.events, flat.domain) == Event("u1", 60_000, 2)
    # a key with a dot is no longer a top-level name unless its dot is escaped
    dotted = {"user.id": "u1", "time": 60_000, "value": 2}
    assert outcome(dumps(dotted).encode(), config({"user": "user\\.id"}).events, flat.domain) == Event("u1", 60_000, 2)
    assert outcome(dumps(dotted).encode(), config({"user": "user.id"}).events, flat.domain) == Reason.MISSING_FIELD


@given(st.binary(max_size=64), st.integers(0, 2**32 - 1))
def test_a_framed_value_parses_as_its_json_text(text, schema_id):
    flat = config()
    assert outcome(framed(text, schema_id), flat.events, flat.domain) == outcome(text, flat.events, flat.domain) \
        or text[:1] == b"\x00"  # a frame inside the frame is not taken off twice


def test_framed_events():
    flat = config()
    record = b'{"user": "u1", "time": 60000, "value": 2}'
    for schema_id in (0, 1, 2**31, 2**32 - 1):
        assert outcome(framed(record, schema_id), flat.events, flat.domain) == Event("u1", 60_000, 2)
    for short in (b"\x00", b"\x00\x00\x00\x01"):
        with pytest.raises(Rejected, match="Confluent-framed value of"):
            parse_event(short, flat.events, flat.domain)
    assert outcome(b"\x00\x00\x00\x00\x01", flat.events, flat.domain) == Reason.UNPARSABLE  # the frame, no JSON
    assert outcome(framed(framed(record)), flat.events, flat.domain) == Reason.UNPARSABLE  # framed once only
    assert outcome(b"\x01\x00\x00\x00\x01" + record, flat.events, flat.domain) == Reason.UNPARSABLE  # not magic 0
    # the size limit counts the whole value, frame included
    limit = len(record) + 4
    assert outcome(framed(record)[:limit], flat.events, flat.domain) == Reason.UNPARSABLE
    with pytest.raises(Rejected) as err:
        parse_event(framed(record), flat.events, flat.domain, max_bytes=limit)
    assert err.value.reason == Reason.TOO_LARGE


def test_field_value_only_looks():
    obj = {"a": {"b": 1}, "c": [1], "d": None}
    assert field_value(obj, "a.b") == 1
    assert field_value(obj, "a.x") is None
    assert field_value(obj, "c.x") is None
    assert field_value(obj, "d.x") is None


@given(st.text(alphabet="ab.\\é", max_size=8))
def test_the_schema_pattern_accepts_exactly_the_valid_paths(text):
    pattern = SCHEMA["$defs"]["EventFields"]["properties"]["user"]["pattern"]
    try:
        field_path(text)
        valid = True
    except ValueError:
        valid = False
    assert (re.search(pattern, text) is not None) == valid
