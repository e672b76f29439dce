"""The Avro input formats (jobs/common/avro_format.py; docs/formats.md, "Input formats"): decoding, the
JSON rules after it (one definition of validity), the reasons of bad bytes, schema evolution, and a
Schema Registry that does not answer. The registry is a real one (Rivven's rivven-schema, started by
deploy/local/schema-registry.sh: tests/schema_registry.py); only HTTP basic auth, which that server
does not offer, is tested against the STAND-IN of tests/registry_standin.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from datetime import UTC, datetime, timedelta

import fastavro
import pytest

from pwevent.jobs.common.avro_format import (
    RegistryUnavailable,
    encode_datum,
    frame,
    framed_line,
)
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_event
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.loopback import free_loopback_port
from tests.registry_standin import StandinRegistry
from tests.schema_registry import LocalSchemaRegistry

ORIGIN = "2024-01-01T00:00:00Z"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
T0_MS = 1_704_067_200_000

EVENT_V1 = {"type": "record", "name": "Event", "namespace": "test", "fields": [
    {"name": "user", "type": "string"},
    {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "value", "type": ["null", "int"], "default": None},
]}
#: v1 with a field added, with a default (a compatible evolution).
EVENT_V2 = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "source", "type": "string", "default": "app"}]}
NESTED = {"type": "record", "name": "Envelope", "fields": [
    {"name": "meta", "type": {"type": "record", "name": "Meta", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}},
    {"name": "payload", "type": ["null", {"type": "record", "name": "Payload", "fields": [
        {"name": "user_id", "type": ["null", "long"]}, {"name": "cell", "type": "int"}]}]},
]}


def _config(events: dict, **extra) -> object:
    return parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
                         "events": events, **extra})


#: These tests read from a real Schema Registry (tests/conftest.py, `schema_registry`).
registry_tests = pytest.mark.registry


def _confluent(url: str, **events) -> object:
    return _config({"format": "avro-confluent", "schema_registry": {"url": url, "retry_for": "2s"}, **events})


def _outcome(raw: bytes, config) -> object:
    try:
        return parse_event(raw, config.events, config.domain)
    except Rejected as err:
        return err.reason


@registry_tests
def test_a_registered_record_decodes_as_its_json_twin(schema_registry: LocalSchemaRegistry):
    schema_id = schema_registry.add("twin-value", EVENT_V1)
    config = _confluent(schema_registry.url)
    parsed = fastavro.parse_schema(EVENT_V1)
    record = {"user": "u1", "time": T0 + timedelta(seconds=61, milliseconds=5), "value": 3}
    event = parse_event(frame(schema_id, encode_datum(record, parsed)), config.events, config.domain)
    twin = parse_event(json.dumps({"user": "u1", "time": 1704067261005, "value": 3}), _config({}).events,
                       config.domain)
    assert event == twin and event.time_ms == 1704067261005


@pytest.mark.parametrize(("logical", "moment", "expected_ms"), [
    ("timestamp-millis", T0 + timedelta(milliseconds=1), 1704067200001),
    ("timestamp-micros", T0 + timedelta(microseconds=1999), 1704067200001),  # floored to the millisecond
    ("timestamp-micros", datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC), -1),  # floored, not rounded
    ("local-timestamp-millis", datetime(2024, 1, 1, 0, 0, 2), 1704067202000),
    ("local-timestamp-micros", datetime(2024, 1, 1, 0, 0, 3, 7), 1704067203000),
])
def test_time_logical_types_are_epoch_milliseconds(tmp_path, logical, moment, expected_ms):
    schema = {"type": "record", "name": "E", "fields": [
        {"name": "user", "type": "string"}, {"name": "time", "type": {"type": "long", "logicalType": logical}},
        {"name": "value", "type": "int"}]}
    path = tmp_path / "e.avsc"
    path.write_text(json.dumps(schema))
    config = _config({"format": "avro", "schema_file": str(path)})
    raw = encode_datum({"user": "u", "time": moment, "value": 1}, fastavro.parse_schema(schema))
    assert parse_event(raw, config.events, config.domain).time_ms == expected_ms


@registry_tests
def test_nested_paths_and_null_unions(schema_registry: LocalSchemaRegistry):
    schema_id = schema_registry.add("nested-value", NESTED)
    config = _confluent(schema_registry.url, user="payload.user_id", time="meta.ts", value="payload.cell")
    parsed = fastavro.parse_schema(NESTED)

    def framed(payload):
        return frame(schema_id, encode_datum({"meta": {"ts": T0 + timedelta(minutes=2)}, "payload": payload}, parsed))

    event = parse_event(framed({"user_id": 42, "cell": 2}), config.events, config.domain)
    assert (event.user, event.time_ms, event.cell) == ("42", 1704067320000, 2)
    assert _outcome(framed({"user_id": None, "cell": 2}), config) is Reason.MISSING_FIELD  # the union's null
    assert _outcome(framed(None), config) is Reason.MISSING_FIELD  # the path crosses a null record
    assert _outcome(framed({"user_id": 1, "cell": 9}), config) is Reason.OUT_OF_DOMAIN


@registry_tests
def test_bad_bytes_and_their_reasons(schema_registry: LocalSchemaRegistry):
    schema_id = schema_registry.add("reasons-value", EVENT_V1)
    lacking = schema_registry.add("lacking-value", {"type": "record", "name": "NoValue", "fields": [
        {"name": "user", "type": "string"}, {"name": "time", "type": "long"}]})
    mistyped = schema_registry.add("mistyped-value", {"type": "record", "name": "DoubleUser", "fields": [
        {"name": "user", "type": "double"}, {"name": "time", "type": "long"}, {"name": "value", "type": "int"}]})
    scalar = schema_registry.add("scalar-value", {"type": "string"})
    config = _confluent(schema_registry.url)
    good = encode_datum({"user": "u1", "time": T0, "value": 1}, fastavro.parse_schema(EVENT_V1))
    assert _outcome(frame(schema_id, good), config) == parse_event(frame(schema_id, good), config.events, config.domain)
    cases = {
        "truncated": (frame(schema_id, good[:-2]), Reason.UNDECODABLE),
        "bytes left over": (frame(schema_id, good + b"\x02"), Reason.UNDECODABLE),
        "wrong magic byte": (b"\x01" + frame(schema_id, good)[1:], Reason.UNDECODABLE),
        "JSON, not framed Avro": (b'{"user": "u1", "time": 0, "value": 1}', Reason.UNDECODABLE),
        "shorter than the frame": (b"\x00\x00\x01", Reason.UNDECODABLE),
        "unknown schema id": (frame(999, good), Reason.UNKNOWN_SCHEMA),
        "schema lacking a mapped field": (frame(lacking, encode_datum({"user": "u", "time": 5}, fastavro.parse_schema(
            schema_registry.schema(lacking)))), Reason.MISSING_FIELD),
        "wrong type": (frame(mistyped, encode_datum({"user": 1.5, "time": 5, "value": 1}, fastavro.parse_schema(
            schema_registry.schema(mistyped)))), Reason.MISTYPED_FIELD),
        "not a record": (frame(scalar, encode_datum("text", fastavro.parse_schema({"type": "string"}))),
                         Reason.UNDECODABLE),
        "garbage lengths": (frame(schema_id, b"\x7f\xff\xff\xff\xff\xff\xff\xff\xff\x01"), Reason.UNDECODABLE),
        "too large": (frame(schema_id, b"\x00" * 70_000), Reason.TOO_LARGE),
    }
    got = {name: _outcome(raw, config) for name, (raw, _) in cases.items()}
    assert got == {name: reason for name, (_, reason) in cases.items()}


def test_plain_avro_wrong_bytes_are_undecodable(tmp_path):
    path = tmp_path / "e.avsc"
    path.write_text(json.dumps(EVENT_V1))
    config = _config({"format": "avro", "schema_file": str(path)})
    good = encode_datum({"user": "u1", "time": T0, "value": 1}, fastavro.parse_schema(EVENT_V1))
    assert parse_event(good, config.events, config.domain).user == "u1"
    assert _outcome(good[:3], config) is Reason.UNDECODABLE
    assert _outcome(frame(1, good), config) is Reason.UNDECODABLE  # a frame is not plain Avro


@registry_tests
def test_schema_evolution_mid_stream_both_versions_count(schema_registry: LocalSchemaRegistry, tmp_path):
    """v2 (a field added with a default) is registered after records of v1 were written; the replay
    of the framed records counts both versions' events."""
    v1 = schema_registry.add("evolving-value", EVENT_V1)
    schema_registry.set_compatibility("evolving-value", "NONE")  # its check refuses logical types
    values = [frame(v1, encode_datum({"user": f"u{n}", "time": T0 + timedelta(seconds=n), "value": n % 4},
                                     fastavro.parse_schema(EVENT_V1))) for n in range(6)]
    v2 = schema_registry.add("evolving-value", EVENT_V2)
    assert v2 != v1
    values += [frame(v2, encode_datum({"user": f"u{n}", "time": T0 + timedelta(seconds=n), "value": n % 4,
                                       "source": "web"}, fastavro.parse_schema(EVENT_V2))) for n in range(6, 12)]
    config = _confluent(schema_registry.url)
    assert [parse_event(v, config.events, config.domain).user for v in values] == [f"u{n}" for n in range(12)]
    framed_path = tmp_path / "events.b64"
    framed_path.write_bytes(b"".join(framed_line(v) + b"\n" for v in values) + b"not base64!\n")
    json_path = tmp_path / "events.jsonl"
    json_path.write_text("".join(json.dumps({"user": f"u{n}", "time": 1704067200000 + 1000 * n, "value": n % 4}) + "\n"
                                 for n in range(12)))
    requirements = tmp_path / "requirements.jsonl"
    requirements.write_text("".join(json.dumps({"user": f"u{n}", "time": ORIGIN, "w": 3, "epsilon": 1.0}) + "\n"
                                    for n in range(12)))
    outputs = {}
    for name, path, cfg in (("avro", framed_path, config), ("json", json_path, _config({}))):
        releases, spend, rejects = (tmp_path / f"{name}-{kind}.jsonl" for kind in ("releases", "spend", "rejects"))
        summary = run_replay(cfg, str(path), str(requirements), str(releases), str(spend), rejects_out=str(rejects),
                             seed=7)
        outputs[name] = (releases.read_text(), spend.read_text(), summary)
    assert outputs["avro"][:2] == outputs["json"][:2]
    assert outputs["avro"][2].rejects == {"undecodable": 1} and not outputs["json"][2].rejects
    assert [json.loads(line)["slot"] for line in outputs["avro"][0].splitlines()] == [1]


