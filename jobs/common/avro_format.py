"""The Avro input formats (docs/formats.md, "Input formats"; docs/streaming.md, "Parsing"): a record's
bytes -> the object the field paths read, which then goes through the same rules as a JSON record's
(jobs/common/records.py is the one definition of validity; this module only decodes).

- `avro-confluent`: the Confluent wire format, byte 0, a 4-byte big-endian schema id, then the Avro
  binary encoding of one datum under that writer schema, which a Schema Registry serves by id
  (`GET /schemas/ids/{id}`, cached for the run). An id the registry does not know is
  `unknown_schema`; a registry that does not answer is not the record's fault: the request is
  retried with backoff for `retry_for`, then `RegistryUnavailable` stops the run (the job's task
  fails and Flink restarts it; the replay stops).
- `avro`: the Avro binary encoding of one datum under the writer schema of the configured `.avsc`
  file, no frame.

Bytes that do not decode (truncated, a wrong magic byte, bytes left over after the datum, a schema
whose top level is not a record, a timestamp outside what a datetime holds) are `undecodable`. The
decoded record becomes the object a JSON record would have been: records and maps are objects,
`timestamp-millis` / `timestamp-micros` (and their `local-` forms) are epoch milliseconds (micros
floored), `uuid` a string, a union its branch's value, and a member that is null (a union's null
branch, Avro's only way to leave a field out) absent: the field rules treat it as missing, and an
optional member of a requirement (`backward` of a fixed one) as not given. A schema that lacks a
mapped field therefore gives `missing_field`, a value of the wrong type `mistyped_field`, exactly as
for JSON.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import ssl
import struct
import time
import urllib.error
import urllib.request
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any

import fastavro
import fastavro._read_py as fastavro_read_py
from fastavro.schema import to_parsing_canonical_form
from fastavro.types import Schema

from pwevent.jobs.common.avro_schema import WriterSchema, load_schema_file, parse_schema_text, writer_schema
from pwevent.jobs.common.config import InputFormat, SchemaRegistrySection
from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.common.reasons import Reason, Rejected

#: The Avro input formats (jobs/common/config.py `INPUT_FORMATS`).
AVRO_FORMATS = ("avro-confluent", "avro")
#: The Confluent wire format's first byte, and the frame's length (that byte and a 4-byte schema id).
CONFLUENT_MAGIC, CONFLUENT_FRAME_BYTES = b"\x00", 5
#: Backoff between unanswered registry requests: first wait, factor, longest wait (seconds).
BACKOFF_FIRST_S, BACKOFF_FACTOR, BACKOFF_MAX_S = 0.1, 2.0, 5.0
#: Schema ids remembered as unknown (bounded: a stream of random frames cannot grow it without end).
UNKNOWN_IDS_KEPT = 1024
#: An Avro object container file starts with these bytes (the Avro specification, "Object Container Files").
CONTAINER_MAGIC = b"Obj\x01"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


class RegistryUnavailable(Exception):
    """The Schema Registry did not answer for `retry_for`: no record is judged; the run fails. Not a
    ValueError, so no reject boundary takes it for a bad record."""


def _plain(value: Any) -> Any:
    """A decoded Avro value as the JSON object model: timestamps as epoch ms, uuids as strings, and a
    member whose value is null (a union's null branch: Avro's only way to leave a field out) absent."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return (moment - _EPOCH) // _MS
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, date):
        return (datetime(value.year, value.month, value.day, tzinfo=UTC) - _EPOCH) // _MS
    return value


