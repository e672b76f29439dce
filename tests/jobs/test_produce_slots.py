"""`pwevent produce`'s slot walk and pace (jobs/streaming/produce.py; no broker)."""

from __future__ import annotations

import argparse

import pytest

from pwevent.jobs.common.slots import pace_arg
from pwevent.jobs.streaming.produce import occupied_slots


def test_only_the_slots_that_hold_records_in_the_range_are_walked() -> None:
    line = (b"{}", None, None)
    requirements = {1: [line], 7: [line], 9: []}
    events = {3: [line], 7: [line], 600_001: [line]}
    assert occupied_slots(requirements, events) == [1, 3, 7, 600_001]
    assert occupied_slots(requirements, events, first=2, last=7) == [3, 7]
    assert occupied_slots({}, {}) == []


@pytest.mark.parametrize("text", ["0", "0.0", "0s", "0ms", " 0 "])
def test_a_pace_of_zero_is_no_wait(text: str) -> None:
    assert pace_arg(text) == 0


def test_a_pace_is_otherwise_a_duration() -> None:
    assert pace_arg("500ms") == 500 and pace_arg("2") == 2000
    with pytest.raises(argparse.ArgumentTypeError, match="positive duration"):
        pace_arg("-1s")
