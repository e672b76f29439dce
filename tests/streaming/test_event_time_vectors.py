"""The time the job's source reads for watermarking (`pwevent.flink.parsing.EventTime`) against the reference
parser, through shared vectors (tests/streaming/data/event-time.tsv): every line is a time field path,
a record and the time `parse_event` takes from it ("-": it rejects the record). This test checks
that the file is the Python rule; jobs/streaming/jvm-test/pwevent/flink/parsing/EventTimeTest.java checks
that the Java reads exactly that time wherever the parser accepts (and never throws elsewhere).
Nested paths, keys with dots, Confluent frames and hostile records (the poison corpus, framed and
under nested paths) are all in it.

Regenerate after a change of the rule: `.venv/bin/python -m tests.streaming.test_event_time_vectors`.
"""

from __future__ import annotations

import struct
from pathlib import Path

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.field_paths import path_text
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.reasons import Rejected
from pwevent.jobs.common.records import parse_event
from tests.corpus import poison_records

VECTORS = Path(__file__).parent / "data" / "event-time.tsv"
PATHS: list[tuple[str, ...]] = [("time",), ("meta", "ts"), ("a.b", "c\\d"), ("m", "n", "o")]
TIMES: list[object] = [60_000, 1_700_000_000_123, 60_000.9, "60000", " 120000 ", "2024-01-01T00:00:00Z",
                       "2024-01-01T00:00:00.5+02:00", "2024-01-01T10:00:00", "2024-01-01", -5, 0]


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
    out += [frame(data) for _, data in poison_records() if len(data) < 2048]
    out += [data for _, data in poison_records() if len(data) < 2048]
    return out


def vectors() -> list[str]:
    """The lines of the vectors file: keys (hex of their UTF-8, comma-separated), record (hex), time."""
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


def test_the_vectors_are_the_reference_parser() -> None:
    lines = [line for line in VECTORS.read_text().splitlines() if line and not line.startswith("#")]
    assert lines == vectors()
    accepted = [line for line in lines if not line.endswith("\t-")]
    assert len(accepted) >= 4 * len(TIMES) * 3, "valid records, nested and framed, under every path"
    assert len(lines) - len(accepted) >= 200, "hostile records"


if __name__ == "__main__":
    VECTORS.write_text("# keys (hex UTF-8, comma-separated)\trecord (hex)\ttime parse_event takes (- rejects)\n"
                       + "\n".join(vectors()) + "\n")
