"""The JVM fast path for Avro events (AvroFields, then the JSON fast path's regex and SQL) against the
reference parser (jobs/common/avro_format.py, then `parse_event`), on a Flink mini-cluster and a real
Schema Registry (differential, as tests/streaming/test_event_sql.py is for JSON).

Hypothesis draws writer schemas (the configured fields of right and wrong types, unions with null,
the four timestamp logical types and others, extra fields of every kind, an evolution with an added
field with a default) and records of them, then truncates, extends or flips their bytes, or frames
them with an id the registry does not know. For every record: if the fast path takes it,
`parse_event` accepts it with exactly the (user, time_ms, cell) SQL extracted. The canonical records
(string or long users, timestamp-millis or -micros times, v1 and its evolution v2, v1 with a field of
every logical type of the Avro specification besides) must all take it, also through a registry that
wants TLS, a client certificate and basic auth (tests/registry_gateway.py in front of the real one).
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.avro_format import encode_datum, frame
from pwevent.jobs.common.avro_schema import parse_schema_text
from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.common.field_paths import field_path
from pwevent.jobs.streaming.event_sql import register_record_groups
from pwevent.jobs.streaming.jars import avro_jar, jvm_jar
from tests.streaming.test_event_sql import GRID, ORIGIN_MS, check_fast_implies_accept, mostly, run_fast_path

pytestmark = [pytest.mark.flink, pytest.mark.registry, pytest.mark.slow]

BASE = {"mechanism": "PBD", "slot": "60s", "origin": ORIGIN_MS}
#: (name, domain, events field paths, Kafka-timestamp event time); the events format is added per case.
#: The first type of each list below is the canonical one.
SHAPES: list[tuple[str, dict[str, Any], dict[str, str], bool]] = [
    ("cells", {"type": "cells", "d": 100}, {}, False),
    ("binary", {"type": "binary"}, {}, False),
    ("categories", {"type": "categories", "values": ["a", "b c", "é"]}, {}, False),
    ("grid-fields", GRID, {"lat": "lat", "lon": "lon"}, False),
    ("grid-record", GRID, {}, False),
    ("nested-cells", {"type": "cells", "d": 100}, {"user": "payload.user_id", "time": "meta.ts", "value": "payload.v"},
     False),
    ("cells-kafka-time", {"type": "cells", "d": 10}, {}, True),
]
MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
MICROS = {"type": "long", "logicalType": "timestamp-micros"}
TIMES = [MILLIS, MICROS, {"type": "long", "logicalType": "local-timestamp-millis"},
         {"type": "long", "logicalType": "local-timestamp-micros"}, "long", "int", "string", "double",
         ["null", MILLIS], {"type": "int", "logicalType": "date"}, {"type": "long", "logicalType": "time-micros"}]
USERS = ["string", "long", "int", ["null", "string"], ["string", "long"], "double", "boolean", "bytes",
         {"type": "enum", "name": "U", "symbols": ["u1", "u2"]}, {"type": "string", "logicalType": "uuid"}]
VALUES = {"cells": ["int", "long", ["null", "int"], "double", "string", "boolean"],
          "binary": ["boolean", "int", "string", ["null", "boolean"]],
          "categories": ["string", {"type": "enum", "name": "C", "symbols": ["a", "b", "x"]}, "int",
                         ["null", "string"]],
          "grid": ["double", "float", "int", "string", ["null", "double"]]}
#: Extra fields a schema may carry (not configured): their values still have to decode.
#: Every logical type of the Avro specification, as an extra field.
LOGICAL_EXTRAS = [("amount", {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}),
                  ("price", {"type": "fixed", "name": "Price", "size": 8, "logicalType": "decimal", "precision": 12,
                             "scale": 4}),
                  ("big", {"type": "bytes", "logicalType": "big-decimal"}),
                  ("id", {"type": "string", "logicalType": "uuid"}),
                  ("day", {"type": "int", "logicalType": "date"}),
                  ("tod_ms", {"type": "int", "logicalType": "time-millis"}),
                  ("tod_us", {"type": "long", "logicalType": "time-micros"}),
                  ("when", MILLIS), ("at", MICROS),
                  ("at_ns", {"type": "long", "logicalType": "timestamp-nanos"}),
                  ("local_ms", {"type": "long", "logicalType": "local-timestamp-millis"}),
                  ("local_us", {"type": "long", "logicalType": "local-timestamp-micros"}),
                  ("local_ns", {"type": "long", "logicalType": "local-timestamp-nanos"}),
                  ("took", {"type": "fixed", "name": "Took", "size": 12, "logicalType": "duration"})]
EXTRAS = [("source", "string"), ("n", "long"), ("tags", {"type": "array", "items": "int"}),
          ("attrs", {"type": "map", "values": "long"}), ("blob", "bytes"),
          ("f", {"type": "fixed", "name": "F4", "size": 4}), ("ok", "boolean"), ("d", "double"), *LOGICAL_EXTRAS,
          ("bad_decimal", {"type": "bytes", "logicalType": "decimal"}),
          ("other", {"type": "string", "logicalType": "ulid"})]


def config_of(shape: tuple[str, dict[str, Any], dict[str, str], bool], events: dict[str, Any]) -> Config:
    _, domain, paths, _ = shape
    return parse_config({**BASE, "domain": domain, "events": {**paths, **events}})


def leaves(config: Config) -> list[tuple[str, str]]:
    """(field path, role) of the configured fields: user, time, value or lat and lon."""
    fields = config.events
    values = [(fields.lat, "grid"), (fields.lon, "grid")] if fields.lat and fields.lon else [(fields.value, "value")]
    return [(fields.user, "user"), (fields.time, "time"), *values]


def record_schema(name: str, members: dict[str, Any]) -> dict[str, Any]:
    """A record schema of `members` (name -> type, or nested members as a dict without "type")."""
    fields = []
    for key, kind in members.items():
        nested = isinstance(kind, dict) and "type" not in kind
        fields.append({"name": key, "type": record_schema(f"{name}_{key}", kind) if nested else kind})
    return {"type": "record", "name": name, "fields": fields}


def nest(members: dict[str, Any], path: str, kind: Any) -> None:
    keys = field_path(path)
    for key in keys[:-1]:
        members = members.setdefault(key, {})
    members[keys[-1]] = kind


def canonical_schema(config: Config, micros: bool, long_user: bool, evolved: bool,
                     logical: bool = False) -> dict[str, Any]:
    """The schema a producer of valid events writes: a string (or long) user, a timestamp, the value
    as the domain wants it; `evolved`: with an added field with a default; `logical`: with a field of
    every logical type besides (LOGICAL_EXTRAS)."""
    kind = type(config.domain).__name__
    value = {"CellsDomain": "int", "BinaryDomain": "boolean", "CategoriesDomain": "string"}.get(kind)
    members: dict[str, Any] = {}
    for path, role in leaves(config):
        if role == "user":
            nest(members, path, "long" if long_user else "string")
        elif role == "time":
            nest(members, path, MICROS if micros else MILLIS)
        elif role == "grid":
            nest(members, path, "double")
        else:
            nest(members, path, value or record_schema("Pos", {"lat": "double", "lon": "double"}))
    schema = record_schema("Event", members)
    if evolved:
        schema["fields"].append({"name": "source", "type": "string", "default": "app"})
    if logical:
        schema["fields"] += [{"name": name, "type": kind} for name, kind in LOGICAL_EXTRAS]
    return schema


def logical_values(rng: random.Random) -> dict[str, Any]:
    """Values of LOGICAL_EXTRAS' fields as a producer writes them (within what each type holds)."""
    return {"amount": Decimal(rng.randrange(-10**6 + 1, 10**6)).scaleb(-2),
            "price": Decimal(rng.randrange(10**12)).scaleb(-4), "big": rng.randbytes(rng.randrange(6)),
            "id": str(uuid.UUID(int=rng.getrandbits(128))), "day": rng.randrange(-719_162, 2_932_897),
            "tod_ms": rng.randrange(86_400_000), "tod_us": rng.randrange(86_400_000_000),
            "when": ORIGIN_MS + rng.randrange(10**9), "at": ORIGIN_MS * 1000, "at_ns": rng.randrange(-2**63, 2**63),
            "local_ms": ORIGIN_MS, "local_us": ORIGIN_MS * 1000, "local_ns": rng.randrange(2**62),
            "took": rng.randbytes(12)}


