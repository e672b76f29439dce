"""The Protobuf input formats (docs/formats.md, "Input formats"; docs/streaming.md, "Parsing"): a
record's bytes -> the object the field paths read, which then goes through the same rules as a JSON
record's (jobs/common/records.py is the one definition of validity; this module only decodes).

- `protobuf-confluent`: the Confluent wire format, byte 0, a 4-byte big-endian schema id, the message
  indexes (zigzag varints: their count, then each index; the single byte 0 stands for `[0]`, the
  first message of the file), then the Protobuf encoding of one message. The schema is the `.proto`
  text a Schema Registry serves by id (`GET /schemas/ids/{id}`, cached for the run), compiled to
  descriptors with protoc (grpcio-tools); the indexes name the message in it (`[1, 0]`: the first
  message nested in the file's second message). An id the registry does not know is
  `unknown_schema`; a schema that is no Protobuf schema, does not compile or imports files the
  registry's `references` name, and indexes that name no message, are `undecodable`.
- `protobuf`: the Protobuf encoding of one message, no frame; the message type is `protobuf.message`
  of the descriptor set `protobuf.descriptor_set` (what `protoc --descriptor_set_out` writes, with
  `--include_imports` unless the only imports are Google's well-known types).

Decoding is protobuf's own (`ParseFromString`, the upb runtime): bytes that are not one message of
the type (truncated, a malformed tag or length, invalid UTF-8 in a proto3 string, nested deeper
than protobuf's recursion limit of 100) are `undecodable`; fields the type does not know are
skipped, as every Protobuf reader skips them. The message becomes the object a JSON record would
have been: a message is an object of its fields by their `.proto` names; a field with presence (a
message, `optional`, a `oneof` member, proto2's scalars) that is not set is absent (`missing_field`
for a mapped field), a field without presence (proto3's plain scalars) always has its value (its
default when the writer left it out: `0`, `""`, `false`); a `repeated` field is an array, a `map`
an object (keys as text); an enum its value's name (a number the enum does not name: the number);
`google.protobuf.Timestamp` epoch milliseconds (nanoseconds floored; outside years 1 to 9999,
`undecodable`); the wrappers (`google.protobuf.Int64Value`, `StringValue`, ...) their `value`;
integers of every width Python integers, `bytes` bytes, which no field rule accepts.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from pwevent.jobs.common.avro_format import CONFLUENT_FRAME_BYTES, CONFLUENT_MAGIC, SchemaRegistry
from pwevent.jobs.common.config import InputFormat
from pwevent.jobs.common.protobuf_schema import (
    SCHEMA_FILE,
    WELL_KNOWN_PREFIX,
    compile_schema,
    descriptor_pool_of,
    load_descriptor_set,
    message_type,
)
from pwevent.jobs.common.reasons import Reason, Rejected

#: The Protobuf input formats (jobs/common/config.py `INPUT_FORMATS`).
PROTOBUF_FORMATS = ("protobuf-confluent", "protobuf")
#: Most message indexes a frame may carry (a message nested this deep in its file).
MAX_MESSAGE_INDEXES = 32
TIMESTAMP = "google.protobuf.Timestamp"
WRAPPERS = frozenset(f"google.protobuf.{kind}Value" for kind in
                     ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes"))
#: Seconds of google.protobuf.Timestamp in years 1 to 9999 (its own documented range).
MIN_SECONDS, MAX_SECONDS = -62_135_596_800, 253_402_300_799


@dataclass
class ProtobufSchema:
    """The messages of one schema: message classes by type, built once, and for a registry schema
    the file whose messages the frames' indexes count."""

    pool: descriptor_pool.DescriptorPool
    file: descriptor_pb2.FileDescriptorProto | None = None
    _classes: dict[str, type[Message]] = field(default_factory=dict)
    _indexed: dict[tuple[int, ...], Descriptor] = field(default_factory=dict)

    def message_class(self, descriptor: Descriptor) -> type[Message]:
        found = self._classes.get(descriptor.full_name)
        if found is None:
            found = self._classes[descriptor.full_name] = message_factory.GetMessageClass(descriptor)
        return found

    def indexed(self, indexes: list[int], what: str) -> Descriptor:
        """The message the indexes name (`[i]`: the file's i-th message; `[i, j]`: its j-th nested
        one); Rejected `undecodable` when there is none. Found once per indexes that name one."""
        found = self._indexed.get(tuple(indexes))
        if found is not None:
            return found
        assert self.file is not None
        messages = list(self.file.message_type)
        name = self.file.package
        for depth, index in enumerate(indexes):
            if index >= len(messages):
                raise Rejected(Reason.UNDECODABLE, f"message indexes {indexes} name no message of {what} "
                               f"(index {index} at depth {depth}, of {len(messages)})")
            name = f"{name}.{messages[index].name}" if name else messages[index].name
            messages = list(messages[index].nested_type)
        self._indexed[tuple(indexes)] = found = self.pool.FindMessageTypeByName(name)
        return found