def test_replay_reads_an_avro_container_file_as_the_json_twin(tmp_path):
    schema_path = tmp_path / "e.avsc"
    schema_path.write_text(json.dumps(EVENT_V1))
    records = [{"user": f"u{n % 5}", "time": T0 + timedelta(seconds=20 * n), "value": n % 4} for n in range(20)]
    container = tmp_path / "events.avro"
    with open(container, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(EVENT_V1), records)
    json_path = tmp_path / "events.jsonl"
    json_path.write_text("".join(json.dumps({"user": r["user"], "time": int(r["time"].timestamp() * 1000),
                                             "value": r["value"]}) + "\n" for r in records))
    requirements = tmp_path / "requirements.jsonl"
    requirements.write_text("".join(json.dumps({"user": f"u{n}", "time": ORIGIN, "w": 3, "epsilon": 1.0}) + "\n"
                                    for n in range(4)))  # u4 has none: unknown_user, re-read from the container
    outputs = {}
    for name, path, cfg in (("avro", container, _config({"format": "avro", "schema_file": str(schema_path)})),
                            ("json", json_path, _config({}))):
        releases, spend, rejects = (tmp_path / f"{name}-{kind}.jsonl" for kind in ("releases", "spend", "rejects"))
        summary = run_replay(cfg, str(path), str(requirements), str(releases), str(spend), rejects_out=str(rejects),
                             seed=3)
        outputs[name] = (releases.read_text(), spend.read_text(), summary.rejects,
                         [(r["reason"], r["position"], r["original_bytes"])
                          for r in map(json.loads, rejects.read_text().splitlines())])
    assert outputs["avro"][:3] == outputs["json"][:3]
    assert outputs["avro"][2] == {"unknown_user": 4}
    assert [p for _, p, _ in outputs["avro"][3]] == [p.replace("events.jsonl", "events.avro")
                                                      for _, p, _ in outputs["json"][3]]
    assert all(length == len(encode_datum(records[0], fastavro.parse_schema(EVENT_V1)))
               for _, _, length in outputs["avro"][3])  # the original is the Avro datum, not a spool line


