"""The slot rule of `jobs.common.slots.SlotClock` written as Flink SQL (docs/streaming.md, "Time").

The job's SQL takes every slot number, slot end and slot window from here, so the rule has one
definition in Python (`SlotClock`) and this one rendering of it. Flink's BIGINT `/` and `MOD`
truncate toward zero where `SlotClock` floors; the expressions floor explicitly, so they agree with
`SlotClock` before the origin too. tests/streaming/test_slot_sql.py evaluates them on a Flink
mini-cluster over the shared vectors of tests/streaming/data/slot-rules.tsv (which the Java rule
is tested against as well)."""

from __future__ import annotations

from pwevent.jobs.common.slots import SlotClock


def interval(ms: int) -> str:
    """A SQL day-time interval literal of `ms` (>= 0) milliseconds."""
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY(9) TO SECOND(3)"


def _into_slot(time_ms: str, clock: SlotClock) -> str:
    """How far `time_ms` is into its slot, in [0, length): the floored remainder."""
    since = f"({time_ms} - {clock.origin_ms})"
    return f"MOD(MOD({since}, {clock.length_ms}) + {clock.length_ms}, {clock.length_ms})"


def slot_of(time_ms: str, clock: SlotClock) -> str:
    """`SlotClock.slot_of` of the BIGINT epoch-millisecond expression `time_ms`."""
    return (f"CAST(({time_ms} - {clock.origin_ms} - {_into_slot(time_ms, clock)}) / {clock.length_ms}"
            " AS BIGINT) + 1")


def slot_last_ms(time_ms: str, clock: SlotClock) -> str:
    """`SlotClock.end_ms(slot_of(t)) - 1`, the last millisecond of the slot holding `time_ms`."""
    return f"({time_ms} - {_into_slot(time_ms, clock)} + {clock.length_ms - 1})"


def tumble(table: str, column: str, clock: SlotClock) -> str:
    """Flink's tumbling windows of one slot over the time attribute `column` of `table`, aligned to the
    origin: window_start of a row is `SlotClock.start_ms` of its slot."""
    offset = clock.origin_ms % clock.length_ms
    return (f"TABLE(TUMBLE(TABLE `{table}`, DESCRIPTOR(`{column}`), {interval(clock.length_ms)}, "
            f"{interval(offset)}))")