def decode_datum(raw: bytes, schema: WriterSchema, what: str, record: bool = True) -> Any:
    """One Avro datum of `raw` (all of it) under the writer `schema` -> its object (`record`: the
    schema must be a record's; else any value, as a key may be); Rejected `undecodable` when the
    bytes are not exactly one datum (of a record schema)."""
    if schema.zero_width_items:
        raise Rejected(Reason.UNDECODABLE, f"the writer schema of {what} has an array of items that take no bytes"
                       " (null, an empty record or fixed): its item counts bound nothing, so no datum of it is read")
    stream = io.BytesIO(raw)
    # fastavro's compiled reader recurses on the C stack: a datum of a recursive schema nested deep
    # enough (64 KiB of them will do) crashes the interpreter (and a TaskManager in thread mode). Its
    # pure-Python reader raises RecursionError instead, an `undecodable` dead letter below.
    reader = fastavro_read_py.schemaless_reader if schema.recursive else fastavro.schemaless_reader
    try:
        datum = reader(stream, schema.parsed, None)
    except Exception as err:  # truncated, invalid lengths, bad UTF-8, out-of-range timestamps ...
        raise Rejected(Reason.UNDECODABLE, f"not Avro of {what}: {type(err).__name__}: {err}"[:400]) from None
    if stream.tell() != len(raw):
        raise Rejected(Reason.UNDECODABLE, f"{len(raw) - stream.tell()} bytes left after the Avro datum of {what}")
    if record and not isinstance(datum, dict):
        raise Rejected(Reason.UNDECODABLE, f"{what} is not an Avro record schema")
    return _plain(datum)


@dataclass
class SchemaRegistry:
    """A Confluent-compatible Schema Registry client: writer schemas by id, cached for the run; every
    request with the settings' `Authorization` header and TLS context."""

    settings: SchemaRegistrySection
    _schemas: dict[int, WriterSchema] = field(default_factory=dict)
    _unknown: OrderedDict[int, None] = field(default_factory=OrderedDict)
    _tls: ssl.SSLContext | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._tls = self.settings.tls_context()

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """(status, parsed JSON body) of one request, retried with backoff for `retry_for` while the
        registry does not answer or answers 5xx; RegistryUnavailable after that."""
        settings = self.settings
        headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if body is not None:
            headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
        authorization = settings.authorization()
        if authorization is not None:
            headers["Authorization"] = authorization.reveal()
        data = None if body is None else json.dumps(body).encode()
        deadline = time.monotonic() + settings.retry_for_ms / 1000
        wait = BACKOFF_FIRST_S
        while True:
            request = urllib.request.Request(settings.url.rstrip("/") + path, data, headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=settings.timeout_ms / 1000, context=self._tls) as response:
                    return response.status, json.loads(response.read() or b"null")
            except urllib.error.HTTPError as err:
                if err.code < 500:
                    try:
                        return err.code, json.loads(err.read() or b"null")
                    except ValueError:
                        return err.code, None
                problem = f"HTTP {err.code}"
            except (OSError, ValueError) as err:  # refused, timed out, reset, a body that is not JSON
                problem = f"{type(err).__name__}: {err}"
            if time.monotonic() + wait > deadline:
                raise RegistryUnavailable(f"the schema registry {settings.url} did not answer {method} {path} for "
                                          f"{settings.retry_for_ms} ms (schema_registry.retry_for): {problem}")
            time.sleep(wait)
            wait = min(wait * BACKOFF_FACTOR, BACKOFF_MAX_S)

    def registered(self, schema_id: int) -> dict[str, Any]:
        """What the registry holds for `schema_id` (`GET /schemas/ids/{id}`: `schema`, the text,
        `schemaType`, absent for AVRO, and `references`); Rejected `unknown_schema` when it does not
        know the id (404; remembered, bounded)."""
        if schema_id in self._unknown:
            raise Rejected(Reason.UNKNOWN_SCHEMA, f"the schema registry has no schema {schema_id}")
        status, body = self._request("GET", f"/schemas/ids/{schema_id}")
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            if status == 404:
                self._unknown[schema_id] = None
                if len(self._unknown) > UNKNOWN_IDS_KEPT:
                    self._unknown.popitem(last=False)
                raise Rejected(Reason.UNKNOWN_SCHEMA, f"the schema registry has no schema {schema_id}")
            raise RegistryUnavailable(f"the schema registry {self.settings.url} answered HTTP {status} for schema "
                                      f"{schema_id}: {str(body)[:200]}")
        return body

    def schema(self, schema_id: int) -> WriterSchema:
        """The Avro writer schema of `schema_id`; Rejected `unknown_schema` when the registry does not
        know it (404), `undecodable` when it is no Avro schema."""
        if schema_id in self._schemas:
            return self._schemas[schema_id]
        body = self.registered(schema_id)
        if body.get("schemaType", "AVRO") != "AVRO":
            raise Rejected(Reason.UNDECODABLE, f"schema {schema_id} is {body['schemaType']}, not AVRO")
        try:
            parsed = parse_schema_text(body["schema"], f"schema {schema_id} of the registry")
        except ValueError as err:
            raise Rejected(Reason.UNDECODABLE, str(err)[:400]) from None
        self._schemas[schema_id] = found = writer_schema(parsed)
        return found

    def register(self, subject: str, schema: dict[str, Any] | str, schema_type: str = "AVRO") -> int:
        """Register `schema` (an Avro or JSON schema, or the text of one of `schema_type`, e.g. a
        `.proto` file's for PROTOBUF) under `subject` (`POST /subjects/{subject}/versions`) -> its id,
        the one it already has if it is registered (tools, tests: `pwevent produce --register`; the
        job: its release schema; benchmarks)."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        request = {"schema": text} if schema_type == "AVRO" else {"schema": text, "schemaType": schema_type}
        status, body = self._request("POST", f"/subjects/{subject}/versions", request)
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("id"), int):
            raise RegistryUnavailable(f"the schema registry {self.settings.url} refused subject {subject}: HTTP "
                                      f"{status} {str(body)[:200]}")
        return int(body["id"])


@dataclass(frozen=True)
class AvroDecoder:
    """Bytes -> object for one input's `format` (not `json`, which jobs/common/records.py parses)."""

    fields: InputFormat
    registry: SchemaRegistry | None
    schema: WriterSchema | None

    def decode(self, raw: bytes) -> dict[str, Any]:
        """Rejected (`undecodable`, `unknown_schema`) or RegistryUnavailable, else the record's object."""
        if self.schema is not None:
            return decode_datum(raw, self.schema, f"schema_file {self.fields.schema_file}")
        assert self.registry is not None
        return framed_datum(raw, self.registry)


