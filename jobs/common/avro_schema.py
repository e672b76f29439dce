"""Avro writer schemas from text (docs/formats.md, "Input formats"): what the configuration checks
at load (`schema_file`) and what the decoder parses (jobs/common/avro_format.py), with errors that
say where the schema came from."""

from __future__ import annotations

import json
from typing import Any

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


def recursive(schema: Schema) -> bool:
    """Whether a parsed schema refers to a named type inside that type's own definition (a linked
    list, a tree): its datums can nest as deep as their bytes allow."""

    def walk(node: Any, enclosing: frozenset[str]) -> bool:
        if isinstance(node, str):
            return node in enclosing
        if isinstance(node, list):
            return any(walk(branch, enclosing) for branch in node)
        if not isinstance(node, dict):
            return False
        kind = node.get("type")
        if kind == "record" or kind == "error":
            inner = enclosing | {str(node.get("name"))}
            return any(walk(f.get("type"), inner) for f in node.get("fields", []) if isinstance(f, dict))
        if kind == "array":
            return walk(node.get("items"), enclosing)
        if kind == "map":
            return walk(node.get("values"), enclosing)
        return isinstance(kind, (dict, list)) and walk(kind, enclosing)

    return walk(schema, frozenset())
