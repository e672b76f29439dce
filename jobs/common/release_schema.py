"""The release record's fields, declared once (docs/formats.md, "Release"), and the two schemas
rendered from them: the JSON Schema (`docs/schemas/release.schema.json`, also what the release
format `json-confluent` registers) and the Avro schema (`docs/schemas/release.avsc`, what
`avro-confluent` registers). A new release field is one entry of `release_fields()`; every format carries it.

`python -m pwevent.jobs.common.release_schema --write` renders both files, `--check` fails when a
committed one differs from a fresh rendering (tests/jobs/test_release_schema.py runs it).

How the two encodings differ, and only there: a `Timestamp` is ISO-8601 text in JSON and Avro's
`timestamp-millis` (a long) in Avro; an optional field is left out of a JSON record and null in an
Avro one; `Variants` (the domain) is JSON Schema's `oneOf` over objects tagged by `type`, and in Avro
one record with the tag and every variant's fields, null where a variant has none.
`avro_datum` and `from_avro` convert a JSON record to an Avro datum and back, field by field.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from pwevent.jobs.common.config import STATISTIC_NAME
from pwevent.jobs.common.slots import iso, parse_time_ms
from pwevent.operators.family import FAMILIES
from pwevent.operators.registry import REGISTRY

#: The release record's version (docs/formats.md, Release): 2 added `schema_version`, `domain` and
#: `interval`; 3 added `kept_share`; 4 made a rescaled publication's `threshold` the mean cell's error;
#: a release without `schema_version` is of version 1.
RELEASE_SCHEMA_VERSION = 4
#: The versions whose records have this schema's fields: a release topic of a job upgraded from one
#: to the next holds both (docs/operations.md, "Savepoints, upgrades and rescaling").
SCHEMA_VERSIONS = (3, 4)
#: The committed renderings (`--write`, `--check`).
SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
JSON_SCHEMA_FILE, AVRO_SCHEMA_FILE = SCHEMAS / "release.schema.json", SCHEMAS / "release.avsc"
#: The Avro schema's full name is AVRO_NAMESPACE.Release.
AVRO_NAMESPACE = "pwevent"


class Presence(Enum):
    """Whether a field is in every record: `ALWAYS`; `NULLABLE`, in every record, null allowed;
    `OPTIONAL`, left out of a JSON record that has no value for it (null in Avro)."""

    ALWAYS = "always"
    NULLABLE = "nullable"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class Integer:
    """An integer at least `minimum`; `one_of`: only these values (a version)."""

    minimum: int | None = None
    one_of: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Number:
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class Text:
    """Text; `pattern`: a regular expression it matches (JSON Schema only)."""

    pattern: str | None = None


@dataclass(frozen=True)
class Timestamp:
    """A moment, to the millisecond: ISO-8601 UTC text in JSON, `timestamp-millis` in Avro."""


@dataclass(frozen=True)
class Choice:
    """One of `values`: a JSON Schema enum; an Avro string (a new value stays readable by old readers)."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class ListOf:
    item: Kind
    min_items: int | None = None
    max_items: int | None = None


@dataclass(frozen=True)
class MapOf:
    """An object of text keys to `value`s: additionalProperties in JSON Schema, an Avro map."""

    value: Kind


@dataclass(frozen=True)
class Record:
    """A nested object of `fields` (all of them present); `name` is its Avro record's name."""

    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Variants:
    """An object tagged by `tag`, with the fields of its variant (`variants`: tag value -> fields)."""

    name: str
    tag: str
    variants: Mapping[str, tuple[Field, ...]]


Kind = Integer | Number | Text | Timestamp | Choice | ListOf | MapOf | Record | Variants


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    description: str = ""
    presence: Presence = Presence.ALWAYS


