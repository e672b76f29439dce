"""Whole Kafka records as a source of fields (docs/formats.md, "Whole Kafka records"): the `$` mappings
in the configuration, the reference parser reading the key (string, JSON, Avro through the
registry), the timestamp and headers, the whole-records file, and `pwevent replay`, `produce` and
`audit` over such files."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import fastavro
import pytest

from pwevent.jobs.common.avro_format import encode_datum, frame
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.files import DEMO_ORIGIN, DEMO_ORIGIN_MS, write_synthetic
from pwevent.jobs.common.kafka_record import MAX_HEADERS, KafkaRecord, line_limit
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_event, parse_requirement_update
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.audit import audit_file
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.event_sql import record_regex
from pwevent.jobs.streaming.graph import source_time_path
from pwevent.jobs.streaming.requirement_sql import requirement_regex
from tests.registry_standin import StandinRegistry
from tests.whole_records import EVENTS, JSON_KEY_EVENTS, REQUIREMENTS, event_record, requirement_record, rewrite

BASE = {"mechanism": "PBD", "slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "cells", "d": 4},
        "caps": {"max_w": 200}, "noise": "numpy-fast"}
T = DEMO_ORIGIN_MS + 5_000


def config(events=None, requirements=None, **extra):
    return parse_config({**BASE, **({"events": events} if events else {}),
                         **({"requirements": requirements} if requirements else {}), **extra})


def outcome(record, cfg):
    try:
        return parse_event(record, cfg.events, cfg.domain)
    except Rejected as err:
        return err.reason, err.detail


# The configuration


@pytest.mark.parametrize(("events", "message"), [
    ({"user": "$kye"}, "events.user: '$kye' names no part of the Kafka record: $key, $key.<field path>, "
                       "$timestamp or $headers.<name>"),
    ({"time": "$headers"}, "events.time: '$headers' names no part of the Kafka record"),
    ({"time": "$timestamp.ms"}, "events.time: '$timestamp.ms' names no part of the Kafka record"),
    ({"user": "$key.id"}, "events.user: '$key.id' is a path inside the key, and a string key has none (set "
                          "events.key_format: json or avro-confluent)"),
    ({"key_format": "json"}, "events.key_format: no mapping reads the key ($key)"),
    ({"user": "$key", "value": "$key.v", "key_format": "json"}, "events.value ('$key.v') lies inside events.user"),
    ({"user": "$key", "key_format": "avro-confluent"}, "key_format avro-confluent needs it"),
    ({"user": "$key", "key_format": "protobuf"}, "events.key_format"),
])
def test_a_mapping_of_no_part_of_the_record_is_a_configuration_error_naming_the_field(events, message):
    with pytest.raises(ConfigError) as err:
        config(events)
    assert message in str(err.value)


def test_requirement_mappings_are_checked_the_same_way():
    with pytest.raises(ConfigError, match=r"requirements\.user: '\$header\.uid' names no part"):
        config(requirements={"user": "$header.uid"})


def test_a_signature_cannot_leave_the_user_or_time_unsigned(monkeypatch):
    """A requirement's signature covers its value: a user id in a header could be swapped under a
    valid signature, so signing and a `$` mapping of the requirements are refused together."""
    monkeypatch.setenv("PWEVENT_TEST_KEY", "k" * 32)
    with pytest.raises(ConfigError, match=r"requirements\.signature: a signature covers the value only, and "
                                          r"requirements\.user \('\$headers\.user-id'\) is outside it"):
        config(requirements={**REQUIREMENTS, "signature": {"key_env": "PWEVENT_TEST_KEY"}})


def test_a_value_key_that_starts_with_a_dollar_is_escaped():
    cfg = config({"user": "\\$key", "time": "t", "value": "v"})
    assert not cfg.events.whole_records
    assert parse_event(b'{"$key": "u1", "t": 5000, "v": 1}', cfg.events, cfg.domain).user == "u1"


def test_record_mappings_make_the_input_whole_records_and_turn_the_fast_paths_off():
    cfg = config(EVENTS, REQUIREMENTS)
    assert cfg.events.whole_records and cfg.requirements.whole_records
    assert record_regex(cfg) is None and requirement_regex(cfg) is None
    assert source_time_path(cfg.events) is None
    plain = config()
    assert not plain.events.whole_records and record_regex(plain) is not None and requirement_regex(plain) is not None


# The reference parser


def test_each_part_of_the_record_is_read():
    cfg = config({"user": "$key", "time": "$headers.at", "value": "$headers.cell"},
                 domain={"type": "categories", "values": ["a", "b"]})
    record = KafkaRecord(b"{}", b"u7", None, (("at", b"2024-01-01T00:00:05Z"), ("cell", b"a"), ("cell", b"b")))
    assert outcome(record, cfg) == parse_event(record, cfg.events, cfg.domain)
    event = parse_event(record, cfg.events, cfg.domain)
    assert (event.user, event.time_ms, event.cell) == ("u7", T, 1)  # the last header of a name counts


@pytest.mark.parametrize(("record", "reason", "detail"), [
    (KafkaRecord(b'{"value": 1}', None, T), Reason.MISSING_FIELD, "field '$key': the record has no key"),
    (KafkaRecord(b'{"value": 1}', b"\xffu1", T), Reason.UNDECODABLE, "the key is not UTF-8 text"),
    (KafkaRecord(b'{"value": 1}', b"u 1", T), Reason.INVALID_USER, "U+0020"),
    (KafkaRecord(b'{"value": 1}', b"u1", None), Reason.MISSING_FIELD, "the record has no Kafka timestamp"),
    (KafkaRecord(b'{"value": 9}', b"u1", T), Reason.OUT_OF_DOMAIN, ""),
    (KafkaRecord(None, b"u1", T), Reason.UNPARSABLE, "not JSON"),
    (KafkaRecord(b'{"value": 1}', b"u" * 70_000, T), Reason.TOO_LARGE, "bytes of key, value and headers"),
    (KafkaRecord(b'{"value": 1}', b"u1", T, (("h", b""),) * (MAX_HEADERS + 1)), Reason.TOO_LARGE, "headers, more"),
])
def test_invalid_whole_records_are_rejected_with_their_reason(record, reason, detail):
    got = outcome(record, config(EVENTS))
    assert got[0] is reason and detail in got[1], got


@pytest.mark.parametrize(("key", "expected"), [
    (b'{"id": "u1"}', "u1"),
    (b'{"id": 17}', "17"),
    (b"\x00\x00\x00\x00\x01" + b'{"id": "u2"}', "u2"),  # a Confluent-framed JSON key
    (b'{"id": "u1", "id": "u2"}', (Reason.UNDECODABLE, "duplicate_key")),
    (b'{"id": ', (Reason.UNDECODABLE, "the key is not json (unparsable")),
    (b'"u1"', (Reason.MISTYPED_FIELD, "the key is not an object")),
    (b'{"other": "u1"}', (Reason.MISSING_FIELD, "field '$key.id' is missing")),
])
def test_a_json_key_is_read_under_the_json_rules(key, expected):
    got = outcome(KafkaRecord(b'{"value": 1}', key, T), config(JSON_KEY_EVENTS))
    if isinstance(expected, str):
        assert got.user == expected
    else:
        assert got[0] is expected[0] and expected[1] in got[1], got


def test_an_avro_key_is_read_through_the_standin_registry():
    """A Confluent-framed Avro key (a plain string schema, or a record's member), its schema by id."""
    standin = StandinRegistry()
    url = standin.start()
    key_record = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "string"}]}
    try:
        cfg = config({**EVENTS, "key_format": "avro-confluent", "schema_registry": {"url": url}})
        string_id = standin.add("k-key", "string")  # type: ignore[arg-type]
        good = frame(string_id, encode_datum("u5", fastavro.parse_schema("string")))  # type: ignore[arg-type]
        assert parse_event(KafkaRecord(b'{"value": 2}', good, T), cfg.events, cfg.domain).user == "u5"
        assert outcome(KafkaRecord(b'{"value": 2}', good[:-1], T), cfg)[0] is Reason.UNDECODABLE
        assert outcome(KafkaRecord(b'{"value": 2}', frame(4242, b"\x02a"), T), cfg)[0] is Reason.UNKNOWN_SCHEMA
        assert outcome(KafkaRecord(b'{"value": 2}', b"u5", T), cfg)[0] is Reason.UNDECODABLE  # not framed
        keyed = config({**EVENTS, "user": "$key.id", "key_format": "avro-confluent", "schema_registry": {"url": url}})
        record_key = frame(standin.add("r-key", key_record),
                           encode_datum({"id": "u6"}, fastavro.parse_schema(key_record)))
        assert parse_event(KafkaRecord(b'{"value": 2}', record_key, T), keyed.events, keyed.domain).user == "u6"
    finally:
        standin.stop()


