"""The shared vectors of AvroFields (tests/streaming/data/avro-fields.tsv, read by
jobs/streaming/jvm-test/pwevent/flink/avro/AvroFieldsTest.java) against the reference decoding: every
projection a vector says AvroFields renders is the projection, onto its field paths, of the object
jobs/common/avro_format.py decodes from the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pwevent.jobs.common.avro_format import decode_datum
from pwevent.jobs.common.avro_schema import parse_schema_text, writer_schema

VECTORS = Path(__file__).parent / "data" / "avro-fields.tsv"


def projection(obj: dict[str, Any], paths: list[list[str]]) -> dict[str, Any]:
    """The members of `obj` at `paths` (a path whose keys are not all there is left out)."""
    out: dict[str, Any] = {}
    for keys in paths:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            node = out
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value
    return out


def test_every_rendered_vector_is_the_projection_of_the_reference_decoding() -> None:
    rows = [line.split("\t") for line in VECTORS.read_text().splitlines() if line and not line.startswith("#")]
    rendered = 0
    for comment, schema_hex, paths, datum_hex, expected in rows:
        if expected == "-":
            continue
        rendered += 1
        schema = parse_schema_text(bytes.fromhex(schema_hex).decode(), comment)
        decoded = decode_datum(bytes.fromhex(datum_hex), writer_schema(schema), comment)
        assert json.loads(expected) == projection(decoded, [p.split(".") for p in paths.split(",")]), comment
    assert rendered >= 15