def _timestamp(message: Message) -> int:
    seconds, nanos = message.seconds, message.nanos  # type: ignore[attr-defined]
    if not (MIN_SECONDS <= seconds <= MAX_SECONDS and 0 <= nanos <= 999_999_999):
        raise Rejected(Reason.UNDECODABLE, f"a google.protobuf.Timestamp out of its range ({seconds} s, {nanos} ns)")
    return int(seconds * 1000 + nanos // 1_000_000)


def _scalar(described: FieldDescriptor, value: Any) -> Any:
    if described.type == FieldDescriptor.TYPE_MESSAGE:
        return _object(value)
    if described.type == FieldDescriptor.TYPE_ENUM:
        named = described.enum_type.values_by_number.get(value)
        return value if named is None else named.name
    return value


def _map_key(key: Any) -> str:
    return ("true" if key else "false") if isinstance(key, bool) else str(key)


def _object(message: Message) -> Any:
    """A message as the JSON object model (the module's docstring)."""
    described = message.DESCRIPTOR
    if described.full_name == TIMESTAMP:
        return _timestamp(message)
    if described.full_name in WRAPPERS:
        return message.value  # type: ignore[attr-defined]
    out: dict[str, Any] = {}
    for member in described.fields:
        if member.label == FieldDescriptor.LABEL_REPEATED:
            value = getattr(message, member.name)
            if member.message_type is not None and member.message_type.GetOptions().map_entry:
                entry = member.message_type.fields_by_name["value"]
                out[member.name] = {_map_key(k): _scalar(entry, value[k]) for k in value}
            else:
                out[member.name] = [_scalar(member, item) for item in value]
        elif not member.has_presence or message.HasField(member.name):
            out[member.name] = _scalar(member, getattr(message, member.name))
    return out


def parse_message(raw: bytes, schema: ProtobufSchema, descriptor: Descriptor, what: str) -> dict[str, Any]:
    """The message of type `descriptor` that `raw` (all of it) encodes -> its object; Rejected
    `undecodable` when the bytes are not one."""
    message = schema.message_class(descriptor)()
    try:
        message.ParseFromString(raw)
    except Exception as err:  # DecodeError: truncated, malformed tags, invalid UTF-8, too deep ...
        raise Rejected(Reason.UNDECODABLE, f"not a Protobuf {descriptor.full_name} of {what}: "
                       f"{type(err).__name__}: {err}"[:400]) from None
    return _object(message)  # type: ignore[no-any-return]


def _varint(raw: bytes, at: int) -> tuple[int, int]:
    """The zigzag varint (a 32-bit int, as Confluent writes the indexes) at `at` -> (value, next)."""
    result = 0
    for shift in range(0, 35, 7):
        if at >= len(raw):
            raise Rejected(Reason.UNDECODABLE, "the message indexes run past the value's end")
        byte = raw[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
    raise Rejected(Reason.UNDECODABLE, "a message index longer than a 32-bit varint")


def message_indexes(raw: bytes, at: int) -> tuple[list[int], int]:
    """The message indexes of a Confluent frame from `at` -> (indexes, where the message starts)."""
    count, at = _varint(raw, at)
    if count == 0:
        return [0], at
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise Rejected(Reason.UNDECODABLE, f"{count} message indexes (1 to {MAX_MESSAGE_INDEXES}, or the byte 0)")
    indexes = []
    for _ in range(count):
        index, at = _varint(raw, at)
        if index < 0:
            raise Rejected(Reason.UNDECODABLE, f"a negative message index ({index})")
        indexes.append(index)
    return indexes, at


@dataclass
class ProtobufDecoder:
    """Bytes -> object for one input in a Protobuf format: the registry's schemas by id, or the
    configured message type of a descriptor set."""

    fields: InputFormat
    registry: SchemaRegistry | None
    plain: tuple[ProtobufSchema, Descriptor, str] | None
    _schemas: dict[int, ProtobufSchema | Rejected] = field(default_factory=dict)

    def registry_schema(self, schema_id: int) -> ProtobufSchema:
        """The compiled schema of `schema_id`; Rejected `unknown_schema` (the registry client's) or
        `undecodable` (a schema that is not Protobuf or does not compile: remembered, so protoc runs
        once per schema id)."""
        found = self._schemas.get(schema_id)
        if isinstance(found, Rejected):
            raise found
        if found is not None:
            return found
        assert self.registry is not None
        try:
            self._schemas[schema_id] = found = self._compiled(schema_id, self.registry.registered(schema_id))
        except Rejected as refused:
            if refused.reason is Reason.UNDECODABLE:
                self._schemas[schema_id] = refused
            raise
        return found

    @staticmethod
    def _compiled(schema_id: int, registered: dict[str, Any]) -> ProtobufSchema:
        """The registry's answer for `schema_id`, compiled; Rejected `undecodable` when it cannot be."""
        what = f"schema {schema_id} of the registry"
        if registered.get("schemaType", "AVRO") != "PROTOBUF":
            raise Rejected(Reason.UNDECODABLE, f"{what} is {registered.get('schemaType', 'AVRO')}, not PROTOBUF")
        references = [r for r in registered.get("references") or [] if not str(r.get("name", "")).startswith(
            WELL_KNOWN_PREFIX)]
        if references:
            raise Rejected(Reason.UNDECODABLE, f"{what} imports other schemas of the registry (references "
                           f"{[r.get('name') for r in references]}), which pwevent does not read")
        try:
            files = compile_schema(registered["schema"], what)
            pool = descriptor_pool_of(files, what)
        except ValueError as err:
            raise Rejected(Reason.UNDECODABLE, str(err)[:400]) from None
        return ProtobufSchema(pool, next(proto for proto in files.file if proto.name == SCHEMA_FILE))

    def decode(self, raw: bytes) -> dict[str, Any]:
        """Rejected (`undecodable`, `unknown_schema`) or RegistryUnavailable, else the record's object."""
        if self.plain is not None:
            return parse_message(raw, *self.plain)
        if len(raw) < CONFLUENT_FRAME_BYTES or raw[:1] != CONFLUENT_MAGIC:
            what = "shorter than the frame" if len(raw) < CONFLUENT_FRAME_BYTES else f"first byte {raw[0]}, not 0"
            raise Rejected(Reason.UNDECODABLE, f"not the Confluent wire format ({what}: magic byte 0, a 4-byte "
                                               "schema id, the message indexes, the Protobuf message)")
        (schema_id,) = struct.unpack(">I", raw[1:CONFLUENT_FRAME_BYTES])
        schema = self.registry_schema(schema_id)
        indexes, start = message_indexes(raw, CONFLUENT_FRAME_BYTES)
        what = f"schema {schema_id}"
        return parse_message(raw[start:], schema, schema.indexed(indexes, what), what)


@lru_cache(maxsize=16)
def protobuf_decoder(fields: InputFormat) -> ProtobufDecoder:
    """The decoder of an input's format settings, one per settings for the process (its schema cache
    with it)."""
    if fields.format == "protobuf":
        assert fields.protobuf is not None
        where = f"descriptor set {fields.protobuf.descriptor_set}"
        pool = load_descriptor_set(fields.protobuf.descriptor_set)
        return ProtobufDecoder(fields, None, (ProtobufSchema(pool), message_type(pool, fields.protobuf.message, where),
                                              where))
    assert fields.format == "protobuf-confluent" and fields.schema_registry is not None
    return ProtobufDecoder(fields, SchemaRegistry(fields.schema_registry), None)


def confluent_value(schema_id: int, indexes: list[int], message: bytes) -> bytes:
    """A Kafka value in the Confluent wire format for Protobuf (tools and tests)."""
    def zigzag(n: int) -> bytes:
        n = (n << 1) ^ (n >> 31)
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    head = b"\x00" if indexes == [0] else zigzag(len(indexes)) + b"".join(zigzag(i) for i in indexes)
    return CONFLUENT_MAGIC + struct.pack(">I", schema_id) + head + message
