"""The Population operator without Flink (jobs/common/population_operator.py): rows in any order
before their slot's end, slot ends chosen by the test, a snapshot taken mid-stream (this version's,
and one written by the previous version of the job, tests/jobs/data/population-state-v1.pickle)
restored into an operator with another generator, which then continues exactly as the uninterrupted
one does (the previous version's: but for the intervals, whose excess starts afresh)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.membership import Membership, UserState
from pwevent.jobs.common.population_operator import (
    ROW_VERSION,
    STATE_VERSION,
    PopulationOperator,
    SlotChanges,
    SlotCount,
    change_groups,
    changes_of_groups,
    row_from_json,
    row_to_json,
)
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.operators.noise import NumpyRandomness
from pwevent.state.population import MembershipChange
from pwevent.state.requirements import Requirement

#: The scenario the version-1 state was written with (30 users registering over slots 1-6, four
#: cells, Adaptive with the Kalman post-processing, seed 11), and that state after slot 6.
#: Adaptive starting with even spending, the default of the release that wrote VERSION_1's state.
CONFIG = parse_config({"mechanism": "Adaptive", "slot": "60s", "origin": "2024-01-01T00:00:00Z",
                       "domain": {"type": "cells", "d": 4}, "noise": "numpy-fast", "postprocess": "kalman",
                       "caps": {"max_w": 50}, "adaptive": {"start": "Uniform"}})
VERSION_1 = Path(__file__).parent / "data" / "population-state-v1.pickle"
SLOTS, SPLIT = 12, 6


def rows_of(slot: int, membership: Membership, states: dict[int, UserState]) -> list[SlotChanges | SlotCount]:
    """The slot's membership changes and counts per (class, cell), as the job's SQL delivers them."""
    out: list[SlotChanges | SlotCount] = []
    for user in range(30):
        if user % 6 + 1 == slot:
            applied = membership.apply(f"u{user}", states.get(user, UserState()), slot,
                                       Requirement(10 + user % 3, 1.0 + 0.5 * (user % 2)))
            states[user] = applied.state
            assert applied.change is not None
            out.append(SlotChanges(slot, (applied.change,)))
    rng = np.random.default_rng(slot)
    counts: dict[tuple[str, int], int] = {}
    for state in states.values():
        if rng.random() < 0.8:
            key = (str(state.class_id), int(rng.integers(0, 4)))
            counts[key] = counts.get(key, 0) + 1
    out += [SlotCount(slot, cls, cell, n) for (cls, cell), n in counts.items()]
    return out


def run(restore_at: int | None = None, state: bytes | None = None) -> list[dict]:
    """The releases of slots 1..SLOTS (from `restore_at` + 1 on when restoring `state`, or this run's
    own snapshot at `restore_at`), each slot's rows handed over in reverse order."""
    operator = PopulationOperator(CONFIG, NumpyRandomness(11))
    membership, states = Membership(RequirementRules(CONFIG.mechanism_spec(), 50)), {}
    releases = []
    for slot in range(1, SLOTS + 1):
        rows = rows_of(slot, membership, states)
        if restore_at is not None and slot == restore_at + 1:
            snapshot = state if state is not None else operator.snapshot()
            operator = PopulationOperator(CONFIG, NumpyRandomness(999))
            operator.restore(snapshot)
            releases = []
        kept = []
        for row in reversed(rows):
            keep, emitted = operator.on_row(row)
            assert keep and not emitted.releases and not emitted.dead_letters
            kept.append(row)
        closed = operator.on_slot_end(slot, kept, ended=False)
        assert closed.rest == [] and closed.next_slot == slot + 1
        releases += [record for _, record in closed.emitted.releases]
    return releases


def test_a_snapshot_is_versioned_json_and_its_restore_continues_like_the_uninterrupted_operator() -> None:
    uninterrupted = run()
    assert [r["slot"] for r in uninterrupted] == list(range(1, SLOTS + 1))
    assert {r["kind"] for r in uninterrupted} - {"publish", "skip", "nullify"} == set()
    operator = PopulationOperator(CONFIG, NumpyRandomness(11))
    assert json.loads(operator.snapshot())["version"] == STATE_VERSION
    assert run(restore_at=SPLIT) == uninterrupted[SPLIT:]


