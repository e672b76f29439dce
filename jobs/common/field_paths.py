"""Field paths: where a field mapping of the configuration (`events.user`, `requirements.time` ...)
finds its value in a JSON record (docs/streaming.md, "Parsing", field paths).

A path is one or more keys separated by `.`; it walks down nested objects from the record's top level
(`payload.user_id` is the member `user_id` of the object in the member `payload`). Inside a key, `\\.`
is a literal dot, `\\\\` a literal backslash and `\\$` a literal dollar sign; no other character
follows a backslash. A path never indexes an array. A name without `.`, `\\` or a leading `$` is one
key: top-level names mean what they always meant. A module of its own: the configuration validates
paths with it, the parser (jobs/common/records.py) and the job's JVM readers (the keys, passed to
jobs/streaming/jvm/pwevent/flink/parsing/EventTime.java) follow them.

A mapping that starts with `$` names a part of the whole Kafka record instead of the value
(`record_field`, docs/formats.md "Whole Kafka records"): `$key` (the key, as `key_format` decodes it),
`$key.<path>` (a field path inside a JSON or Avro key), `$timestamp` (the record's timestamp, epoch
ms) and `$headers.<name>` (the last header of that name, taken literally, as UTF-8 text). A value key
that starts with `$` is written `\\$`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

#: What starts a mapping that names a part of the Kafka record rather than a path into its value.
RECORD_SIGIL = "$"


class RecordPart(Enum):
    """The part of a Kafka record a `$` mapping names (its text in the configuration)."""

    KEY = "$key"
    TIMESTAMP = "$timestamp"
    HEADER = "$headers"


@dataclass(frozen=True)
class RecordField:
    """A `$` mapping: the part of the Kafka record, and `keys` (a field path inside a `$key`, empty
    for the key itself) or `header` (the name of a `$headers.<name>`)."""

    part: RecordPart
    keys: tuple[str, ...] = ()
    header: str | None = None

    @property
    def slots(self) -> tuple[str, ...]:
        """Where it lies, for `check_disjoint`: an empty key (which no value path has), the part's
        text, then its keys or its header's name."""
        return ("", self.part.value, *self.keys, *((self.header,) if self.header is not None else ()))


_RECORD_FORMS = "$key, $key.<field path>, $timestamp or $headers.<name> (a value key starting with $ is written \\$)"


@lru_cache(maxsize=256)
def record_field(text: str) -> RecordField | None:
    """The part of the Kafka record the mapping `text` names, or None when it is a path into the value
    (it does not start with `$`); ValueError for a `$` mapping of no known form."""
    if not text.startswith(RECORD_SIGIL):
        return None
    head, dot, rest = text.partition(".")
    if head == RecordPart.KEY.value:
        return RecordField(RecordPart.KEY, field_path(rest) if dot else ())
    if text == RecordPart.TIMESTAMP.value:
        return RecordField(RecordPart.TIMESTAMP)
    if head == RecordPart.HEADER.value and rest:
        return RecordField(RecordPart.HEADER, header=rest)
    raise ValueError(f"{text!r} names no part of the Kafka record: {_RECORD_FORMS}")


@lru_cache(maxsize=256)
def field_path(text: str) -> tuple[str, ...]:
    """The keys of the path `text`, top level first; ValueError saying what is wrong (an empty key,
    a trailing backslash, an unknown escape, a leading `$`: that names a part of the Kafka record,
    `record_field`)."""
    if text.startswith(RECORD_SIGIL):
        raise ValueError(f"{text!r} is not a path into the value: a leading $ names a part of the Kafka record "
                         f"({_RECORD_FORMS})")
    if "." not in text and "\\" not in text:
        if not text:
            raise ValueError("a field path has at least one key")
        return (text,)
    keys: list[str] = []
    key: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError(f"field path {text!r} ends in a backslash (a literal backslash is written \\\\)")
            if escaped not in ".\\$":
                raise ValueError(f"field path {text!r} holds \\{escaped}: only \\. (a dot in a key), \\\\ "
                                 "(a backslash) and \\$ (a dollar sign) are escapes")
            key.append(escaped)
        elif char == ".":
            if not key:
                raise ValueError(f"field path {text!r} has an empty key (keys are separated by one dot)")
            keys.append("".join(key))
            key = []
        else:
            key.append(char)
    if not key:
        raise ValueError(f"field path {text!r} has an empty key (keys are separated by one dot)")
    keys.append("".join(key))
    return tuple(keys)


def path_text(keys: tuple[str, ...]) -> str:
    """The path of `keys` as written in the configuration (the inverse of `field_path`): a leading `$`
    escaped, so that the path names the value's key."""
    text = ".".join(key.replace("\\", "\\\\").replace(".", "\\.") for key in keys)
    return "\\" + text if text.startswith(RECORD_SIGIL) else text


def mapping_slots(text: str) -> tuple[str, ...]:
    """Where the mapping `text` lies: a value path's keys or a `$` mapping's `RecordField.slots` (the
    two never overlap: no value path has an empty key)."""
    found = record_field(text)
    return field_path(text) if found is None else found.slots


def check_disjoint(paths: dict[str, str]) -> None:
    """ValueError when one configured path lies inside another (`payload` and `payload.user`): no
    record can hold a value and an object at the same place, so every record would be rejected.
    `paths`: configuration key -> path; equal paths are allowed (one value read twice)."""
    keys = {name: mapping_slots(text) for name, text in paths.items()}
    for name, path in keys.items():
        for other, inner in keys.items():
            if len(inner) > len(path) and inner[:len(path)] == path:
                raise ValueError(f"{other} ({paths[other]!r}) lies inside {name} ({paths[name]!r}): "
                                 "a record cannot hold both")