def test_a_requirement_reads_its_user_from_a_header():
    cfg = config(requirements=REQUIREMENTS)
    value = b'{"w": 10, "epsilon": 1.0}'
    update = parse_requirement_update(KafkaRecord(value, None, T, (("user-id", b"u3"),)), cfg.requirements, cfg.caps)
    assert (update.user, update.time_ms, update.requirement.w) == ("u3", T, 10)
    for headers, reason in (((), Reason.MISSING_FIELD), ((("user-id", None),), Reason.MISSING_FIELD),
                            ((("user-id", b"\xc3"),), Reason.UNDECODABLE)):
        with pytest.raises(Rejected) as err:
            parse_requirement_update(KafkaRecord(value, None, T, headers), cfg.requirements, cfg.caps)
        assert err.value.reason is reason


# The file format


def test_a_line_holds_the_whole_record_and_reads_back():
    record = KafkaRecord(b"\x00\x01", b"k", 12, (("a\"\\\n", b"v"), ("a", None)))
    line = record.line()
    assert json.loads(line) == {"key": "aw==", "value": "AAE=", "timestamp": 12,
                                "headers": [['a"\\\n', "dg=="], ["a", None]]}
    assert KafkaRecord.of_line(line) == record
    assert KafkaRecord.of_line(b'{"value": null}') == KafkaRecord(None)
    assert len(KafkaRecord(b"v" * 100, b"k" * 100, 1, ((("\x01" * 10), b"x"),) * MAX_HEADERS).line()) \
        < line_limit(100 + 100 + 11 * MAX_HEADERS)