@registry_tests
def test_a_registry_that_refuses_then_answers_is_waited_for(tmp_path, monkeypatch):
    """Connections refused first: the decoder backs off and asks again; no record is rejected. The
    registry (a server of its own on a port chosen here) starts only after the decoder's first
    request was refused, and its first schema gets id 1. The decoder's later requests are held until
    that schema is registered: one between the server's start and the registration would rightly get
    a 404 (`unknown_schema`)."""
    port = free_loopback_port()
    server = LocalSchemaRegistry(tmp_path / "registry", port=port)
    config = _config({"format": "avro-confluent",
                      "schema_registry": {"url": f"http://127.0.0.1:{port}", "retry_for": "60s"}})
    raw = frame(1, encode_datum({"user": "u1", "time": T0, "value": 1}, fastavro.parse_schema(EVENT_V1)))
    refused, registered = threading.Event(), threading.Event()
    outcomes: list[str] = []

    def start_later() -> None:
        refused.wait(30)
        server.start()
        assert server.add("events-value", EVENT_V1) == 1
        registered.set()

    real_urlopen = urllib.request.urlopen

    def gated(request, *args, **kwargs):  # the decoder's requests only: the server's own `add` passes
        if "/schemas/ids/" not in request.full_url:
            return real_urlopen(request, *args, **kwargs)
        if refused.is_set():
            assert registered.wait(60)
            outcomes.append("asked")
            return real_urlopen(request, *args, **kwargs)
        try:
            return real_urlopen(request, *args, **kwargs)
        except OSError:
            outcomes.append("refused")
            raise
        finally:
            refused.set()

    monkeypatch.setattr(urllib.request, "urlopen", gated)
    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        assert parse_event(raw, config.events, config.domain).user == "u1"
    finally:
        refused.set()
        starter.join()
        server.stop()
    assert outcomes == ["refused", "asked"]
    assert server.requests("/schemas/ids/1") == 1


