"""The slot rule's shared vectors (tests/streaming/data/slot-rules.tsv, written by
tests/streaming/vectors/slot_rules.py): every line is what the Python rule
(`jobs.common.slots.SlotClock`) gives, and the membership rule's "closed" agrees with it. The
Java side (`SlotRules.slotLastMs`, `SlotRules.closed`) is checked against
the same lines by jobs/streaming/jvm-test/pwevent/flink/time/SlotRulesTest.java (deploy/local/test-jvm.sh,
run by deploy/local/test.sh)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pwevent.jobs.common.slots import SlotClock
from tests.streaming.vectors import slot_rules
from tests.streaming.write_vectors import DATA

VECTORS = DATA / slot_rules.NAME


def vectors() -> list[tuple[int, int, int, int, int, int]]:
    lines = [line for line in VECTORS.read_text().splitlines() if line and not line.startswith("#")]
    return [tuple(int(x) for x in line.split("\t")) for line in lines]  # type: ignore[misc]


def test_every_vector_is_the_python_rule() -> None:
    rows = vectors()
    assert len(rows) >= 100
    assert {r[3] <= 0 for r in rows} == {True, False}  # before the origin, and after
    assert {r[5] == r[3] for r in rows} == {True, False}  # requirements in force from their slot, or from slot 1
    for origin, length, time_ms, slot, last_ms, in_force_from in rows:
        clock = SlotClock(origin, length)
        assert clock.slot_of(time_ms) == slot, (origin, length, time_ms)
        assert clock.in_force_from(time_ms) == in_force_from == max(1, slot)
        assert clock.end_ms(slot) - 1 == last_ms
        assert clock.start_ms(slot) <= time_ms <= last_ms


def test_a_watermark_closes_a_slot_at_its_last_instant() -> None:
    """`SlotClock.closed_by` (the Population's timers decide every slot it gives): a slot is closed by
    a watermark at its last millisecond, not one before."""
    for origin, length, _, slot, last_ms, _ in vectors():
        clock = SlotClock(origin, length)
        assert clock.closed_by(last_ms) == slot
        assert clock.closed_by(last_ms - 1) == slot - 1
        assert clock.closed_by(last_ms + length) == slot + 1


@given(st.integers(-10**15, 10**15), st.integers(1, 10**9), st.integers(-10**15, 10**15))
def test_closed_by_is_the_last_slot_whose_end_the_watermark_reached(origin: int, length: int, mark: int) -> None:
    clock = SlotClock(origin, length)
    closed = clock.closed_by(mark)
    assert clock.end_ms(closed) - 1 <= mark < clock.end_ms(closed + 1) - 1