@pytest.mark.parametrize(("line", "detail"), [
    (b"not json", "not JSON"),
    (b"[1]", "not a JSON object"),
    (b'{"value": "AAE=", "partition": 1}', "unknown member 'partition'"),
    (b'{"value": "not base64!"}', "value is not base64"),
    (b'{"key": 5}', "key is base64 text or null"),
    (b'{"timestamp": "5"}', "timestamp is epoch milliseconds"),
    (b'{"timestamp": -5}', "timestamp is epoch milliseconds"),
    (b'{"headers": {"a": "AA=="}}', "headers is a list"),
    (b'{"headers": [["a"]]}', "headers is a list"),
])
def test_a_line_that_is_no_whole_record_is_undecodable(line, detail):
    with pytest.raises(Rejected) as err:
        KafkaRecord.of_line(line)
    assert err.value.reason is Reason.UNDECODABLE and detail in err.value.detail


# The replay, produce and the audit


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    folder = tmp_path_factory.mktemp("flat")
    events, requirements = write_synthetic(SyntheticStream("Sin", 30, 20, seed=3), str(folder), 0.6, 10, 60_000)
    return str(events), str(requirements)


def replayed(cfg, events, requirements, folder: Path):
    outs = {k: str(folder / f"{k}.jsonl") for k in ("releases", "spend", "rejects")}
    summary = run_replay(cfg, events, requirements, outs["releases"], outs["spend"], rejects_out=outs["rejects"],
                         seed=5, through=20)
    return summary, {k: [json.loads(line) for line in Path(v).read_text().splitlines()] for k, v in outs.items()}


@pytest.mark.parametrize("events_mapping", [EVENTS, JSON_KEY_EVENTS])
def test_the_replay_of_whole_records_equals_the_replay_of_the_same_records_as_json(flat, tmp_path, events_mapping):
    """User ids in the key (a string, or a JSON key's member), times the Kafka timestamps, requirement
    users in a header: the same releases and spend log, line for line, as the JSON-lines input they
    were made of; invalid whole records mixed in are rejected with their reasons and change nothing;
    the full audit reads the whole-records requirements and passes."""
    events, requirements = flat
    json_key = "key_format" in events_mapping
    whole_events = rewrite(events, lambda r: event_record(r, json_key), tmp_path / "events.records")
    whole_requirements = rewrite(requirements, requirement_record, tmp_path / "requirements.records")
    plain = config()
    whole = config(events_mapping, REQUIREMENTS)
    (tmp_path / "plain").mkdir()
    (tmp_path / "whole").mkdir()
    _, expected = replayed(plain, events, requirements, tmp_path / "plain")
    bad_key = b'{"id": ' if json_key else b"\xffu1"
    bad = [KafkaRecord(b'{"value": 1}', None, T),  # a missing key
           KafkaRecord(b'{"value": 1}', bad_key, T),  # undecodable key bytes
           KafkaRecord(b'{"value": 1}', json.dumps({"id": "u1"}).encode() if json_key else b"u1", None)]  # no stamp
    with open(whole_events, "ab") as out:
        out.write(b"".join(record.line() + b"\n" for record in bad) + b'{"key": "not base64"}\n')
    with open(whole_requirements, "ab") as out:
        out.write(KafkaRecord(b'{"w": 10, "epsilon": 1.0}', None, T).line() + b"\n")  # a missing header
    summary, got = replayed(whole, whole_events, whole_requirements, tmp_path / "whole")
    assert got["releases"] == expected["releases"] and got["spend"] == expected["spend"]
    assert dict(summary.rejects) == {"missing_field": 3, "undecodable": 2}
    rejects = {r["position"].rsplit(":", 1)[1]: r for r in got["rejects"] if r["source"] == "events"}
    assert rejects["601"]["original"] == '{"value": 1}'  # a reject keeps the Kafka value
    assert "not base64" in rejects["604"]["original"]  # a line that holds no record: the line
    requirements_reject = next(r for r in got["rejects"] if r["source"] == "requirements")
    assert "the record has no header 'user-id'" in requirements_reject["detail"]
    report = audit_file(str(tmp_path / "whole" / "spend.jsonl"), whole_requirements,
                        str(tmp_path / "whole" / "releases.jsonl"), whole)
    assert report.ok and report.skipped is None, report.render()