def test_unanswering_registry_fails_the_run_instead_of_rejecting():
    port = free_loopback_port()
    config = _config({"format": "avro-confluent",
                      "schema_registry": {"url": f"http://127.0.0.1:{port}", "retry_for": "300ms"}})
    with pytest.raises(RegistryUnavailable, match="did not answer"):
        parse_event(frame(1, b"\x02u\x00\x00"), config.events, config.domain)


def test_standin_registry_basic_auth(tmp_path, monkeypatch):
    standin = StandinRegistry(credentials=("pwevent", "s3cret"))
    url = standin.start()
    try:
        schema_id = standin.add("events-value", EVENT_V1)
        raw = frame(schema_id, encode_datum({"user": "u1", "time": T0, "value": 1}, fastavro.parse_schema(EVENT_V1)))
        secret = tmp_path / "password"
        secret.write_text("s3cret\n")
        good = _config({"format": "avro-confluent", "schema_registry": {
            "url": url, "username": "pwevent", "password": {"file": str(secret)}}})
        assert parse_event(raw, good.events, good.domain).user == "u1"
        assert "s3cret" not in repr(good)
        monkeypatch.setenv("REGISTRY_PASSWORD", "wrong")
        bad = _config({"format": "avro-confluent", "schema_registry": {
            "url": url, "username": "pwevent", "password": "${REGISTRY_PASSWORD}", "retry_for": "1s"}})
        with pytest.raises(RegistryUnavailable, match="HTTP 401"):  # a refused login is no record's fault
            parse_event(raw, bad.events, bad.domain)
    finally:
        standin.stop()


