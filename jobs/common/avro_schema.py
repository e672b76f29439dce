"""Avro writer schemas from text (docs/formats.md, "Input formats"): what the configuration checks
at load (`schema_file`) and what the decoder parses (jobs/common/avro_format.py), with errors that
say where the schema came from."""

from __future__ import annotations

import json

import fastavro
from fastavro.types import Schema


def load_schema_file(path: str) -> Schema:
    """The parsed writer schema of an `.avsc` file; ValueError naming the file and what is wrong."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise ValueError(f"cannot read schema_file {path}: {err.strerror}") from None
    return parse_schema_text(text, f"schema_file {path}")


def parse_schema_text(text: str, where: str) -> Schema:
    """An Avro schema's JSON text, parsed; ValueError saying `where` it came from otherwise."""
    try:
        return fastavro.parse_schema(json.loads(text))
    except Exception as err:  # fastavro raises several kinds (SchemaParseException, KeyError, TypeError ...)
        raise ValueError(f"{where} is not an Avro schema: {type(err).__name__}: {err}") from None