def test_an_unknown_user_of_a_whole_record_keeps_its_value(flat, tmp_path):
    events, requirements = flat
    whole = config(EVENTS, REQUIREMENTS)
    whole_events = rewrite(events, event_record, tmp_path / "events.records")
    with open(whole_events, "ab") as out:
        out.write(KafkaRecord(b'{"value": 3}', b"stranger", T).line() + b"\n")
    whole_requirements = rewrite(requirements, requirement_record, tmp_path / "requirements.records")
    _, got = replayed(whole, whole_events, whole_requirements, tmp_path)
    (reject,) = got["rejects"]
    assert reject["reason"] == "unknown_user" and reject["original"] == '{"value": 3}'


def test_produce_sends_whole_records_with_their_key_timestamp_and_headers(flat, tmp_path, capsys):
    from pwevent.jobs.streaming.produce import _slots

    events, _ = flat
    whole = config(EVENTS)
    whole_events = rewrite(events, event_record, tmp_path / "events.records")
    with open(whole_events, "ab") as out:
        out.write(b"not a record\n")
    sent = _slots(whole_events, whole.events, whole)
    first = sent[1][0]
    assert first == (b'{"value": 1}', b"u0", DEMO_ORIGIN_MS, [("source", b"sensor-gateway")])
    assert sum(len(lines) for lines in sent.values()) == 30 * 20
    assert "1 line(s) of" in capsys.readouterr().err


def test_whole_record_lines_carry_any_value_format():
    """Binary values (Avro here; Protobuf alike) are base64 in the line like any other bytes."""
    datum = frame(3, encode_datum({"a": 1}, fastavro.parse_schema(
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})))
    line = KafkaRecord(datum, b"u1", 5).line()
    assert base64.b64decode(json.loads(line)["value"]) == datum


def test_a_header_holds_text_so_only_categories_take_their_value_from_one():
    cells = config({"user": "$key", "time": "$timestamp", "value": "$headers.v"})
    assert outcome(KafkaRecord(b"{}", b"u1", T, (("v", b"1"),)), cells)[0] is Reason.OUT_OF_DOMAIN
    categories = config({"user": "$key", "time": "$timestamp", "value": "$headers.v"},
                        domain={"type": "categories", "values": ["0", "1"]})
    assert outcome(KafkaRecord(b"{}", b"u1", T, (("v", b"1"),)), categories).cell == 1


def test_the_replay_refuses_a_record_too_large_before_or_after_reading_its_line(flat, tmp_path):
    """A line longer than `line_limit` is `too_large` unread; a shorter one whose key, value and
    headers exceed `max_record_bytes` is `too_large` once read. The other records replay as usual."""
    events, requirements = flat
    whole = config(EVENTS, REQUIREMENTS, max_record_bytes=1024)
    whole_events = rewrite(events, event_record, tmp_path / "events.records")
    with open(whole_events, "ab") as out:
        out.write(KafkaRecord(b'{"value": 1}', b"u1", T, (("pad", b"x" * 9000),)).line() + b"\n")  # over the limit
        out.write(KafkaRecord(b'{"value": 1}', b"u1", T, (("pad", b"x" * 1100),)).line() + b"\n")  # a short line
    assert line_limit(1024) < len(KafkaRecord(b"", None, None, (("pad", b"x" * 9000),)).line())
    whole_requirements = rewrite(requirements, requirement_record, tmp_path / "requirements.records")
    summary, got = replayed(whole, whole_events, whole_requirements, tmp_path)
    assert dict(summary.rejects) == {"too_large": 2}, summary.rejects
    unread, read = (r["detail"] for r in got["rejects"])
    assert "more than the 1024 allowed" in unread and "bytes of key, value and headers" not in unread
    assert "1117 bytes of key, value and headers" in read  # 2 + 12 + 3 + 1100
