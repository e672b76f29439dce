"""Input records (events, requirement updates), their parsing, and rejects with reasons.

The ONE definition of a valid record, shared by the replay and the streaming job (whose SQL fast
path, jobs/streaming/event_sql.py, only accelerates records this parser surely accepts). A record
that cannot be used becomes a reject (the replay's rejects file, the job's dead-letter topic) with a
typed reason, a bounded excerpt of the original bytes, their length and SHA-256, and where it came
from. No byte sequence crashes the parser: every exception on the parsing path becomes a reject.
Formats and the rules below: docs/formats.md. Avro records (`format: avro-confluent`, `avro`) and
Protobuf records (`protobuf-confluent`, `protobuf`) are decoded first (jobs/common/avro_format.py,
jobs/common/protobuf_format.py), then read by the same field rules.

Rules on the bytes, before anything else: at most `max_bytes` (configurable, `max_record_bytes`;
the whole value), a Confluent frame (byte 0, a 4-byte schema id) taken off if there is one, then
strict UTF-8 (no BOM, no overlong forms, no encoded surrogates), JSON (RFC 8259: no NaN/Infinity
literals) nested at most MAX_DEPTH deep, no object with a repeated key, no number literal longer
than MAX_NUMBER_CHARS or overflowing a double. User ids are taken as they are, never normalised: a
string of 1 to MAX_USER_CHARS characters, already in Unicode NFC, with no control, format,
surrogate, private-use, unassigned or separator (space included) character; or a JSON integer,
whose decimal digits are the id. Times are within years 1 to 9999. The configured fields are
field paths (jobs/common/field_paths.py) into nested objects; a path that crosses an array, a scalar
or null rejects the record. With `pseudonymise` configured (jobs/common/pseudonyms.py) a valid user id is
replaced by its pseudonym as the last step, after every check of the record (a requirement's
signature included), so everything downstream holds pseudonyms only.

An input whose mappings name parts of the Kafka record (`$key`, `$key.<path>`, `$timestamp`,
`$headers.<name>`) is parsed from its whole record (jobs/common/kafka_record.py `KafkaRecord`): the
size of key, value and headers together first (`too_large`), then the value as usual, then the
fields in order, each from its part: a key as `key_format` decodes it (`string`: UTF-8 text; `json`:
one JSON value under the rules above; `avro-confluent`: through the registry), once, when a mapping
first reads it; key bytes that do not decode are `undecodable` (an unknown schema id
`unknown_schema`), a missing key, timestamp or header `missing_field`, and a header's value is its
UTF-8 text (else `undecodable`).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common import provenance
from pwevent.jobs.common.avro_format import (
    CONFLUENT_FRAME_BYTES,
    CONFLUENT_MAGIC,
    RegistryUnavailable,
    decoder,
    key_decoder,
)
from pwevent.jobs.common.config import (
    DEFAULT_MAX_RECORD_BYTES,
    EventFields,
    InputFormat,
    RequirementFields,
    RequirementPart,
)
from pwevent.jobs.common.field_paths import RecordField, RecordPart, field_path, path_text, record_field
from pwevent.jobs.common.kafka_record import KafkaRecord, checked_size
from pwevent.jobs.common.protobuf_format import PROTOBUF_FORMATS, protobuf_decoder
from pwevent.jobs.common.pseudonyms import Pseudonyms
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.slots import parse_time_ms
from pwevent.operators.domain import Domain, OutOfDomainError
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import DynamicRequirement, Requirement, RequirementCaps

#: Deepest nesting of arrays and objects a record may have (the formats need 2).
MAX_DEPTH = 16
#: Longest number literal (digits, sign, point, exponent) a record may hold.
MAX_NUMBER_CHARS = 64
#: Longest user id, in characters.
MAX_USER_CHARS = 256
#: Event and requirement times: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z.
MIN_TIME_MS, MAX_TIME_MS = -62_135_596_800_000, 253_402_300_799_999
#: How much of the original bytes a reject keeps (the rest is known by length and digest).
ORIGINAL_HEAD_BYTES = 1024
#: Longest reject detail, in characters.
MAX_DETAIL_CHARS = 512


@dataclass(frozen=True)
class Event:
    user: str
    time_ms: int
    cell: int


@dataclass(frozen=True)
class RequirementUpdate:
    user: str
    time_ms: int
    requirement: Requirement | DynamicRequirement


@dataclass(frozen=True)
class Original:
    """What a reject keeps of a record: its first bytes, its full length and its SHA-256."""

    head: bytes
    length: int
    sha256: str

    @classmethod
    def of(cls, data: str | bytes) -> Original:
        raw = as_bytes(data)
        return cls(raw[:ORIGINAL_HEAD_BYTES], len(raw), hashlib.sha256(raw).hexdigest())


def as_bytes(data: str | bytes) -> bytes:
    """A record's bytes; a str is taken as UTF-8, its lone surrogates kept (so they fail decoding)."""
    return data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogatepass")


