"""Shared vectors of the slot rule (tests/streaming/data/slot-rules.tsv): for slot clocks of every
kind (the epoch or a date as origin, 1 ms to 1 day slots, an origin not on a slot boundary), times at
the edges of slots, at the edges of the time range and at random, with the slot
`jobs.common.slots.SlotClock` puts them in, that slot's last millisecond and the slot a requirement
record of that time is in force from (`SlotClock.in_force_from`).
jobs/streaming/jvm-test/pwevent/flink/time/SlotRulesTest.java and SlotJudgeTest.java check the Java
rule against every line; tests/streaming/test_slot_sql.py the SQL windows.
"""

from __future__ import annotations

import random

from pwevent.jobs.common.records import MAX_TIME_MS, MIN_TIME_MS
from pwevent.jobs.common.slots import SlotClock

NAME = "slot-rules.tsv"
#: (origin, slot length) of the clocks
CLOCKS = [(1_704_067_200_000, 60_000), (0, 1), (1_704_067_200_000, 3_600_000), (-62_135_596_800_000, 86_400_000),
          (7, 13)]
RANDOM_TIMES_PER_CLOCK = 12


def times(origin: int, length: int) -> list[int]:
    """The times tried on a clock: its slot edges around the origin, the range's ends, random ones."""
    edges = [origin, origin - 1, origin + length - 1, origin + length, origin + 5 * length - 1, origin - length,
             origin - length - 1, MAX_TIME_MS, MIN_TIME_MS]
    rng = random.Random(f"{origin}-{length}")
    spread = max(length * 1000, 100_000_000_000)
    return edges + [rng.randint(origin - spread, origin + spread) for _ in range(RANDOM_TIMES_PER_CLOCK)]


def text() -> str:
    """The file's text."""
    lines = ["# origin_ms\tslot_ms\ttime_ms\tslot\tslot_last_ms\tin_force_from   (jobs/common/slots.py SlotClock)\n"]
    for origin, length in CLOCKS:
        clock = SlotClock(origin, length)
        for time_ms in times(origin, length):
            slot = clock.slot_of(time_ms)
            row = (origin, length, time_ms, slot, clock.end_ms(slot) - 1, clock.in_force_from(time_ms))
            lines.append("\t".join(str(x) for x in row) + "\n")
    return "".join(lines)
