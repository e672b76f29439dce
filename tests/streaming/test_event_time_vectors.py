"""The time the job's source reads for watermarking (`pwevent.flink.parsing.EventTime`) against the
reference parser, through shared vectors (tests/streaming/data/event-time.tsv, written by
tests/streaming/vectors/event_time.py; tests/streaming/test_vectors.py checks the file is what it
writes): the file covers what it must."""

from __future__ import annotations

import pytest

from pwevent.jobs.common.jsonl import dumps
from tests.streaming.vectors import event_time


def test_the_vectors_hold_accepted_and_hostile_records() -> None:
    lines = event_time.vectors()
    accepted = [line for line in lines if not line.endswith("\t-")]
    assert len(accepted) >= 4 * len(event_time.TIMES) * 3, "valid records, nested and framed, under every path"
    assert len(lines) - len(accepted) >= 200, "hostile records"


@pytest.mark.parametrize(("time", "expected"), [
    ("2024-01-01T00:00:59.9996Z", "1704067259999"),  # digits beyond the millisecond: toward the past
    ("1969-12-31T23:59:59.9999Z", "-1"),
    (-0.5, "-1"),
    ("\u0661\u0662\u0663", "-"),  # Arabic-Indic digits: refused
    ("\u00a0120000", "-"),  # a non-breaking space: refused
    ("\t60000\r\n", "60000"),  # JSON whitespace: taken
])
def test_the_rule_cases_are_in_the_file_as_the_rule_says(time: object, expected: str) -> None:
    """The divergences the cross-language fuzz and issue 41 found, in the file with the rule's answer
    (docs/formats.md, "Times")."""
    record = dumps({"user": "u", "value": 1, "time": time}).encode().hex()
    assert f"74696d65\t{record}\t{expected}" in event_time.vectors()
