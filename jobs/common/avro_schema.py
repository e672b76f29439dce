"""Avro writer schemas from text (docs/formats.md, "Input formats"): what the configuration checks
at load (`schema_file`) and what the decoder parses (jobs/common/avro_format.py), with errors that
say where the schema came from."""

from __future__ import annotations

import json
from dataclasses import dataclass
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


def zero_width_items(schema: Schema) -> bool:
    """Whether a parsed schema has an array whose items encode to no bytes (null, a fixed of size 0, a
    record of only such fields): its block counts bound nothing, so a datum of a few bytes could
    claim 2^63 items for the decoder to build. Maps cannot: every entry has a key."""
    named: dict[str, Any] = {}

    def collect(node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                collect(branch)
        elif isinstance(node, dict):
            if node.get("type") in ("record", "error", "fixed", "enum") and "name" in node:
                named[str(node["name"])] = node
            for field in node.get("fields", []) if isinstance(node.get("fields"), list) else []:
                if isinstance(field, dict):
                    collect(field.get("type"))
            for key in ("items", "values"):
                collect(node.get(key))
            if isinstance(node.get("type"), (dict, list)):
                collect(node["type"])

    def zero(node: Any, enclosing: frozenset[str]) -> bool:
        if isinstance(node, str):
            if node == "null":
                return True
            return node in named and node not in enclosing and zero(named[node], enclosing)
        if not isinstance(node, dict):
            return False  # a union: its branch index takes a byte
        kind = node.get("type")
        if kind == "null":
            return True
        if kind == "fixed":
            return node.get("size") == 0
        if kind in ("record", "error"):
            inner = enclosing | {str(node.get("name"))}
            return all(isinstance(f, dict) and zero(f.get("type"), inner) for f in node.get("fields", []))
        return isinstance(kind, (dict, str)) and kind not in ("array", "map", "enum") and zero(kind, enclosing)

    def arrays(node: Any) -> bool:
        if isinstance(node, list):
            return any(arrays(branch) for branch in node)
        if not isinstance(node, dict):
            return False
        kind = node.get("type")
        if kind == "array":
            return zero(node.get("items"), frozenset()) or arrays(node.get("items"))
        if kind == "map":
            return arrays(node.get("values"))
        if kind in ("record", "error"):
            return any(isinstance(f, dict) and arrays(f.get("type")) for f in node.get("fields", []))
        return isinstance(kind, (dict, list)) and arrays(kind)

    collect(schema)
    return arrays(schema)


@dataclass(frozen=True)
class WriterSchema:
    """A parsed writer schema and what its shape means for decoding, found once per schema rather
    than once per datum: `recursive` (datums may nest as deep as their bytes allow) and
    `zero_width_items` (an array whose item counts bound nothing)."""

    parsed: Schema
    recursive: bool
    zero_width_items: bool


def writer_schema(parsed: Schema) -> WriterSchema:
    """A parsed schema with its shape judged (`recursive`, `zero_width_items`)."""
    return WriterSchema(parsed, recursive(parsed), zero_width_items(parsed))