@pytest.mark.parametrize(("events", "message"), [
    ({"format": "avro"}, "format avro needs it"),
    ({"format": "avro-confluent"}, "format avro-confluent needs it"),
    ({"schema_file": "x.avsc"}, "schema_file goes with format avro"),
    ({"format": "avro", "schema_file": "/nonexistent.avsc"}, "cannot read schema_file"),
    ({"format": "avro-confluent", "schema_registry": {"url": "registry:8081"}}, "should match pattern"),
    ({"format": "avro-confluent", "schema_registry": {"url": "http://r", "username": "u"}}, "go together"),
    ({"format": "protobuf"}, "format protobuf needs it"),
])
def test_format_settings_are_checked(events, message):
    with pytest.raises(ConfigError, match=message):
        _config(events)


def test_avro_requirement_records_fixed_and_dynamic(tmp_path):
    """Requirement records in plain Avro: the requirement's members are read from the decoded record
    as from a JSON one (w/epsilon, or backward/forward records; a null union branch is absent)."""
    from pwevent.jobs.common.records import parse_requirement_update

    window = {"type": "record", "name": "Window", "fields": [{"name": "w", "type": "int"},
                                                               {"name": "epsilon", "type": "double"}]}
    schema = {"type": "record", "name": "Requirement", "fields": [
        {"name": "user", "type": "string"},
        {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "w", "type": ["null", "int"], "default": None},
        {"name": "epsilon", "type": ["null", "double"], "default": None},
        {"name": "backward", "type": ["null", window], "default": None},
        {"name": "forward", "type": ["null", "Window"], "default": None}]}
    path = tmp_path / "requirement.avsc"
    path.write_text(json.dumps(schema))
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
                           "requirements": {"format": "avro", "schema_file": str(path)}})
    parsed = fastavro.parse_schema(schema)
    fixed = encode_datum({"user": "u1", "time": T0, "w": 10, "epsilon": 1.0}, parsed)
    update = parse_requirement_update(fixed, config.requirements, config.caps)
    twin = parse_requirement_update(json.dumps({"user": "u1", "time": ORIGIN, "w": 10, "epsilon": 1.0}),
                                    _config({}).requirements, config.caps)
    assert update == twin
    dynamic = encode_datum({"user": "u2", "time": T0, "backward": {"w": 3, "epsilon": 0.5},
                            "forward": {"w": 5, "epsilon": 2.0}}, parsed)
    assert parse_requirement_update(dynamic, config.requirements, config.caps).requirement.backward.w == 3
    with pytest.raises(Rejected) as err:
        parse_requirement_update(fixed[:-1], config.requirements, config.caps)
    assert err.value.reason is Reason.UNDECODABLE
    with pytest.raises(ConfigError, match="signed requirement records are JSON"):
        parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
                      "requirements": {"format": "avro", "schema_file": str(path),
                                       "signature": {"key_env": "HOME"}}})


def test_produce_keys_and_stamps_avro_files_by_their_decoded_fields(tmp_path):
    """`pwevent produce` sends a container file's records as their Avro datums and a framed-records
    file's values as they are (a line that is not base64 too), keyed by user, stamped with event time."""
    from pwevent.jobs.streaming.produce import _slots

    schema_path = tmp_path / "e.avsc"
    schema_path.write_text(json.dumps(EVENT_V1))
    parsed = fastavro.parse_schema(EVENT_V1)
    records = [{"user": f"u{n}", "time": T0 + timedelta(seconds=45 * n), "value": n % 4} for n in range(4)]
    container = tmp_path / "events.avro"
    with open(container, "wb") as out:
        fastavro.writer(out, parsed, records)
    config = _config({"format": "avro", "schema_file": str(schema_path)})
    sent = _slots(str(container), config.events, config)
    assert {slot: [(key, stamp) for _, key, stamp, _ in lines] for slot, lines in sent.items()} == {
        1: [(b"u0", 1704067200000), (b"u1", 1704067245000)], 2: [(b"u2", 1704067290000)],
        3: [(b"u3", 1704067335000)]}
    assert [value for lines in sent.values() for value, _, _, _ in lines] == [encode_datum(r, parsed) for r in records]
    framed_path = tmp_path / "events.b64"
    framed_path.write_bytes(b"".join(framed_line(encode_datum(r, parsed)) + b"\n" for r in records) + b"not base64!\n")
    framed = _slots(str(framed_path), config.events, config)
    assert [value for lines in framed.values() for value, _, _, _ in lines] == [
        *(encode_datum(r, parsed) for r in records), b"not base64!"]


