"""The slot rule's shared vectors (tests/streaming/data/slot-rules.tsv): every line is what the Python
rule (`jobs.common.slots.SlotClock`) gives, and the membership rule's "closed" agrees with it. The
Java side (`SlotWatermarks.slotLastMs`, `ValidTime.closed`, `ValidTime.knownAt`) is checked against
the same lines by jobs/streaming/jvm-test/pwevent/flink/SlotRulesTest.java (deploy/local/test-jvm.sh,
run by deploy/local/test.sh)."""

from __future__ import annotations

from pathlib import Path

from pwevent.jobs.common.slots import SlotClock

VECTORS = Path(__file__).parent / "data" / "slot-rules.tsv"


def vectors() -> list[tuple[int, int, int, int, int]]:
    lines = [line for line in VECTORS.read_text().splitlines() if line and not line.startswith("#")]
    return [tuple(int(x) for x in line.split("\t")) for line in lines]  # type: ignore[misc]


def test_every_vector_is_the_python_rule() -> None:
    rows = vectors()
    assert len(rows) >= 100
    assert {r[3] <= 0 for r in rows} == {True, False}  # before the origin, and after
    for origin, length, time_ms, slot, last_ms in rows:
        clock = SlotClock(origin, length)
        assert clock.slot_of(time_ms) == slot, (origin, length, time_ms)
        assert clock.end_ms(slot) - 1 == last_ms
        assert clock.start_ms(slot) <= time_ms <= last_ms
