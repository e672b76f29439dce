"""The slot rule of `jobs.common.slots.SlotClock` written as Flink SQL (docs/streaming.md, "Time"):
the tumbling window of one slot, the only place the job's SQL needs the rule (the slot of an event
and its end are the Java `SlotRules`, tested equal to `SlotClock`). tests/streaming/test_slot_sql.py
checks on a Flink mini-cluster that the window of every time of the shared vectors of
tests/streaming/data/slot-rules.tsv starts at its slot's start."""

from __future__ import annotations

from pwevent.jobs.common.slots import SlotClock


def interval(ms: int) -> str:
    """A SQL day-time interval literal of `ms` (>= 0) milliseconds."""
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY(9) TO SECOND(3)"


def tumble(table: str, column: str, clock: SlotClock) -> str:
    """Flink's tumbling windows of one slot over the time attribute `column` of `table`, aligned to the
    origin: window_start of a row is `SlotClock.start_ms` of its slot."""
    offset = clock.origin_ms % clock.length_ms
    return (f"TABLE(TUMBLE(TABLE `{table}`, DESCRIPTOR(`{column}`), {interval(clock.length_ms)}, "
            f"{interval(offset)}))")