_BBOX = Record("BoundingBox", tuple(Field(n, Number()) for n in ("min_lat", "max_lat", "min_lon", "max_lon")))
_DOMAIN = Variants("Domain", "type", {
    "binary": (),
    "cells": (Field("d", Integer(minimum=1)),),
    "categories": (
        Field("values", ListOf(Text(), min_items=1), "cell j holds values[j]; with other, the last is the other cell"),
        Field("aliases", MapOf(Text()), "another spelling -> the name of its cell", Presence.OPTIONAL),
        Field("case", Choice(("fold",)), "names, aliases and values compared after Unicode case folding (exact "
              "when absent)", Presence.OPTIONAL),
        Field("other", Text(), "the last cell's name: every other string", Presence.OPTIONAL)),
    "ranges": (
        Field("edges", ListOf(Number(), min_items=2), "cell j holds edges[j] <= value < edges[j + 1]"),
        Field("other", Text(), "the last cell's name: every number outside the edges", Presence.OPTIONAL)),
    "grid": (Field("rows", Integer(minimum=1)), Field("cols", Integer(minimum=1)), Field("bbox", _BBOX)),
})


def release_fields() -> tuple[Field, ...]:
    """The release's fields, in the order a release record has them (read when asked: a mechanism
    registered later is in the `mechanism` choice)."""
    return (
        Field("schema_version", Integer(one_of=SCHEMA_VERSIONS),
              "this record's version: 2 added schema_version, domain and interval, 3 added kept_share, 4 made a "
              "rescaled publication's threshold the mean cell's error (a release without schema_version is of "
              "version 1); this job writes 4, and 3 has the same fields"),
        Field("slot", Integer(minimum=1), "slot number; slot 1 starts at the configured origin"),
        Field("statistic", Text(STATISTIC_NAME), "with several statistics under one budget (the configuration's "
              "statistics:), the name of the statistic this record releases: one record per statistic and slot; absent "
              "with one statistic (docs/formats.md, Release)", Presence.OPTIONAL),
        Field("start", Timestamp(), "inclusive start of the slot (UTC)"),
        Field("end", Timestamp(), "exclusive end of the slot (UTC)"),
        Field("mechanism", Choice(REGISTRY.names()), "the configured mechanism (operators/registry.py's names)"),
        Field("family", Choice(FAMILIES), "Adaptive only: the budget rule in force at this slot, even spending "
              "(Uniform: E_i/w_i published every slot), absorption (PBA), distribution (PBD) or bursts (Sample: one "
              "slot every narrowest window P, each user's window budget in ceil(w_i / P) parts, a probe share "
              "first), chosen from earlier releases (operators/family.py's FAMILIES; docs/mechanisms.md "
              "section 14)", Presence.OPTIONAL),
        Field("kind", Choice(("publish", "skip", "nullify")),
              "publish: fresh noisy counts; skip and nullify: the last release repeated"),
        Field("counts", ListOf(Integer(), min_items=1),
              "released histogram, one integer per cell of the domain (may be negative: noise)"),
        Field("population", Integer(minimum=0), "registered users at this slot"),
        Field("epsilon_calculation", Number(), "budget OBS chose for the dissimilarity", Presence.NULLABLE),
        Field("epsilon_publication", Number(), "budget OBS chose for the publication", Presence.NULLABLE),
        Field("threshold", Number(), "sqrt of the publication error the dissimilarity was compared with: OBS's "
              "expected error per cell, in a cell holding every registered user; for a rescaled publication "
              "(kept_share not null) of version 4, in a cell holding the mean cell's share of them (docs/formats.md, "
              "Release)",
              Presence.NULLABLE),
        Field("kept_share", Number(exclusive_minimum=0, maximum=1),
              "a rescaled publication (Adaptive's even spending and bursts): the public expected kept share its noisy "
              "counts were divided by; null when the release is not rescaled (docs/formats.md, Release)",
              Presence.NULLABLE),
        Field("dissimilarity", Number(), "noisy dissimilarity per cell", Presence.NULLABLE),
        Field("noise", Text(), "the randomness used (opendp-discrete-laplace in production)"),
        Field("domain", _DOMAIN, "what the cells are, as the configuration's domain: section states it "
              "(docs/formats.md, Release)"),
        Field("smoothed", ListOf(Number(minimum=0), min_items=1),
              "with `postprocess: kalman` (the default): the releases so far filtered by a causal Kalman filter bank "
              "(operators/postprocess.py), clipped to [0, population]; post-processing of public releases, no extra "
              "privacy cost", Presence.OPTIONAL),
        Field("interval", ListOf(ListOf(Number(minimum=0), min_items=2, max_items=2), min_items=1),
              "with `smoothed`: per cell a nominal 95% interval [low, high] around it, from the chosen filter's "
              "posterior variance, clipped to [0, population]; public quantities only (docs/formats.md, Release)",
              Presence.OPTIONAL),
    )

