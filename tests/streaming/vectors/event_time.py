"""Shared vectors of the time the job's source reads for watermarking (`pwevent.flink.parsing.EventTime`)
against the reference parser (tests/streaming/data/event-time.tsv): every line is a time field path,
a record and the time `parse_event` takes from it ("-": it rejects the record).
jobs/streaming/jvm-test/pwevent/flink/parsing/EventTimeTest.java checks that the Java reads exactly
that time wherever the parser accepts (and never throws elsewhere). Nested paths, keys with dots,
Confluent frames, hostile records (the poison corpus, framed and under nested paths) and the time
forms of the rule (docs/formats.md, "Times": fractions beyond the millisecond, non-ASCII digits and
spaces, offsets, leap days, and the cases tests/streaming/test_contract_fuzz.py found) are all in it.
"""

from __future__ import annotations

import struct

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.field_paths import path_text
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.reasons import Rejected
from pwevent.jobs.common.records import parse_event
from tests.corpus import poison_records

NAME = "event-time.tsv"
PATHS: list[tuple[str, ...]] = [("time",), ("meta", "ts"), ("a.b", "c\\d"), ("m", "n", "o")]
TIMES: list[object] = [60_000, 1_700_000_000_123, 60_000.9, "60000", " 120000 ", "2024-01-01T00:00:00Z",
                       "2024-01-01T00:00:00.5+02:00", "2024-01-01T10:00:00", "2024-01-01", -5, 0]
#: The rule's cases (docs/formats.md, "Times"), each once under the top-level path, accepted or not.
RULE_TIMES: list[object] = [
    # digits beyond the millisecond: dropped toward the past, before the epoch too
    "2024-01-01T00:00:59.9996Z", "2024-01-01T00:00:59.999999999Z", "2024-01-01T00:00:59.0000000001Z",
    "1969-12-31T23:59:59.9999Z", "2024-01-01T00:00:00.1", "2024-01-01T00:00:00.12+01:00",
    -0.5, -1.5, 59_999.9999, 1.5e12, 1e3, -62_135_596_800_000.5,
    # other digits and other spaces than ASCII's and JSON's: refused
    "\u0661\u0662\u0663", "2024-01-0\u0661", "\uff16\uff10\uff10\uff10\uff10", "\u00a0120000", "120000\u00a0",
    "\u2003120000", "\u3000120000", "\u0085120000", "\x0b120000", "\x1c120000", "\t60000\r\n", "\n2024-01-01\n",
    # offsets, separators, leap days, the forms taken and not
    "2024-01-01T00:00:00-05:30", "2024-01-01T00:00+23:59", "2024-01-01T00:00:00+24:00", "2024-01-01T00:00:00+0200",
    "2024-01-01T00:00:00+02", "2024-01-01T00:00:00+02:00:30", "2024-01-01 10:00:00Z", "2024-01-01t10:00:00z",
    "2024-01-01T10", "2024-01-01T10:00", "2024-01-01T10:00:00.", "2024-01-01T10:00:00.1234567890Z",
    "2024-02-29", "2023-02-29", "2024-02-30T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T23:60:00Z",
    "2024-01-01T23:59:60Z", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+00:01", "0000-01-01",
    "9999-12-31T23:59:59.9999Z",
    "9999-12-31T23:59:59.999-00:01", "+2024-01-01", "20240101", "20240101T000000Z", "2024-W01-1", "2024-001",
    "2024-01-01ZZ", "Z2024-01-01", "2024-01-01T00:00:00ZZ",
    # epoch milliseconds as text
    "-0", "+60000", "000000000000000000000060000", "9223372036854775808", "-62135596800001", "253402300799999",
    "253402300800000", "6e4", "60000.0",
]


def frame(data: bytes, schema_id: int = 1) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + data


def nest(path: tuple[str, ...], value: object, siblings: bool = False) -> dict[str, object]:
    """A record with `value` at `path` (and, with `siblings`, other members around it at every level)."""
    inner: object = value
    for depth, key in reversed(list(enumerate(path))):
        level: dict[str, object] = {key: inner}
        if siblings:
            level = {f"x{depth}": [1, {"ts": 9}], **level, f"y{depth}": {"ts": 8, "o": None}}
        inner = level
    assert isinstance(inner, dict)
    return inner


def records(path: tuple[str, ...]) -> list[bytes]:
    body = {"user": "u", "value": 1}
    out = []
    for time in TIMES:
        for siblings in (False, True):
            text = dumps({**body, **nest(path, time, siblings)}).encode()
            out += [text, frame(text), frame(text, 2**32 - 1)]
    head = path[:-1]
    for broken in ([1], None, 5, "x", [{path[-1]: 60_000}]):
        out.append(dumps({**body, **nest(head, broken)} if head else {**body, path[0]: broken}).encode())
    out += [dumps(body).encode(), b"\x00\x00\x00\x01", b"\x00", frame(b""), frame(frame(dumps(body).encode()))]
    text = dumps({**body, **nest(path, 60_000)}).encode()
    out += [text[:-1], text + b"x", b"\x01" + text[1:], frame(text)[:-3]]
    if path == PATHS[0]:
        out += [dumps({**body, path[0]: time}).encode() for time in RULE_TIMES]
    out += [frame(data) for _, data in poison_records() if len(data) < 2048]
    out += [data for _, data in poison_records() if len(data) < 2048]
    return out


def vectors() -> list[str]:
    """The lines of the file: keys (hex of their UTF-8, comma-separated), record (hex), time."""
    lines = []
    for path in PATHS:
        config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "cells", "d": 10},
                               "events": {"time": path_text(path)}})
        for data in records(path):
            try:
                time = str(parse_event(data, config.events, config.domain).time_ms)
            except Rejected:
                time = "-"
            lines.append("\t".join((",".join(key.encode().hex() for key in path), data.hex(), time)))
    return lines


def text() -> str:
    """The file's text."""
    return ("# keys (hex UTF-8, comma-separated)\trecord (hex)\ttime parse_event takes (- rejects)\n"
            + "".join(line + "\n" for line in vectors()))