def test_the_previous_versions_state_is_restored() -> None:
    """Version 1: a pickled pair (the engine's bytes with a hex-pickled generator state, the
    smoother's snapshot), written by the job before the versioned codec after slot 6 of `run`. Its
    smoother snapshot is the shared-R bank's (one covariance per filter, no excess,
    operators/postprocess.py): the per-cell bank continues from it with the excess afresh, so every
    field but `interval` continues as the uninterrupted run, and the intervals still hold `smoothed`."""
    restored, uninterrupted = run(restore_at=SPLIT, state=VERSION_1.read_bytes()), run()[SPLIT:]
    assert [{**r, "interval": None} for r in restored] == [{**r, "interval": None} for r in uninterrupted]
    for record in restored:
        low, high = np.array(record["interval"]).T
        assert (low <= record["smoothed"]).all() and (record["smoothed"] <= high).all()
        assert (low >= 0).all() and (high <= record["population"]).all()


def test_a_state_of_an_unknown_version_is_refused() -> None:
    operator = PopulationOperator(CONFIG, NumpyRandomness(11))
    with pytest.raises(ValueError, match="version 3"):
        operator.restore(json.dumps({"version": 3, "engine": {}, "smoother": None}).encode())


def test_rows_of_later_slots_wait_and_every_slot_is_decided_in_order() -> None:
    """A slot end decides every slot not decided yet up to it, empty ones too, and hands back the rows
    of later slots; at the end of a bounded input, every slot up to the last one its rows name."""
    operator = PopulationOperator(CONFIG, NumpyRandomness(3))
    membership, states = Membership(RequirementRules(CONFIG.mechanism_spec(), 50)), {}
    first, second = rows_of(1, membership, states), rows_of(2, membership, states)
    later = [SlotCount(5, c.cls, c.cell, c.n) for c in second if isinstance(c, SlotCount)]
    closed = operator.on_slot_end(3, first + [r for r in second if isinstance(r, SlotChanges)] + later, ended=False)
    assert [slot for slot, _ in closed.emitted.releases] == [1, 2, 3]
    assert closed.rest == later and closed.next_slot == 4
    assert [report.slot for report in closed.emitted.reports] == [1, 2, 3]
    assert closed.emitted.releases[2][1]["population"] == 10  # the users of slots 1 and 2 (u % 6 in 0, 1)
    keep, emitted = operator.on_row(SlotCount(2, later[0].cls, 0, 3))  # a slot already decided: not kept,
    assert not keep and [(d["reason"], d["position"]) for d in emitted.dead_letters] == [("late", "slot 2")]
    assert "3 events of class" in emitted.dead_letters[0]["detail"]  # and not dropped silently
    # A bounded input ended: each slot's timer fires; slot 4's has no row of its own to decide up to,
    # slot 5's decides 4 and 5.
    ended = operator.on_slot_end(4, closed.rest, ended=True)
    assert ended.emitted.releases == [] and ended.rest == later and ended.next_slot is None
    ended = operator.on_slot_end(5, ended.rest, ended=True)
    assert [slot for slot, _ in ended.emitted.releases] == [4, 5] and ended.rest == []


def test_kept_rows_are_versioned_json_and_come_back_equal() -> None:
    """The rows the host keeps until their slot ends (`row_to_json`)."""
    membership, states = Membership(RequirementRules(CONFIG.mechanism_spec(), 50)), {}
    rows = rows_of(1, membership, states)
    assert {type(row) for row in rows} == {SlotChanges, SlotCount}
    for row in rows:
        data = row_to_json(row)
        assert json.loads(data)["version"] == ROW_VERSION
        assert row_from_json(data) == row
    with pytest.raises(ValueError, match="version 99"):
        row_from_json(json.dumps({"version": 99, "kind": "present"}).encode())


def test_changes_in_groups_come_back_as_the_same_changes_in_order() -> None:
    """`change_groups` (the kept form; `pwevent.flink.membership.ChangeBatches` writes the same groups without
    their slot) and `changes_of_groups`: registrations and forks, two slots and two requirements, each
    change checked against its class id on the way back."""
    a, b = Requirement(10, 1.0), Requirement(5, 0.5)
    root = MembershipChange.of(3, "u1", None, a)
    changes = (root, MembershipChange.of(3, "u\"2", None, b), MembershipChange.of(3, "u3", None, a),
               MembershipChange.of(4, "u4", None, a))
    groups = change_groups(changes)
    assert [(g["slot"], g["users"]) for g in groups] == [(3, ["u1", "u3"]), (3, ['u"2']), (4, ["u4"])]
    assert sorted(changes_of_groups(groups), key=lambda c: c.user) == sorted(changes, key=lambda c: c.user)
    unslotted = [{k: v for k, v in g.items() if k != "slot"} for g in groups[:2]]
    assert set(changes_of_groups(unslotted, 3)) == set(changes[:3])
    forged = [{**groups[0], "target": "0" * 20}]
    with pytest.raises(ValueError, match="is not the class of this change"):
        changes_of_groups(forged)