DESCRIPTION = (
    "One message per slot on the release topic (Kafka key: the slot number as a decimal string), in the "
    "configured release.format (docs/formats.md, Release). Each slot's record is written once the job's "
    "checkpoint holding it has completed: every record of a slot, committed or aborted, carries the same bytes "
    "(read_committed shows each slot once). Also one line per slot of `pwevent replay --releases-out`.")


# --- JSON Schema -----------------------------------------------------------------------------------

def _json_kind(kind: Kind) -> dict[str, Any]:
    if isinstance(kind, Integer):
        if kind.one_of is not None:
            return {"enum": list(kind.one_of)}
        return {"type": "integer", **({"minimum": kind.minimum} if kind.minimum is not None else {})}
    if isinstance(kind, Number):
        bounds = {"minimum": kind.minimum, "exclusiveMinimum": kind.exclusive_minimum, "maximum": kind.maximum}
        return {"type": "number", **{k: v for k, v in bounds.items() if v is not None}}
    if isinstance(kind, Text):
        return {"type": "string", **({"pattern": kind.pattern} if kind.pattern is not None else {})}
    if isinstance(kind, Timestamp):
        return {"type": "string", "format": "date-time"}
    if isinstance(kind, Choice):
        return {"enum": list(kind.values)}
    if isinstance(kind, ListOf):
        counts = {"minItems": kind.min_items, "maxItems": kind.max_items}
        return {"type": "array", "items": _json_kind(kind.item), **{k: v for k, v in counts.items() if v is not None}}
    if isinstance(kind, MapOf):
        return {"type": "object", "additionalProperties": _json_kind(kind.value)}
    if isinstance(kind, Record):
        return _json_object(kind.fields)
    return {"oneOf": [_json_object((Field(kind.tag, Choice((tag,))), *fields)) for tag, fields in
                      kind.variants.items()]}


def _json_field(item: Field) -> dict[str, Any]:
    schema = _json_kind(item.kind)
    if item.presence is Presence.NULLABLE:
        schema = {**schema, "type": [schema["type"], "null"]}
    return {**schema, **({"description": item.description} if item.description else {})}


def _json_object(fields: tuple[Field, ...]) -> dict[str, Any]:
    properties = {}
    for item in fields:
        schema = _json_field(item)
        if isinstance(item.kind, Choice) and len(item.kind.values) == 1:
            schema = {"const": item.kind.values[0]}
        properties[item.name] = schema
    return {"type": "object", "additionalProperties": False,
            "required": [f.name for f in fields if f.presence is not Presence.OPTIONAL], "properties": properties}


