"""The slot rule as the job's SQL (jobs/streaming/slot_sql.py) against its Python definition
(`jobs.common.slots.SlotClock`): for every shared vector of tests/streaming/data/slot-rules.tsv,
Flink SQL on a mini-cluster in batch mode puts the time in a tumbling window that starts at the
slot's start. The Java rule is checked against the same vectors (tests/streaming/test_slot_rules.py)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import pytest

from pwevent.jobs.common.slots import SlotClock
from pwevent.jobs.streaming import slot_sql
from tests.sql_results import query_rows
from tests.streaming.test_slot_rules import vectors

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def t_env() -> Any:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    env.get_config().set("table.local-time-zone", "UTC")  # as the job sets it
    return env


def by_clock() -> dict[SlotClock, list[int]]:
    times: dict[SlotClock, list[int]] = defaultdict(list)
    for origin, length, time_ms, *_ in vectors():
        times[SlotClock(origin, length)].append(time_ms)
    return times


def values(times: list[int]) -> str:
    rows = ", ".join(f"(CAST({t} AS BIGINT))" for t in times)
    return f"(SELECT t, TO_TIMESTAMP_LTZ(t, 3) AS rt FROM (VALUES {rows}) AS v(t))"


#: Python's datetime range (years 1-9999), in which the expected window start can be written.
DATETIME_MS = (-62_135_596_800_000, 253_402_300_799_999)
EPOCH = datetime(1970, 1, 1)


def test_the_tumbling_window_of_a_time_is_its_slot(t_env: Any) -> None:
    checked = 0
    for clock, every in by_clock().items():
        times = [t for t in every if DATETIME_MS[0] <= clock.start_ms(clock.slot_of(t)) <= DATETIME_MS[1]]
        checked += len(times)
        query = f"SELECT t, CAST(window_start AS STRING) FROM {slot_sql.tumble('w', 'rt', clock)}"
        t_env.create_temporary_view("w", t_env.sql_query(f"SELECT * FROM {values(times)}"))
        try:
            got = dict(query_rows(t_env, query))
        finally:
            t_env.drop_temporary_view("w")
        want = {t: (EPOCH + timedelta(milliseconds=clock.start_ms(clock.slot_of(t))))
                .isoformat(sep=" ", timespec="milliseconds") for t in times}
        assert got == want, clock
    assert checked >= 90


def test_an_interval_literal_spells_its_milliseconds() -> None:
    assert slot_sql.interval(0) == "INTERVAL '0 00:00:00.000' DAY(9) TO SECOND(3)"
    assert slot_sql.interval(90_061_001) == "INTERVAL '1 01:01:01.001' DAY(9) TO SECOND(3)"
