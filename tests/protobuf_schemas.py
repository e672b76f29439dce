"""Protobuf schemas and records for the tests and the benchmark: `.proto` texts, their descriptor sets
written as `protoc --descriptor_set_out --include_imports` writes them (protoc from grpcio-tools), and
messages encoded by the protobuf runtime from plain values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message

from pwevent.jobs.common.protobuf_schema import compile_schema, descriptor_pool_of

#: A nested event: the user and reading in a nested message, the time a well-known Timestamp, and
#: fields of every other kind around them (repeated, map, enum, wrapper, oneof). Messages: [0] Meta,
#: [1] Reading, [1, 0] Reading.Payload.
EVENT_PROTO = """
syntax = "proto3";
package sensors;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Meta {
  google.protobuf.Timestamp ts = 1;
}

message Reading {
  message Payload {
    string user_id = 1;
    optional int32 reading = 2;
    Kind kind = 3;
    repeated string tags = 4;
    map<string, int64> counts = 5;
    google.protobuf.StringValue note = 6;
    oneof where {
      string site = 7;
      int32 zone = 8;
    }
  }
  enum Kind {
    KIND_UNSPECIFIED = 0;
    WEB = 1;
    APP = 2;
  }
  Meta meta = 1;
  Payload payload = 2;
}
"""
#: The field paths of EVENT_PROTO's event (a cells domain reads `reading`).
EVENT_FIELDS = {"user": "payload.user_id", "time": "meta.ts", "value": "payload.reading"}
#: A message without the reading, and one whose user is a double: other subjects of the registry.
NO_READING_PROTO = """
syntax = "proto3";
package other;
message Meta { int64 ts = 1; }
message Payload { string user_id = 1; }
message NoReading { Meta meta = 1; Payload payload = 2; }
"""
DOUBLE_USER_PROTO = """
syntax = "proto3";
package odd;
message Meta { int64 ts = 1; }
message Payload { double user_id = 1; int32 reading = 2; }
message DoubleUser { Meta meta = 1; Payload payload = 2; }
"""
#: Requirement records: fixed (w, epsilon) or dynamic (backward, forward) in one message type.
REQUIREMENT_PROTO = """
syntax = "proto3";
package prefs;
import "google/protobuf/timestamp.proto";
message Window { int32 w = 1; double epsilon = 2; }
message Requirement {
  string user = 1;
  google.protobuf.Timestamp time = 2;
  optional int32 w = 3;
  optional double epsilon = 4;
  Window backward = 5;
  Window forward = 6;
}
"""


class Messages:
    """The message types of a `.proto` text, compiled once."""

    def __init__(self, text: str) -> None:
        self.files = compile_schema(text, "a test schema")
        self.pool: descriptor_pool.DescriptorPool = descriptor_pool_of(self.files, "a test schema")

    def new(self, name: str) -> Message:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))()

    def write_descriptor_set(self, path: Path) -> Path:
        path.write_bytes(self.files.SerializeToString())
        return path


def _fill(message: Message, values: dict[str, Any]) -> Message:
    for name, value in values.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        if field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
            getattr(message, name).FromMilliseconds(value)
        elif field.message_type is not None and field.message_type.full_name.endswith("Value") \
                and field.message_type.full_name.startswith("google.protobuf."):
            getattr(message, name).value = value
        elif isinstance(value, dict) and not field.message_type.GetOptions().map_entry:
            _fill(getattr(message, name), value)
        elif isinstance(value, dict):
            getattr(message, name).update(value)
        elif isinstance(value, list):
            getattr(message, name).extend(value)
        else:
            setattr(message, name, value)
    return message


def encode(messages: Messages, name: str, values: dict[str, Any]) -> bytes:
    """The Protobuf encoding of message `name` with `values` (nested messages as dicts, Timestamps as
    epoch ms, wrappers as their value)."""
    return _fill(messages.new(name), values).SerializeToString()


def reading(user: Any, time_ms: int, value: int | None, **payload: Any) -> dict[str, Any]:
    """The values of a `sensors.Reading`; `value` None leaves the optional reading unset."""
    fields = {"user_id": user, **({} if value is None else {"reading": value}), **payload}
    return {"meta": {"ts": time_ms}, "payload": fields}
