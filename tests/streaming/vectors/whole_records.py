"""Shared vectors of the whole-records line (tests/streaming/data/whole-records.tsv): Kafka records with
and without a key, a value, a timestamp and headers (repeated names, null values, names with quotes,
backslashes, control and non-ASCII characters), each with the canonical line jobs/common/kafka_record.py
writes (`KafkaRecord.line`). jobs/streaming/jvm-test/pwevent/flink/parsing/PositionedRecordsTest.java
checks that the job's source (`PositionedRecords.line`) renders every record as that line, byte for
byte. Columns: key, value (hex, `-` for null), timestamp (`-` for none), headers (`name:value` pairs
of hex, value `-` for null, joined by `,`; `~` for none), the line (hex of its UTF-8 bytes)."""

from __future__ import annotations

import random

from pwevent.jobs.common.kafka_record import KafkaRecord

NAME = "whole-records.tsv"
_NAMES = ["source", "trace-id", "a.b", 'q"uote', "back\\slash", "line\nbreak\ttab\x01", "ünï", "用户", "\U0001f600", ""]


def _records() -> list[KafkaRecord]:
    fixed = [
        KafkaRecord(b'{"value":1}', b"u17", 1_704_067_200_000),
        KafkaRecord(b'{"value":1}'),
        KafkaRecord(None, b"u1", 0),
        KafkaRecord(b"", b"", None, (("", b""),)),
        KafkaRecord(b"\x00\x00\x00\x00\x07\x02u1", b"\xff\xfe", 253_402_300_799_999,
                    (("site", b"north"), ("site", None), ("site", b"south"))),
    ]
    rng = random.Random("whole-records")

    def some_bytes() -> bytes | None:
        return None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))

    drawn = [KafkaRecord(some_bytes(), some_bytes(), None if rng.random() < 0.2 else rng.randrange(0, 2**41),
                         tuple((rng.choice(_NAMES), some_bytes()) for _ in range(rng.randrange(0, 5))))
             for _ in range(40)]
    return fixed + drawn


def _hex(data: bytes | None) -> str:
    return "-" if data is None else data.hex()


def text() -> str:
    """The file's text."""
    lines = ["# key\tvalue\ttimestamp\theaders (name:value, hex)\tline (hex of UTF-8; jobs/common/kafka_record.py)\n"]
    for record in _records():
        headers = ",".join(f"{name.encode().hex()}:{_hex(value)}" for name, value in record.headers) or "~"
        stamp = "-" if record.timestamp_ms is None else str(record.timestamp_ms)
        lines.append(f"{_hex(record.key)}\t{_hex(record.value)}\t{stamp}\t{headers}\t{record.line().hex()}\n")
    return "".join(lines)