def framed_datum(raw: bytes, registry: SchemaRegistry, record: bool = True) -> Any:
    """The datum of a value in the Confluent wire format, its writer schema from `registry` (`record`
    as `decode_datum`); Rejected `undecodable` or `unknown_schema`, or RegistryUnavailable."""
    if len(raw) < CONFLUENT_FRAME_BYTES or raw[:1] != CONFLUENT_MAGIC:
        what = "shorter than the frame" if len(raw) < CONFLUENT_FRAME_BYTES else f"first byte {raw[0]}, not 0"
        raise Rejected(Reason.UNDECODABLE, f"not the Confluent wire format ({what}: magic byte 0, a 4-byte "
                                           "schema id, the Avro datum)")
    (schema_id,) = struct.unpack(">I", raw[1:CONFLUENT_FRAME_BYTES])
    return decode_datum(raw[CONFLUENT_FRAME_BYTES:], registry.schema(schema_id), f"schema {schema_id}", record)


@lru_cache(maxsize=16)
def registry_client(settings: SchemaRegistrySection) -> SchemaRegistry:
    """The registry client of `settings`, one per settings for the process (its cache with it): an
    input's values and keys share it."""
    return SchemaRegistry(settings)


@lru_cache(maxsize=16)
def decoder(fields: InputFormat) -> AvroDecoder:
    """The decoder of an input's format settings, one per settings for the process (its registry
    cache with it)."""
    if fields.format == "avro":
        assert fields.schema_file is not None
        return AvroDecoder(fields, None, writer_schema(load_schema_file(fields.schema_file)))
    assert fields.format == "avro-confluent" and fields.schema_registry is not None
    return AvroDecoder(fields, registry_client(fields.schema_registry), None)