def test_full_audit_reads_avro_requirements(tmp_path):
    """Requirements in an Avro container file: the replay and the auditor read the same records; the
    full audit passes, and fails when the auditor is given fewer requirement records than the replay."""
    from pwevent.jobs.offline.audit import audit_file

    schema = {"type": "record", "name": "Requirement", "fields": [
        {"name": "user", "type": "string"}, {"name": "time", "type": "long"}, {"name": "w", "type": "int"},
        {"name": "epsilon", "type": "double"}]}
    path = tmp_path / "requirement.avsc"
    path.write_text(json.dumps(schema))
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
                           "requirements": {"format": "avro", "schema_file": str(path)}, "noise": "numpy-fast"})
    records = [{"user": f"u{n}", "time": 1704067200000 + 60_000 * n, "w": 3 + n, "epsilon": 1.0} for n in range(5)]
    requirements = tmp_path / "requirements.avro"
    with open(requirements, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), records)
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps({"user": f"u{n % 5}", "time": 1704067200000 + 20_000 * n, "value": n % 4})
                              + "\n" for n in range(60)))
    releases, spend = tmp_path / "releases.jsonl", tmp_path / "spend.jsonl"
    run_replay(config, str(events), str(requirements), str(releases), str(spend), seed=5)
    assert audit_file(str(spend), str(requirements), str(releases), config).ok
    fewer = tmp_path / "fewer.avro"
    with open(fewer, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), records[:-1])
    assert not audit_file(str(spend), str(fewer), str(releases), config).ok


def test_avro_records_reach_the_fast_path_through_the_jvm_decoder_with_credentials_never_in_the_sql(tmp_path):
    """Avro events reach the JSON regex through AvroFields (its text, with the schema, and the field
    paths: the time path only when it is read; the registry is the registered instance's); a
    registry with credentials keeps them on the fast path, and no credential is in the SQL; the
    source reads no JSON time out of Avro bytes."""
    from pwevent.jobs.streaming.event_sql import AVRO_FIELDS, event_sql, parsed_events_sql, record_regex
    from pwevent.jobs.streaming.graph import source_time_path

    path = tmp_path / "e.avsc"
    path.write_text(json.dumps(EVENT_V1))
    plain, confluent = _config({"format": "avro", "schema_file": str(path)}), _confluent("http://127.0.0.1:9")
    assert record_regex(plain) == record_regex(confluent) == record_regex(_config({})) is not None
    assert event_sql(_config({})).text == "`value`"
    assert event_sql(plain).text.startswith(f"{AVRO_FIELDS}(`value`, '{{")
    assert event_sql(plain).text.endswith("]}', 'user,time,value', 65536)")
    assert event_sql(confluent).text == f"{AVRO_FIELDS}(`value`, CAST(NULL AS STRING), 'user,time,value', 65536)"
    assert event_sql(confluent, kafka_time=True).text.endswith("'user,value', 65536)")
    for auth in ({"username": "u", "password": "p4ss"}, {"token": "t0ken"}):
        secret = _config({"format": "avro-confluent", "schema_registry": {"url": "http://127.0.0.1:9", **auth}})
        assert record_regex(secret) == record_regex(confluent) and event_sql(secret).fast != "FALSE"
        sql = parsed_events_sql(secret, "raw_events")
        assert "p4ss" not in sql and "t0ken" not in sql and "127.0.0.1:9" not in sql
    for config in (plain, confluent):
        assert source_time_path(config.events) is None
    assert source_time_path(_config({}).events) == ("time",)


LINKED = {"type": "record", "name": "N", "fields": [
    {"name": "user", "type": "string"}, {"name": "time", "type": "long"}, {"name": "value", "type": "int"},
    {"name": "next", "type": ["null", "N"]}]}


