"""Whole Kafka records: key, value, timestamp and headers, for inputs whose field mappings name parts
of the record (`$key`, `$timestamp`, `$headers.<name>`: jobs/common/field_paths.py `record_field`),
and their file format, the whole-records file (docs/formats.md, "Whole Kafka records").

A whole-records file holds one record per line, a JSON object of the members `key`, `value`,
`timestamp` and `headers`:

    {"key":"dTE3","value":"eyJ2YWx1ZSI6MX0=","timestamp":1704067200000,"headers":[["site","bm9ydGg="]]}

`key` and `value` are the record's bytes in base64 (RFC 4648, standard alphabet, with padding), or
null (no key; a null value, which every format reads as empty bytes); `timestamp` the Kafka timestamp
in epoch milliseconds, or null (none); `headers` the headers in their order, each a pair of its name
(a JSON string) and its value in base64 or null. Every member may be left out (null; no headers).
Bytes in base64 carry any value format alike: JSON, Avro, Protobuf.

The streaming job's source renders every record of such an input as exactly this line in canonical
form (`line`; Java: `pwevent.flink.parsing.PositionedRecords`, members in this order, no spaces,
names escaped as `pwevent.flink.parsing.Json` does), and the reference parser reads it with
`KafkaRecord.of_line`, as the replay reads the file's lines: the job and the replay see the same
records. `size` is what `max_record_bytes` bounds (a record beyond it, or with more than MAX_HEADERS
headers, is `too_large`), and `line_limit` the longest line the replay reads: the canonical line of
every record within both bounds is shorter.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.reasons import Reason, Rejected

#: The members of a line, in their canonical order (jvm_contract `WHOLE_RECORD_MEMBERS`).
KEY, VALUE, TIMESTAMP, HEADERS = "key", "value", "timestamp", "headers"
MEMBERS = (KEY, VALUE, TIMESTAMP, HEADERS)
#: The most headers a record may have (more: `too_large`).
MAX_HEADERS = 256
#: What a header costs on a canonical line beyond its escaped name and base64 value: `["",""],`.
_HEADER_OVERHEAD = 8
#: What a line costs beyond its bytes: the members' names, quotes, padding and the timestamp.
_LINE_OVERHEAD = 96


@dataclass(frozen=True)
class KafkaRecord:
    """A Kafka record as the job's source reads it: `value` and `key` bytes (None: null), `timestamp_ms`
    (None: none), `headers` (name, value bytes or None) in their order."""

    value: bytes | None
    key: bytes | None = None
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def value_bytes(self) -> bytes:
        """The value as every format reads it: a null value is empty."""
        return self.value if self.value is not None else b""

    @property
    def size(self) -> int:
        """What `max_record_bytes` bounds: the bytes of the key, the value, and every header's name
        (UTF-8) and value."""
        return (len(self.key or b"") + len(self.value_bytes)
                + sum(len(name.encode("utf-8", errors="surrogatepass")) + len(value or b"")
                      for name, value in self.headers))

    def header(self, name: str) -> bytes | None:
        """The value of the last header named `name` (Kafka's `lastHeader`); None when there is none or
        its value is null."""
        for found, value in reversed(self.headers):
            if found == name:
                return value
        return None

    def line(self) -> bytes:
        """The record's canonical line (no newline): what the job's source renders and tools write."""
        headers = ",".join(f"[{_name(name)},{_b64(value)}]" for name, value in self.headers)
        stamp = "null" if self.timestamp_ms is None else str(self.timestamp_ms)
        return (f'{{"{KEY}":{_b64(self.key)},"{VALUE}":{_b64(self.value)},"{TIMESTAMP}":{stamp},'
                f'"{HEADERS}":[{headers}]}}').encode("utf-8", errors="surrogatepass")

    @classmethod
    def of_line(cls, line: bytes | str) -> KafkaRecord:
        """The record of a whole-records line; Rejected `undecodable` saying what is wrong."""
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as err:
            raise _undecodable(f"not JSON: {err}") from None
        if not isinstance(obj, dict):
            raise _undecodable("not a JSON object")
        unknown = sorted(set(obj) - set(MEMBERS))
        if unknown:
            raise _undecodable(f"unknown member {unknown[0]!r} (members: {', '.join(MEMBERS)})")
        stamp = obj.get(TIMESTAMP)
        if stamp is not None and (isinstance(stamp, bool) or not isinstance(stamp, int) or stamp < 0):
            raise _undecodable(f"{TIMESTAMP} is epoch milliseconds (an integer >= 0) or null")
        raw_headers = obj.get(HEADERS) or []
        if not isinstance(raw_headers, list):
            raise _undecodable(f"{HEADERS} is a list of [name, base64 value] pairs")
        headers = []
        for pair in raw_headers:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise _undecodable(f"{HEADERS} is a list of [name, base64 value] pairs")
            headers.append((pair[0], _bytes(pair[1], f"header {pair[0]!r}")))
        return cls(_bytes(obj.get(VALUE), VALUE), _bytes(obj.get(KEY), KEY), stamp, tuple(headers))


def kept_value(record: bytes | KafkaRecord) -> bytes:
    """What a reject keeps of a record (a value's bytes, or a whole record): the Kafka value, empty
    for a null one; the dead letter's `position` finds the rest of the record."""
    return record.value_bytes if isinstance(record, KafkaRecord) else record


def checked_size(record: KafkaRecord, max_bytes: int) -> None:
    """Rejected `too_large` when `record` is beyond `max_bytes` (its `size`) or has more than
    MAX_HEADERS headers."""
    if len(record.headers) > MAX_HEADERS:
        raise Rejected(Reason.TOO_LARGE, f"{len(record.headers)} headers, more than the {MAX_HEADERS} allowed")
    if record.size > max_bytes:
        raise Rejected(Reason.TOO_LARGE, f"{record.size} bytes of key, value and headers, more than the "
                                         f"{max_bytes} allowed")


def line_limit(max_bytes: int) -> int:
    """The longest line of a whole-records file the replay reads (a longer one is `too_large` unread):
    a canonical line of a record within `max_bytes` and MAX_HEADERS is never longer (base64 takes 4
    bytes per 3, an escaped name at most 6 per byte)."""
    return 6 * max_bytes + MAX_HEADERS * (_HEADER_OVERHEAD + 4) + _LINE_OVERHEAD


def _b64(data: bytes | None) -> str:
    return "null" if data is None else '"' + base64.b64encode(data).decode("ascii") + '"'


def _name(name: str) -> str:
    """A header name as a JSON string, escaped as the job's Java does (`Json.string`): quotes,
    backslashes and control characters, the rest as it is."""
    out = ['"']
    for char in name:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out) + '"'


def _bytes(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _undecodable(f"{what} is base64 text or null")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _undecodable(f"{what} is not base64") from None


def _undecodable(what: str) -> Rejected:
    return Rejected(Reason.UNDECODABLE, f"a line of a whole-records file: {what}"[:400])