def _clean_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, as valid Unicode (lone surrogates replaced)."""
    return text[:limit].encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")


@contextmanager
def _boundary() -> Iterator[None]:
    """Every exception of the parsing path as a reject: a hostile record never crashes a caller."""
    try:
        yield
    except (Rejected, RegistryUnavailable):  # a registry that does not answer is no record's fault
        raise
    except Exception as err:  # the boundary: anything else is a gap in the parser, reported as such
        raise Rejected(Reason.PARSER_ERROR, _clean_text(f"{type(err).__name__}: {err}", MAX_DETAIL_CHARS)) from None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def _check_depth(text: str) -> None:
    """Reject nesting deeper than MAX_DEPTH before the recursive JSON parser sees it. Counting the
    brackets outside properly closed strings never undercounts the depth the parser would reach."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for bracket in _BRACKETS.findall(_STRING.sub("", text)):
        depth = depth + 1 if bracket in "[{" else depth - 1
        if depth > MAX_DEPTH:
            raise Rejected(Reason.TOO_DEEP, f"nested deeper than {MAX_DEPTH}")


def _short_number(literal: str) -> str:
    if len(literal) > MAX_NUMBER_CHARS:
        detail = f"a number literal of {len(literal)} characters (at most {MAX_NUMBER_CHARS})"
        raise Rejected(Reason.INVALID_NUMBER, detail)
    return literal


def _int(literal: str) -> int:
    return int(_short_number(literal))


def _float(literal: str) -> float:
    value = float(_short_number(literal))
    if value in (float("inf"), float("-inf")):
        raise Rejected(Reason.INVALID_NUMBER, f"{literal} overflows a double")
    return value


def _constant(literal: str) -> Any:
    raise Rejected(Reason.INVALID_NUMBER, f"{literal} is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise Rejected(Reason.DUPLICATE_KEY, _clean_text(f"key {repeated!r} appears more than once", MAX_DETAIL_CHARS))
    return obj


def _unframed(raw: bytes) -> bytes:
    """The JSON text of a record: a value in the Confluent wire format (magic byte 0, then a 4-byte
    big-endian schema id) without its frame, any other value as it is. The schema id is not looked
    at (no registry is asked for JSON). No JSON text starts with byte 0, so nothing else changes."""
    if raw[:1] != CONFLUENT_MAGIC:
        return raw
    if len(raw) < CONFLUENT_FRAME_BYTES:
        raise Rejected(Reason.UNPARSABLE, f"a Confluent-framed value of {len(raw)} bytes: the frame alone (magic "
                       f"byte 0 and a 4-byte schema id) has {CONFLUENT_FRAME_BYTES}")
    return raw[CONFLUENT_FRAME_BYTES:]


def _sized(data: str | bytes, max_bytes: int) -> bytes:
    """A record's bytes, checked first in every format: at most `max_bytes` (`too_large`)."""
    raw = as_bytes(data)
    if len(raw) > max_bytes:
        raise Rejected(Reason.TOO_LARGE, f"{len(raw)} bytes, more than the {max_bytes} allowed")
    return raw


def _json_value(data: str | bytes, max_bytes: int) -> Any:
    """A record's bytes -> its JSON value, under the rules of this module's docstring."""
    raw = _unframed(_sized(data, max_bytes))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Rejected(Reason.UNPARSABLE, f"not UTF-8: {err.reason} at byte {err.start}") from None
    _check_depth(text)
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_int=_int, parse_float=_float,
                          parse_constant=_constant)
    except json.JSONDecodeError as err:
        raise Rejected(Reason.UNPARSABLE, f"not JSON: {err}") from None