def json_schema() -> dict[str, Any]:
    """The release's JSON Schema (draft 2020-12)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://pwevent.example/schemas/release.schema.json",
            "title": "pwevent release", "description": DESCRIPTION, **_json_object(release_fields())}


# --- Avro ------------------------------------------------------------------------------------------

def _avro_kind(kind: Kind) -> Any:
    if isinstance(kind, Integer):
        return "int" if kind.one_of is not None else "long"
    if isinstance(kind, Number):
        return "double"
    if isinstance(kind, Text | Choice):
        return "string"
    if isinstance(kind, Timestamp):
        return {"type": "long", "logicalType": "timestamp-millis"}
    if isinstance(kind, ListOf):
        return {"type": "array", "items": _avro_kind(kind.item)}
    if isinstance(kind, MapOf):
        return {"type": "map", "values": _avro_kind(kind.value)}
    if isinstance(kind, Record):
        return {"type": "record", "name": kind.name, "fields": [_avro_field(f) for f in kind.fields]}
    members = [_avro_field(Field(kind.tag, Text()))]
    members += [_avro_field(Field(f.name, f.kind, f.description, Presence.OPTIONAL)) for f in _variant_fields(kind)]
    return {"type": "record", "name": kind.name,
            "doc": f"one of {', '.join(kind.variants)} by `{kind.tag}`, null where that kind has no such field",
            "fields": members}


def _variant_fields(kind: Variants) -> tuple[Field, ...]:
    """Every variant's fields, a name shared by two variants (of one kind) once: the Avro record's members."""
    seen: dict[str, Field] = {}
    for fields in kind.variants.values():
        for item in fields:
            seen.setdefault(item.name, item)
    return tuple(seen.values())


def _avro_field(item: Field) -> dict[str, Any]:
    kind = _avro_kind(item.kind)
    out: dict[str, Any] = {"name": item.name}
    if item.presence is Presence.ALWAYS:
        out["type"] = kind
    else:
        out["type"] = ["null", kind]
        out["default"] = None
    return {**out, **({"doc": item.description} if item.description else {})}


def avro_schema() -> dict[str, Any]:
    """The release's Avro schema (record `pwevent.Release`)."""
    return {"type": "record", "name": "Release", "namespace": AVRO_NAMESPACE, "doc": DESCRIPTION,
            "fields": [_avro_field(f) for f in release_fields()]}


def _to_avro(kind: Kind, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(kind, Timestamp):
        return datetime.fromtimestamp(parse_time_ms(value) / 1000, UTC)
    if isinstance(kind, ListOf):
        return [_to_avro(kind.item, v) for v in value]
    if isinstance(kind, MapOf):
        return {k: _to_avro(kind.value, v) for k, v in value.items()}
    if isinstance(kind, Record):
        return _datum(kind.fields, value)
    if isinstance(kind, Variants):
        return {kind.tag: value[kind.tag], **_datum(_variant_fields(kind), value)}
    return value


def _datum(fields: tuple[Field, ...], record: Mapping[str, Any]) -> dict[str, Any]:
    return {f.name: _to_avro(f.kind, record.get(f.name)) for f in fields}


def avro_datum(record: Mapping[str, Any]) -> dict[str, Any]:
    """A release record (the JSON form, jobs/common/release.py) as the datum of `avro_schema()`."""
    return _datum(release_fields(), record)


def _from_avro(kind: Kind, value: Any) -> Any:
    if isinstance(kind, Timestamp):
        return iso(value) if isinstance(value, int) else value
    if isinstance(kind, ListOf) and isinstance(value, list):
        return [_from_avro(kind.item, v) for v in value]
    if isinstance(kind, MapOf) and isinstance(value, dict):
        return {k: _from_avro(kind.value, v) for k, v in value.items()}
    if isinstance(kind, Record) and isinstance(value, dict):
        return _record(kind.fields, value)
    if isinstance(kind, Variants) and isinstance(value, dict):
        return {kind.tag: value.get(kind.tag), **_record(_variant_fields(kind), value)}
    return value


def _record(fields: tuple[Field, ...], datum: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for item in fields:
        if item.name in datum:
            out[item.name] = _from_avro(item.kind, datum[item.name])
        elif item.presence is Presence.NULLABLE:
            out[item.name] = None
    return out


def from_avro(datum: Mapping[str, Any]) -> dict[str, Any]:
    """A decoded Avro release (jobs/common/avro_format.decode_datum's object: timestamps as epoch ms, null
    members left out) as the JSON record it was written from: the inverse of `avro_datum`."""
    return _record(release_fields(), datum)


# --- the committed renderings ----------------------------------------------------------------------

def rendered() -> dict[Path, str]:
    """The text of each committed schema file."""
    return {path: json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
            for path, schema in ((JSON_SCHEMA_FILE, json_schema()), (AVRO_SCHEMA_FILE, avro_schema()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the release's JSON Schema and Avro schema into docs/schemas "
                                     "(--write) or check that the committed files are the rendering (--check).")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    stale = [path for path, text in rendered().items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.write:
        for path in stale:
            path.write_text(rendered()[path], encoding="utf-8")
        return 0
    for path in stale:
        print(f"{path} is not the rendering of jobs/common/release_schema.py: run "
              "python -m pwevent.jobs.common.release_schema --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