def _linked(depth: int) -> bytes:
    """A datum of LINKED nested `depth` levels: user "u1" at the top, "" below, time T0_MS, value 1
    (a level's bytes, then the union's branch: 2 for N, 0 for null at the end)."""
    def level(user: str) -> bytes:  # a record with next = null, less that null's branch byte
        return encode_datum({"user": user, "time": T0_MS, "value": 1, "next": None}, fastavro.parse_schema(LINKED))[:-1]

    return level("u1") + b"\x02" + (level("") + b"\x02") * (depth - 1) + level("") + b"\x00"


def test_a_recursive_schema_decodes_shallow_datums_and_refuses_deep_ones_without_crashing(tmp_path):
    """A recursive writer schema (a linked list): a short datum decodes as under any schema; one nested
    7,000 deep (63 KB, under the default size limit) is `undecodable`. It runs in a child interpreter
    because fastavro's compiled reader crashed the process on it (a segmentation fault)."""
    path = tmp_path / "linked.avsc"
    path.write_text(json.dumps(LINKED))
    config = _config({"format": "avro", "schema_file": str(path)})
    event = parse_event(_linked(3), config.events, config.domain)
    assert (event.user, event.time_ms, event.cell) == ("u1", T0_MS, 1)
    deep = tmp_path / "deep.bin"
    deep.write_bytes(_linked(7_000))
    assert len(deep.read_bytes()) <= config.max_record_bytes
    child = (
        "import json, sys\n"
        "from pwevent.jobs.common.config import parse_config\n"
        "from pwevent.jobs.common.reasons import Rejected\n"
        "from pwevent.jobs.common.records import parse_event\n"
        "config = parse_config(json.loads(sys.argv[1]))\n"
        "try:\n"
        "    parse_event(open(sys.argv[2], 'rb').read(), config.events, config.domain)\n"
        "except Rejected as err:\n"
        "    print(err.reason.value)\n"
    )
    settings = {"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "domain": {"type": "cells", "d": 4},
                "events": {"format": "avro", "schema_file": str(path)}}
    done = subprocess.run([sys.executable, "-c", child, json.dumps(settings), str(deep)], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "undecodable"), done.stderr[-2000:]


def _zigzag(n: int) -> bytes:
    """An Avro long's bytes."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize("items", ["null", {"type": "record", "name": "Z", "fields": []},
                                   {"type": "fixed", "name": "F", "size": 0}])
def test_an_array_of_items_without_bytes_is_refused_before_any_count_is_read(tmp_path, items):
    """An array whose items take no bytes bounds nothing: 12 bytes may claim 2^62 nulls, which a
    decoder would try to build (minutes and gigabytes: a TaskManager's end). Every datum of such a
    writer schema is `undecodable`, read or not."""
    path = tmp_path / "e.avsc"
    array = {"name": "nothing", "type": {"type": "array", "items": items}}
    path.write_text(json.dumps({**EVENT_V1, "fields": [*EVENT_V1["fields"], array]}))
    config = _config({"format": "avro", "schema_file": str(path)})
    head = encode_datum({"user": "u1", "time": T0, "value": 1}, fastavro.parse_schema(EVENT_V1))
    for count in (0, 3, 2**62):
        with pytest.raises(Rejected, match="array of items that take no bytes") as refused:
            parse_event(head + _zigzag(count) + _zigzag(0), config.events, config.domain)
        assert refused.value.reason is Reason.UNDECODABLE


def test_a_hostile_count_of_items_with_bytes_ends_at_the_datum_s_end(tmp_path):
    """An array of strings claiming 2^62 items in a few bytes: the decoder stops at the bytes' end."""
    path = tmp_path / "e.avsc"
    array = {"name": "tags", "type": {"type": "array", "items": "string"}}
    path.write_text(json.dumps({**EVENT_V1, "fields": [*EVENT_V1["fields"], array]}))
    config = _config({"format": "avro", "schema_file": str(path)})
    head = encode_datum({"user": "u1", "time": T0, "value": 1}, fastavro.parse_schema(EVENT_V1))
    assert _outcome(head + _zigzag(2**62) + b"\x02a", config) is Reason.UNDECODABLE
    assert parse_event(head + _zigzag(1) + b"\x02a" + _zigzag(0), config.events, config.domain).user == "u1"