@dataclass(frozen=True)
class KeyDecoder:
    """Key bytes -> the key of an input with `key_format: avro-confluent` (any Avro schema: a key is
    often a plain string)."""

    registry: SchemaRegistry

    def decode(self, raw: bytes) -> Any:
        """Rejected (`undecodable`, `unknown_schema`) or RegistryUnavailable, else the key's value."""
        return framed_datum(raw, self.registry, record=False)


def key_decoder(fields: InputFormat) -> KeyDecoder:
    """The key decoder of an input with `key_format: avro-confluent`."""
    assert fields.key_format == "avro-confluent" and fields.schema_registry is not None
    return KeyDecoder(registry_client(fields.schema_registry))


def frame(schema_id: int, datum: bytes) -> bytes:
    """A Kafka value in the Confluent wire format."""
    return CONFLUENT_MAGIC + struct.pack(">I", schema_id) + datum


def encode_datum(record: dict[str, Any], schema: Schema) -> bytes:
    """The Avro binary encoding of `record` under `schema` (tools and tests)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def framed_line(value: bytes) -> bytes:
    """One line of a framed-records file (docs/formats.md): the Kafka value in base64."""
    return base64.b64encode(value)


def unframed_line(line: bytes) -> bytes:
    """The Kafka value of a framed-records line; Rejected `undecodable` when it is not base64."""
    try:
        return base64.b64decode(line.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise Rejected(Reason.UNDECODABLE, "a line of a framed-records file is not base64") from None


def container_values(path: str, expected: WriterSchema | None = None) -> Iterator[bytes]:
    """The records of an Avro object container file, each as the Avro binary datum a Kafka value of
    format `avro` holds (the file's writer schema; Avro's binary encoding of a datum is unique).
    ValueError when the file's schema is not `expected` (in Parsing Canonical Form)."""
    with open(path, "rb") as handle:
        reader = fastavro.reader(handle)
        schema = fastavro.parse_schema(reader.writer_schema)
        if expected is not None and to_parsing_canonical_form(schema) != to_parsing_canonical_form(expected.parsed):
            raise ValueError(f"{path}: its writer schema is not the configured schema_file's")
        for record in reader:
            yield encode_datum(record, schema)  # type: ignore[arg-type]


def input_values(path: str, fields: InputFormat) -> Iterator[bytes | KafkaRecord]:
    """The Kafka values an input file holds (`pwevent produce`, the auditor's requirements): its
    non-blank lines (JSON lines); for the Avro and Protobuf formats the values of a framed-records file (a line
    that is not base64 as it is, like any bad line) or, for `avro`, the records of an Avro object
    container file (docs/formats.md, "Input formats"). For an input read as whole records, the
    records of a whole-records file (jobs/common/kafka_record.py; a line that is not one as it is)."""
    if fields.whole_records:
        with open(path, "rb") as handle:
            for raw in handle:
                line = raw.rstrip(b"\n")
                if line.strip():
                    try:
                        yield KafkaRecord.of_line(line)
                    except Rejected:
                        yield line
        return
    if fields.format == "avro":
        with open(path, "rb") as handle:
            container = handle.read(len(CONTAINER_MAGIC)) == CONTAINER_MAGIC
        if container:
            yield from container_values(path, decoder(fields).schema)
            return
    with open(path, "rb") as handle:
        for raw in handle:
            line = raw.rstrip(b"\n")
            if not line.strip():
                continue
            if fields.format == "json":
                yield line
                continue
            try:
                yield unframed_line(line)
            except Rejected:
                yield line