def load_object(data: str | bytes, max_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> dict[str, Any]:
    """A record's bytes -> its JSON object, under the rules of this module's docstring; Rejected
    with the reason otherwise (and never any other exception)."""
    with _boundary():
        obj = _json_value(data, max_bytes)
        if not isinstance(obj, dict):
            raise Rejected(Reason.UNPARSABLE, "not a JSON object")
        return obj


def load_record(data: str | bytes, fields: InputFormat, max_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> dict[str, Any]:
    """A record's bytes -> its object, in the input's `format`: JSON (`load_object`), Avro decoded
    (jobs/common/avro_format.py) or Protobuf decoded (jobs/common/protobuf_format.py); the size limit
    first. Rejected with the reason, RegistryUnavailable
    when the Schema Registry does not answer, never any other exception."""
    if fields.format == "json":
        return load_object(data, max_bytes)
    with _boundary():
        raw = _sized(data, max_bytes)
        if fields.format in PROTOBUF_FORMATS:
            return protobuf_decoder(fields).decode(raw)
        return decoder(fields).decode(raw)


#: What `_lookup` returns for a path one of whose keys a record does not have.
_ABSENT: Any = object()


def _key_value(raw: bytes, fields: InputFormat, max_bytes: int) -> Any:
    """The Kafka key as `key_format` decodes it; Rejected `undecodable` (or `unknown_schema`) when it
    does not."""
    decoding = fields.key_decoding
    try:
        if decoding == "string":
            return raw.decode("utf-8")
        if decoding == "json":
            return _json_value(raw, max_bytes)
        return key_decoder(fields).decode(raw)
    except UnicodeDecodeError as err:
        raise Rejected(Reason.UNDECODABLE, f"the key is not UTF-8 text (key_format string): {err.reason} at byte "
                                           f"{err.start}") from None
    except Rejected as err:
        if err.reason is Reason.UNKNOWN_SCHEMA:
            raise
        raise Rejected(Reason.UNDECODABLE, _clean_text(f"the key is not {decoding} ({err.reason.value}: {err.detail})",
                                                       MAX_DETAIL_CHARS)) from None


@dataclass
class RecordView:
    """A record as its field mappings read it: the value's object and, for an input read as whole
    records, the Kafka record, whose key is decoded once, when a mapping first reads it."""

    obj: dict[str, Any]
    record: KafkaRecord | None = None
    fields: InputFormat | None = None
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES
    _key: Any = _ABSENT

    def part(self, found: RecordField, name: str) -> Any:
        """The value of the `$` mapping `name` (`found`); Rejected `missing_field` when the record has
        no such part, `undecodable` (or `unknown_schema`) when its bytes do not decode."""
        record, fields = self.record, self.fields
        if record is None or fields is None:
            raise _rejected(Reason.MISSING_FIELD, name, "not read as a whole Kafka record")
        if found.part is RecordPart.TIMESTAMP:
            if record.timestamp_ms is None:
                raise _rejected(Reason.MISSING_FIELD, name, "the record has no Kafka timestamp")
            return record.timestamp_ms
        if found.part is RecordPart.HEADER:
            assert found.header is not None
            header = record.header(found.header)
            if header is None:
                raise _rejected(Reason.MISSING_FIELD, name, f"the record has no header {found.header!r}")
            try:
                return header.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _rejected(Reason.UNDECODABLE, name, f"header {found.header!r} is not UTF-8 text: {err.reason} "
                                                          f"at byte {err.start}") from None
        if record.key is None:
            raise _rejected(Reason.MISSING_FIELD, name, "the record has no key")
        if self._key is _ABSENT:
            try:
                self._key = _key_value(record.key, fields, self.max_bytes)
            except Rejected as err:
                raise _rejected(err.reason, name, err.detail) from None
        if not found.keys:
            return self._key
        if not isinstance(self._key, dict):
            raise _rejected(Reason.MISTYPED_FIELD, name, "the key is not an object")
        return _walk(self._key, found.keys, name)


def _rejected(reason: Reason, name: str, what: str) -> Rejected:
    """The reject of the mapping `name`: `field '<name>': <what>`."""
    return Rejected(reason, _clean_text(f"field {name!r}: {what}", MAX_DETAIL_CHARS))


def _lookup(view: RecordView | dict[str, Any], name: str) -> Any:
    """The value of the mapping `name` of a record: a `$` mapping's part of the Kafka record, or the
    value at the field path `name` (jobs/common/field_paths.py) of the record's object; _ABSENT when a
    key on the way (or the part) is not there. Rejected when the path crosses something other
    than an object: null (missing_field), an array or a scalar (mistyped_field)."""
    obj = view if isinstance(view, dict) else view.obj
    if name.startswith("$"):
        found = record_field(name)
        if found is not None:
            if isinstance(view, dict):
                view = RecordView(view)
            return view.part(found, name)
    return _walk(obj, field_path(name), name)


def _walk(obj: dict[str, Any], keys: tuple[str, ...], name: str) -> Any:
    """The value at the path `keys` (the mapping `name`'s) of `obj`, as `_lookup`."""
    value: Any = obj
    for depth, key in enumerate(keys):
        if depth and not isinstance(value, dict):
            inside = path_text(keys[:depth])
            if value is None:
                raise Rejected(Reason.MISSING_FIELD, _clean_text(f"field {name!r} is missing ({inside!r} is null)",
                                                                 MAX_DETAIL_CHARS))
            what = "an array (field paths do not index arrays)" if isinstance(value, list) else "not an object"
            raise Rejected(Reason.MISTYPED_FIELD, _clean_text(f"field {name!r}: {inside!r} is {what}",
                                                              MAX_DETAIL_CHARS))
        if key not in value:
            return _ABSENT
        value = value[key]
    return value


def field_value(view: RecordView | dict[str, Any], name: str) -> Any:
    """The value of the mapping `name` of a record; None when it is not there, the path crosses no
    object or the key does not decode (for tools that only look: `pwevent produce` keys and paces
    records by it)."""
    try:
        value = _lookup(view, name)
    except Rejected:
        return None
    return None if value is _ABSENT else value


def _field(obj: RecordView, name: str) -> Any:
    value = _lookup(obj, name)
    if value is _ABSENT or value is None:
        raise Rejected(Reason.MISSING_FIELD, _clean_text(f"field {name!r} is missing", MAX_DETAIL_CHARS))
    return value


def read_record(data: str | bytes | KafkaRecord, fields: InputFormat,
                max_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> RecordView:
    """A record -> the view its mappings read: a value's bytes (`load_record`), or a whole Kafka
    record, whose size is checked first (`too_large`) and whose value is then loaded the same way.
    Rejected with the reason, RegistryUnavailable, never any other exception."""
    if not isinstance(data, KafkaRecord):
        return RecordView(load_record(data, fields, max_bytes))
    with _boundary():
        checked_size(data, max_bytes)
        return RecordView(load_record(data.value_bytes, fields, max_bytes), data, fields, max_bytes)


def _user(obj: RecordView, name: str) -> str:
    user = _field(obj, name)
    if isinstance(user, bool) or not isinstance(user, (str, int)):
        raise Rejected(Reason.MISTYPED_FIELD, f"field {name!r} must be a string or an integer")
    text = str(user)
    if not 1 <= len(text) <= MAX_USER_CHARS:
        raise Rejected(Reason.INVALID_USER, f"a user id has 1 to {MAX_USER_CHARS} characters, got {len(text)}")
    if not (text.isascii() and text.isprintable() and " " not in text):
        bad = next((c for c in text if unicodedata.category(c)[0] in "CZ"), None)
        if bad is not None:
            detail = f"the user id holds U+{ord(bad):04X} ({unicodedata.category(bad)}): no control, format, " \
                "surrogate, private-use, unassigned or separator characters"
            raise Rejected(Reason.INVALID_USER, detail)
        if unicodedata.normalize("NFC", text) != text:
            raise Rejected(Reason.INVALID_USER, "the user id is not in Unicode NFC (ids are never normalised)")
    return text


def _time(obj: RecordView, name: str) -> int:
    try:
        time_ms = parse_time_ms(_field(obj, name), name)
    except ValueError as err:
        if isinstance(err, Rejected):
            raise
        raise Rejected(Reason.MISTYPED_FIELD, _clean_text(str(err), MAX_DETAIL_CHARS)) from None
    if not MIN_TIME_MS <= time_ms <= MAX_TIME_MS:
        raise Rejected(Reason.MISTYPED_FIELD, f"field {name!r} is outside years 1 to 9999")
    return time_ms


def _requirement_part(obj: RecordView, part: RequirementPart, name: str) -> Requirement:
    """The window and budget at the paths of `part`; a value absent (or null) or of the wrong type is
    `invalid_requirement`, as the requirement's own values always were."""
    values = {key: _lookup(obj, getattr(part, key)) for key in ("w", "epsilon")}
    missing = [getattr(part, key) for key, value in values.items() if value is _ABSENT or value is None]
    if missing:
        raise InvalidRequirementError(f"{name} lacks {', '.join(missing)}")
    try:
        return Requirement(values["w"], values["epsilon"])
    except InvalidRequirementError as err:
        raise InvalidRequirementError(f"{name}: {err}" if name != "requirement" else str(err)) from None


def _requirement(obj: RecordView, fields: RequirementFields) -> Requirement | DynamicRequirement:
    """The requirement of a record at the configured paths: dynamic when the record holds anything
    where a backward or forward part would be (`RequirementPart.marks`), else fixed. With the default
    paths it reads what `state.requirements.parse_requirement` reads at the record's top level, but a
    `backward`/`forward` that is not an object follows the path rules (`mistyped_field`, or
    `missing_field` for null) as every field path does."""
    sides = {"backward": fields.backward, "forward": fields.forward}
    if any(_lookup(obj, path_text(mark)) is not _ABSENT for part in sides.values() for mark in part.marks):
        backward, forward = (_requirement_part(obj, part, side) for side, part in sides.items())
        return DynamicRequirement(backward, forward)
    return _requirement_part(obj, fields.fixed, "requirement")


@dataclass(frozen=True)
class KafkaTimestamp:
    """With `kafka.event_time: kafka` an event's time is its Kafka record timestamp, whatever the
    record holds at its time field, which is not read (docs/streaming.md, "Time"). `ms` None: the
    record came without one (a `missing_field` dead letter)."""

    ms: int | None


def _named(user: str, pseudonyms: Pseudonyms | None) -> str:
    """A valid user id as the job keeps it: its pseudonym with `pseudonymise` configured, else itself."""
    return user if pseudonyms is None else pseudonyms.of(user)


def parse_event(
    text: str | bytes | KafkaRecord, fields: EventFields, domain: Domain, kafka_time: KafkaTimestamp | None = None,
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES, pseudonyms: Pseudonyms | None = None,
) -> Event:
    """An event record (a value's bytes, or a whole Kafka record for an input that maps parts of it)
    -> (user, time, cell); the time from the record's time field, or with `kafka_time` the Kafka
    timestamp; the user as its pseudonym under `pseudonyms`. Raises Rejected, and nothing else but
    RegistryUnavailable (the Schema Registry of an `avro-confluent` or `protobuf-confluent` input did
    not answer: no verdict on the record)."""
    with _boundary():
        obj = read_record(text, fields, max_bytes)
        user = _user(obj, fields.user)
        if kafka_time is None:
            time_ms = _time(obj, fields.time)
        elif kafka_time.ms is None:
            raise Rejected(Reason.MISSING_FIELD, "the record has no Kafka timestamp (kafka.event_time: kafka)")
        else:
            time_ms = kafka_time.ms
        if fields.lat and fields.lon:
            value: Any = (_field(obj, fields.lat), _field(obj, fields.lon))
        else:
            value = _field(obj, fields.value)
        try:
            return Event(_named(user, pseudonyms), time_ms, domain.cell(value))
        except OutOfDomainError as err:
            raise Rejected(Reason.OUT_OF_DOMAIN, _clean_text(str(err), MAX_DETAIL_CHARS)) from None


def parse_requirement_update(
    text: str | bytes | KafkaRecord, fields: RequirementFields, caps: RequirementCaps,
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES, pseudonyms: Pseudonyms | None = None,
) -> RequirementUpdate:
    """A requirement record: {user, time, w, epsilon} or {user, time, backward: {..}, forward: {..}},
    each field at its configured path (`_requirement`); the user as its pseudonym under `pseudonyms`
    (after the signature is verified). Raises Rejected, and nothing else but RegistryUnavailable (as
    `parse_event`)."""
    with _boundary():
        obj = read_record(text, fields, max_bytes)
        try:
            provenance.verify(obj.obj, fields.signature)
        except provenance.UnauthenticatedError as err:
            raise Rejected(Reason.UNAUTHENTICATED_REQUIREMENT, _clean_text(str(err), MAX_DETAIL_CHARS)) from None
        user = _user(obj, fields.user)
        time_ms = _time(obj, fields.time)
        try:
            requirement = _requirement(obj, fields)
            caps.check(requirement)
        except InvalidRequirementError as err:
            raise Rejected(Reason.INVALID_REQUIREMENT, _clean_text(str(err), MAX_DETAIL_CHARS)) from None
        return RequirementUpdate(_named(user, pseudonyms), time_ms, requirement)


def reject_record(
    source: str, position: Any, reason: Reason, detail: str, original: str | bytes | Original
) -> dict[str, Any]:
    """The dead-letter / rejects line: where it came from, why, and the original, bounded: its first
    ORIGINAL_HEAD_BYTES bytes as text (invalid UTF-8 replaced), its length in bytes and its SHA-256
    (docs/schemas/dead-letter.schema.json)."""
    kept = original if isinstance(original, Original) else Original.of(original)
    return {
        "source": source,
        "position": _clean_text(position, MAX_DETAIL_CHARS) if isinstance(position, str) else position,
        "reason": reason.value,
        "detail": _clean_text(detail, MAX_DETAIL_CHARS),
        "original": kept.head.decode("utf-8", errors="replace"),
        "original_bytes": kept.length,
        "original_sha256": kept.sha256,
    }


def unknown_user(user: str, slot: int) -> str:
    """The detail of an `unknown_user` reject: one per user and slot, for the user's latest event there
    (its earlier events in the slot collapse into that one before the user is looked up)."""
    return (f"user {user!r} has no requirement in force at slot {slot} (its latest event in the slot; "
            "earlier ones collapse into it)")
