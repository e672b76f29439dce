"""The release topic's formats (docs/formats.md, "Release"; docs/consuming.md): a release record's
bytes as the job writes them (`ReleaseEncoder`) and as pwevent's readers read them back
(`ReleaseDecoder`: `pwevent tail`, `pwevent audit --release-topic`, the start guard).

- `json` (the default): the record as one compact JSON object, UTF-8 (jobs/common/jsonl.py).
- `json-confluent`: the same JSON after the Confluent frame (byte 0, the 4-byte id of the release's
  JSON Schema as registered).
- `avro-confluent`: the Avro binary datum of the release's Avro schema after the Confluent frame.

Both registered formats register their schema (jobs/common/release_schema.py) when the job is built,
under subject `<releases topic>-value` (Confluent's TopicNameStrategy); the registry gives the id of
an identical schema it already holds. Every format is deterministic: the same record is the same
bytes, and the release writer (pwevent.flink.release.ReleaseWriter) keeps and re-sends a slot's bytes
as they were first written. The key is the same in every format: the slot number as UTF-8 decimal text.

The decoder reads any of the three, whatever `release.format` says now (a topic whose format changed
stays readable; an Avro release needs `release.schema_registry` for its writer schema).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import fastavro
import orjson
from fastavro.types import Schema

from pwevent.jobs.common.avro_format import (
    CONFLUENT_FRAME_BYTES,
    CONFLUENT_MAGIC,
    RegistryUnavailable,
    SchemaRegistry,
    decode_datum,
    encode_datum,
    frame,
)
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.release_schema import avro_datum, avro_schema, from_avro, json_schema
from pwevent.jobs.streaming.settings import ReleaseSettings

#: Confluent's TopicNameStrategy: a topic's value schema is registered under this suffix.
VALUE_SUBJECT_SUFFIX = "-value"


def value_subject(topic: str) -> str:
    """The subject of `topic`'s value schema (TopicNameStrategy)."""
    return topic + VALUE_SUBJECT_SUFFIX


@dataclass(frozen=True)
class ReleaseEncoder:
    """A release record -> the bytes of its Kafka value in `format`; `schema_id` is the registered
    schema's id (the registered formats only)."""

    format: str = "json"
    schema_id: int | None = None

    @cached_property
    def _avro(self) -> Schema:
        return fastavro.parse_schema(avro_schema())

    def encode(self, record: dict[str, Any]) -> bytes:
        if self.format == "json":
            return dumps(record).encode("utf-8")
        assert self.schema_id is not None
        if self.format == "json-confluent":
            return frame(self.schema_id, dumps(record).encode("utf-8"))
        return frame(self.schema_id, encode_datum(avro_datum(record), self._avro))


def release_encoder(settings: ReleaseSettings, topic: str) -> ReleaseEncoder:
    """The encoder of `settings.format` for release topic `topic`, its schema registered first
    (RegistryUnavailable when the registry does not answer or refuses it)."""
    if settings.format == "json":
        return ReleaseEncoder()
    assert settings.schema_registry is not None
    schema, kind = (avro_schema(), "AVRO") if settings.format == "avro-confluent" else (json_schema(), "JSON")
    return ReleaseEncoder(settings.format, SchemaRegistry(settings.schema_registry).register(
        value_subject(topic), schema, kind))


class NotARelease(ValueError):
    """Bytes that are no release record of any format."""


@dataclass
class ReleaseDecoder:
    """A release topic's value (any of the formats) -> the release record, as the JSON form has it."""

    registry: SchemaRegistry | None = None

    def decode(self, raw: bytes) -> dict[str, Any]:
        """The record; NotARelease for bytes that are none; RegistryUnavailable for an Avro release
        without a registry to ask for its schema, or a registry that does not answer."""
        if raw[:1] != CONFLUENT_MAGIC:
            return _object(raw)
        if len(raw) < CONFLUENT_FRAME_BYTES:
            raise NotARelease("shorter than the Confluent frame")
        payload = raw[CONFLUENT_FRAME_BYTES:]
        if payload[:1] == b"{":  # json-confluent: an Avro release starts with schema_version's varint
            return _object(payload)
        (schema_id,) = struct.unpack(">I", raw[1:CONFLUENT_FRAME_BYTES])
        if self.registry is None:
            raise RegistryUnavailable(f"an Avro release (schema id {schema_id}) cannot be read without "
                                      "release.schema_registry")
        try:
            return from_avro(decode_datum(payload, self.registry.schema(schema_id), f"schema {schema_id}"))
        except ValueError as err:  # Rejected: an unknown id, bytes that are not a datum of it
            raise NotARelease(str(err)) from None


def release_decoder(settings: ReleaseSettings) -> ReleaseDecoder:
    """The decoder of the release topic `settings` describe (its registry, if any)."""
    registry = settings.schema_registry
    return ReleaseDecoder(None if registry is None else SchemaRegistry(registry))


def _object(raw: bytes) -> dict[str, Any]:
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise NotARelease(f"not JSON ({err})") from None
    if not isinstance(record, dict):
        raise NotARelease("not a JSON object")
    return record
