"""Slotted event tables and personalized requirement draws (jobs/evaluation/datasets.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pwevent.jobs.common.synthetic import RequirementDraw, SyntheticStream
from pwevent.jobs.evaluation.datasets import EventTable, SyntheticDataset


def table():
    # user 0: two events in slot 1 (the later one, value 2, wins), one in slot 3; user 1: one in slot 2.
    return EventTable(
        "t", user=np.array([0, 0, 1, 0]), time_ms=np.array([1_000, 5_000, 12_000, 25_000]),
        value=np.array([1, 2, 0, 1]), user_names=("a", "b"), labels=("x", "y", "z"),
    )


def test_slotted_keeps_each_users_last_event_per_slot():
    slotted = table().slotted(10_000, origin_ms=0)
    assert slotted.slots == 3 and slotted.users == 2 and slotted.d == 3
    per_slot = [(u.tolist(), v.tolist()) for u, v in slotted.slot_values()]
    assert per_slot == [([0], [2]), ([1], [0]), ([0], [1])]


def test_slotted_default_origin_floors_the_first_event():
    assert table().slotted(10_000).origin_ms == 0


def test_table_validates_values_and_lengths():
    with pytest.raises(ValueError, match="cells"):
        EventTable("t", np.array([0]), np.array([0]), np.array([5]), ("a",), ("x",))
    with pytest.raises(ValueError, match="rows"):
        EventTable("t", np.array([0, 0]), np.array([0]), np.array([0, 0]), ("a",), ("x",))


def test_write_jsonl(tmp_path):
    path = tmp_path / "events.jsonl"
    assert table().write_jsonl(path) == 4
    first = json.loads(path.read_text().splitlines()[0])
    assert first == {"user": "a", "time": "1970-01-01T00:00:01Z", "value": 1}


def test_synthetic_dataset_has_everybody_every_slot():
    data = SyntheticDataset(SyntheticStream("Sin", 50, 4, seed=1))
    rows = list(data.slot_values())
    assert len(rows) == 4 and all(len(u) == 50 and set(np.unique(v)) <= {0, 1} for u, v in rows)


def test_requirement_draw_levels_and_strict_ratio():
    reqs = RequirementDraw(0.6, 120).fixed(3000, seed=0)
    assert {r.epsilon for r in reqs} == {0.6, 0.8, 1.0} and {r.w for r in reqs} == {40, 80, 120}
    strict = RequirementDraw(0.6, 120, strict_ratio=0.8).fixed(3000, seed=0)
    share = np.mean([(r.epsilon, r.w) == (0.6, 120) for r in strict])
    assert 0.75 < share < 0.85
    with pytest.raises(ValueError, match="strict_ratio"):
        RequirementDraw(0.6, 120, strict_ratio=1.5)


def test_dynamic_schedule_redraws_every_s_slots():
    user_type, schedule = RequirementDraw(0.6, 120, types=3, change_every=10).dynamic(30, 25, seed=0)
    assert sorted(schedule) == [1, 11, 21] and set(user_type) <= {0, 1, 2}
    for per_type in schedule.values():
        assert all(r.backward.w == 1 and r.forward.w <= 120 and r.forward.epsilon >= 0.6 for r in per_type)
