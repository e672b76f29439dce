"""The poison corpus: records that no parser of the project may crash on, and that every one rejects.

Each record is rejected by `parse_event` AND `parse_requirement_update` whatever the domain (field
names user/time/value): they break the rules every record shares (bytes, JSON, user id, time), never
only a domain. Exception: with the Kafka timestamp as event time (`kafka.event_time: kafka`) the
record's time field is ignored, so the `time-*` records with a well-formed JSON body are valid events.
The small records are files in `poison/` (bytes as they are); the big ones are made here. Used by the
parser's fuzz tests, the replay's, the SQL fast path's and the streaming job's dead-letter test.
"""

from __future__ import annotations

from pathlib import Path

POISON_DIR = Path(__file__).parent / "poison"
_EVENT_TAIL = b',"time":1704067200000,"value":1}'


def _big() -> list[tuple[str, bytes]]:
    """The records too big to commit: the ones that crashed the parser (issue 9) and their kin."""
    return [
        ("brackets-100k", b"[" * 100_000),  # RecursionError before; too large now
        ("brackets-60k", b"[" * 60_000),  # under the size limit: too deep
        ("nested-objects-10k", b'{"a":' * 10_000 + b"1" + b"}" * 10_000),
        ("number-5000-digits", b'{"user":"a","time":1704067200000,"value":' + b"9" * 5000 + b"}"),
        ("user-number-5000-digits", b'{"user":' + b"7" * 5000 + _EVENT_TAIL),
        ("ff-1mib", b"\xff" * (1 << 20)),
        ("user-700k", b'{"user":"' + b"u" * 700_000 + b'"' + _EVENT_TAIL),
        ("user-300-chars", b'{"user":"' + b"u" * 300 + b'"' + _EVENT_TAIL),
        ("record-10mib", b'{"user":"a b","pad":"' + b"p" * (10 << 20) + b'"' + _EVENT_TAIL),
    ]


def poison_records(big: bool = True) -> list[tuple[str, bytes]]:
    """(name, bytes) of every poison record: the files of `poison/` by name, then (with `big`) the
    generated big ones."""
    files = [(path.stem, path.read_bytes()) for path in sorted(POISON_DIR.glob("*.json"))]
    return files + (_big() if big else [])