def canonical_record(config: Config, rng: random.Random, micros: bool, long_user: bool,
                     evolved: bool, logical: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {}
    domain = config.domain
    kind = type(domain).__name__
    for path, role in leaves(config):
        keys = field_path(path)
        node = record
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        if role == "user":
            node[keys[-1]] = rng.randrange(10**12) if long_user else f"u{rng.randrange(10_000)}"
        elif role == "time":
            ms = ORIGIN_MS + rng.randrange(10**9)
            node[keys[-1]] = ms * 1000 + rng.randrange(1000) if micros else ms
        elif role == "grid":
            low, high = (domain.min_lat, domain.max_lat) if keys[-1] == "lat" else (domain.min_lon, domain.max_lon)
            node[keys[-1]] = rng.uniform(low, high)
        elif kind == "GridDomain":
            node[keys[-1]] = {"lat": rng.uniform(domain.min_lat, domain.max_lat),
                              "lon": rng.uniform(domain.min_lon, domain.max_lon)}
        elif kind == "CategoriesDomain":
            node[keys[-1]] = rng.choice(["a", "b c"])
        elif kind == "BinaryDomain":
            node[keys[-1]] = rng.random() < 0.5
        else:
            node[keys[-1]] = rng.randrange(domain.d)
    if evolved:
        record["source"] = rng.choice(["app", "web"])
    if logical:
        record.update(logical_values(rng))
    return record


def value_of(draw: Any, kind: Any, role: str) -> Any:
    """A value of Avro type `kind`, near what the field's role wants."""
    if isinstance(kind, list):
        branch = draw(st.sampled_from(kind))
        return None if branch == "null" else value_of(draw, branch, role)
    if isinstance(kind, dict):
        t = kind["type"]
        if t == "record":
            return {f["name"]: value_of(draw, f["type"], f["name"]) for f in kind["fields"]}
        if t == "enum":
            return draw(st.sampled_from(kind["symbols"]))
        if t == "array":
            return draw(st.lists(st.integers(-5, 5), max_size=3))
        if t == "map":
            return draw(st.dictionaries(st.sampled_from(["k", "a b", "é", 'q"']), st.integers(-5, 5), max_size=3))
        if t == "fixed":
            return draw(st.binary(min_size=kind["size"], max_size=kind["size"]))
        logical = kind.get("logicalType")
        if logical in ("timestamp-millis", "local-timestamp-millis"):
            return draw(mostly(st.integers(ORIGIN_MS - 10, ORIGIN_MS + 10**9),
                               st.sampled_from([0, -1, 253402300799999, 253402300800000, 2**62, -2**62])))
        if logical in ("timestamp-micros", "local-timestamp-micros"):
            return draw(mostly(st.integers((ORIGIN_MS - 10) * 1000, (ORIGIN_MS + 10**9) * 1000),
                               st.sampled_from([0, -1, -999, 253402300799999999, 2**62, -2**62])))
        if logical == "date":  # a Python date holds days -719,162 to 2,932,896
            return draw(mostly(st.integers(0, 30_000), st.sampled_from([-719_162, -719_163, 2_932_896, 2_932_897,
                                                                        -2**31, 2**31 - 1])))
        if logical == "time-millis":
            return draw(mostly(st.integers(0, 86_400_000 - 1), st.sampled_from([-1, 86_400_000, 2**31 - 1, -2**31])))
        if logical == "time-micros":
            return draw(mostly(st.integers(0, 86_400_000_000 - 1), st.sampled_from([-1, 86_400_000_000, 2**62])))
        if logical == "uuid":  # written as a plain string: any text, mostly a uuid in one of Python's forms
            some = draw(st.uuids())
            return draw(mostly(st.sampled_from([str(some), str(some).upper()]),
                               st.sampled_from([some.hex, "{" + str(some) + "}", "urn:uuid:" + str(some), "nope", ""])))
        if logical in ("decimal", "big-decimal") and t == "bytes":
            return draw(st.binary(max_size=3))
        return value_of(draw, t, role)
    if kind == "string":
        near = {"user": st.from_regex(r"[A-Za-z0-9_.:@-]{1,8}", fullmatch=True),
                "value": st.sampled_from(["a", "b c", "é"])}.get(role, st.just("x"))
        return draw(mostly(near, st.one_of(st.sampled_from(["", "a\"b", "a\\b", "\u2028", "1", "true", "0" * 257]),
                                           st.text(max_size=4))))
    if kind in ("long", "int"):
        top = 2**31 - 1 if kind == "int" else 2**63 - 1
        near = {"time": st.integers(ORIGIN_MS - 10, ORIGIN_MS + 10**9) if kind == "long" else st.integers(-5, 5),
                "user": st.integers(0, 10**18), "value": st.integers(-3, 120), "lat": st.integers(39, 42),
                "lon": st.integers(-75, -73)}.get(role, st.integers(-5, 5))
        return draw(mostly(near, st.integers(-top - 1, top)))
    if kind == "double" or kind == "float":
        near = {"lat": st.floats(40.5, 41.0), "lon": st.floats(-74.3, -73.6)}.get(role, st.floats(-5, 5))
        return draw(mostly(near, st.one_of(st.floats(allow_nan=True),
                                           st.sampled_from([0.0, -0.0, 1.0, 1e-7, 1e7, 40.55, -74.27, 40.99]),
                                           st.floats(width=32) if kind == "float" else st.floats())))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "bytes":
        return draw(st.binary(max_size=4))
    assert kind == "null", kind
    return None


@st.composite
def drawn_schema(draw: Any, config: Config) -> dict[str, Any]:
    """A writer schema: each configured field of a drawn type (or absent), some extra fields, in a
    drawn order (the configured ones mostly first: the regex wants them in the canonical order)."""
    kind = type(config.domain).__name__
    role_types = {"user": USERS, "time": TIMES, "grid": VALUES["grid"],
                  "value": VALUES[{"CellsDomain": "cells", "BinaryDomain": "binary",
                                   "CategoriesDomain": "categories"}.get(kind, "grid")]}
    if kind == "GridDomain" and not config.events.lat:
        role_types["value"] = [record_schema("Pos", {"lat": "double", "lon": "double"}),
                               record_schema("Pos", {"lon": "double", "lat": "double"}),
                               {"type": "map", "values": "double"}, {"type": "array", "items": "double"},
                               ["null", record_schema("Pos", {"lat": "float", "lon": "int"})]]
    members: dict[str, Any] = {}
    for path, role in leaves(config):
        if draw(st.integers(0, 19)):  # the canonical type (the first) three times in four
            kinds = role_types[role]
            nest(members, path, kinds[0] if draw(st.integers(0, 3)) else draw(st.sampled_from(kinds)))
    for name, extra in draw(st.lists(st.sampled_from(EXTRAS), max_size=3, unique_by=lambda e: e[0])):
        members.setdefault(name, extra)
    order = list(members) if draw(st.integers(0, 1)) else draw(st.permutations(list(members)))
    return record_schema("Event", {key: members[key] for key in order})


@st.composite
def drawn_value(draw: Any, schema: dict[str, Any]) -> bytes:
    """A record of `schema`, encoded; sometimes truncated, extended or with a byte flipped."""
    record = value_of(draw, schema, "record")
    data = encode_datum(record, parse_schema_text(json.dumps(schema), "a drawn schema"))
    change = draw(st.integers(0, 9))
    if change == 0 and data:
        return data[:draw(st.integers(0, len(data) - 1))]
    if change == 1:
        return data + draw(st.binary(min_size=1, max_size=3))
    if change == 2 and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data


@pytest.fixture(scope="module")
def t_env(schema_registry):
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    env.get_config().set("pipeline.jars", f"{jvm_jar().as_uri()};{avro_jar().as_uri()}")
    register_record_groups(env, parse_config({**BASE, "domain": {"type": "binary"},
                                              "events": confluent(schema_registry)}).events)
    return env


def confluent(schema_registry: Any) -> dict[str, Any]:
    return {"format": "avro-confluent", "schema_registry": {"url": schema_registry.url, "retry_for": "2s"}}


def test_canonical_avro_records_take_the_fast_path_and_every_fast_one_is_the_reference_parsers(
        t_env, schema_registry, tmp_path):
    cases, records = [], []
    for index, shape in enumerate(SHAPES):
        config = config_of(shape, confluent(schema_registry))
        subject = f"canonical-{shape[0]}-value"
        schema_registry.set_compatibility(subject, "NONE")
        rng = random.Random(index)
        out = []
        for variant in [(False, False, False), (True, True, False), (False, False, True), (False, False, False, True)]:
            schema = canonical_schema(config, *variant)
            schema_id = schema_registry.add(subject, schema)
            parsed = parse_schema_text(json.dumps(schema), subject)
            out += [frame(schema_id, encode_datum(canonical_record(config, rng, *variant), parsed)) for _ in range(40)]
        cases.append((shape[0], config, shape[3]))
        records.append(out)
        # format avro: the v1 schema in a file
        path = tmp_path / f"{shape[0]}.avsc"
        path.write_text(json.dumps(canonical_schema(config, False, False, False)))
        plain = config_of(shape, {"format": "avro", "schema_file": str(path)})
        parsed = parse_schema_text(path.read_text(), str(path))
        cases.append((f"{shape[0]}-file", plain, shape[3]))
        records.append([encode_datum(canonical_record(plain, rng, False, False, False), parsed) for _ in range(40)])
    rows = run_fast_path(t_env, records, cases)
    for case, (name, _, _) in enumerate(cases):
        assert check_fast_implies_accept(case, records[case], rows[case], cases) == len(records[case]), name


#: Canonical records added to each case of the drawn test (they must take the fast path).
CANONICAL_PER_CASE = 5


def test_drawn_avro_schemas_and_records_take_the_fast_path_only_as_the_reference_parser_reads_them(
        t_env, schema_registry):
    cases = [(shape[0], config_of(shape, confluent(schema_registry)), shape[3]) for shape in SHAPES]
    records: list[list[bytes]] = [[] for _ in cases]
    schema_ids: dict[str, int] = {}

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def collect(data: Any) -> None:
        for case, (name, config, _) in enumerate(cases):
            schema = data.draw(drawn_schema(config))
            text = json.dumps(schema)
            if text not in schema_ids:
                subject = f"drawn-{name}-value"
                schema_registry.set_compatibility(subject, "NONE")
                schema_ids[text] = schema_registry.add(subject, schema)
            for _ in range(3):
                unknown = data.draw(st.integers(0, 19)) == 0
                records[case].append(frame(999_999 if unknown else schema_ids[text], data.draw(drawn_value(schema))))

    collect()
    # A few canonical records in every case, so that no case's differential check is empty however
    # few of its drawn records happen to be canonical (a case can draw none: its domain is narrow).
    rng = random.Random(0)
    for case, (name, config, _) in enumerate(cases):
        schema = canonical_schema(config, False, False, False)
        subject = f"drawn-{name}-value"
        schema_id = schema_registry.add(subject, schema)
        parsed = parse_schema_text(json.dumps(schema), subject)
        records[case] += [frame(schema_id, encode_datum(canonical_record(config, rng, False, False, False), parsed))
                          for _ in range(CANONICAL_PER_CASE)]
    rows = run_fast_path(t_env, records, cases)
    fast = {name: check_fast_implies_accept(case, records[case], rows[case], cases)
            for case, (name, _, _) in enumerate(cases)}
    print(f"drawn records: {sum(map(len, records))}, schemas: {len(schema_ids)}; fast per case:", fast)
    assert all(count >= CANONICAL_PER_CASE for count in fast.values()), fast


def test_the_fast_path_keeps_its_records_through_a_registry_with_tls_and_credentials(
        schema_registry, tmp_path, monkeypatch):
    """AvroFields' RegistryClient speaks HTTPS with the configured CA file and client keystore and
    sends the basic-auth header: every canonical record (with a field of every logical type) takes the
    fast path, and the gateway refused no request of the JVM's."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    from tests.registry_gateway import RegistryGateway, TlsFiles

    tls = TlsFiles.make(tmp_path / "tls")
    monkeypatch.setenv("PWEVENT_T_REGISTRY_PASSWORD", "s3cret-pass")
    basic = "Basic " + base64.b64encode(b"pwevent:s3cret-pass").decode()
    gateway = RegistryGateway(schema_registry.url, tls, basic, require_client_cert=True)
    gateway.start()
    try:
        registry = {"url": gateway.url, "username": "pwevent", "password": "${PWEVENT_T_REGISTRY_PASSWORD}",
                    "ca_file": tls.path("ca.pem"), "retry_for": "2s",
                    "client_cert": {"cert_file": tls.path("client.pem"), "key_file": tls.path("client.key"),
                                    "keystore": {"location": tls.path("client.p12"), "password": tls.key_password}}}
        config = config_of(SHAPES[0], {"format": "avro-confluent", "schema_registry": registry})
        env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
        env.get_config().set("parallelism.default", "1")
        env.get_config().set("pipeline.jars", f"{jvm_jar().as_uri()};{avro_jar().as_uri()}")
        register_record_groups(env, config.events)
        schema = canonical_schema(config, False, False, False, logical=True)
        schema_id = schema_registry.add("tls-canonical-value", schema)
        parsed = parse_schema_text(json.dumps(schema), "tls-canonical")
        rng = random.Random(3)
        records = [frame(schema_id, encode_datum(canonical_record(config, rng, False, False, False, logical=True),
                                                 parsed)) for _ in range(50)]
        cases = [("tls", config, False)]
        rows = run_fast_path(env, [records], cases)
        assert check_fast_implies_accept(0, records, rows[0], cases) == len(records)
        assert f"GET /schemas/ids/{schema_id}" in gateway.forwarded and not gateway.refused
    finally:
        gateway.stop()
