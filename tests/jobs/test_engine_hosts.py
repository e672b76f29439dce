"""The Engine serves both hosts: the replay's per-user path (`declare` + `step`) and the job's class
path (the Population operator: `apply` + `decide`, with counts per class) give the same releases and
spend log, for every mechanism; a snapshot
taken mid-stream and restored continues exactly as the uninterrupted engine does."""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.membership import Membership, UserState
from pwevent.jobs.common.population_operator import PopulationOperator, SlotChanges, SlotCount
from pwevent.jobs.common.release import release_record
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.shared_budget import SharedBudget
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.registry import REGISTRY, mechanism
from pwevent.state.requirements import DynamicRequirement, Requirement

D, USERS, SLOTS = 3, 12, 16


def requirement(name: str, user: int, slot: int):
    if REGISTRY.get(name).dynamic:
        level = (user + slot // 5) % 3 if user % 2 else user % 3
        return DynamicRequirement(Requirement(1, 10.0), Requirement(4 + 2 * level, 0.8 + 0.4 * level))
    return Requirement(4 + 2 * (user % 3), 0.8 + 0.4 * (user % 3))


def spec(name: str):
    return mechanism(name, 8, 1.0)  # the global (8, 1.0) serves the baselines; the others ignore it


def declarations(name: str):
    """(slot, user, requirement): half the users join late, dynamic users change every 5 slots."""
    for slot in range(1, SLOTS + 1):
        for user in range(USERS):
            join = 1 if user < USERS // 2 else 1 + user % 7
            if slot == join or (REGISTRY.get(name).dynamic and slot > join and slot % 5 == 0):
                yield slot, user, requirement(name, user, slot)


def presence(slot: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(slot)
    users = np.flatnonzero(rng.random(USERS) < 0.7)
    return users, rng.integers(0, D, len(users))


def config(name: str) -> Config:
    return parse_config({"mechanism": name, "slot": "1s", "origin": 0, "domain": {"type": "cells", "d": D},
                         **REGISTRY.get(name).global_keys(8, 1.0), "caps": {"max_w": 20}, "noise": "numpy-fast"})


@pytest.mark.parametrize("name", REGISTRY.names())
def test_the_job_path_equals_the_replay_path(name: str) -> None:
    """The job's Population (`PopulationOperator`: Membership's changes and counts per (class, cell),
    each slot's rows handed over in reverse order) against the replay's per-user path of the same
    Engine (in the replay's `SharedBudget`, which adds each slot's utilisation record): the same
    releases, field by field, and the same spend log."""
    cfg = config(name)
    replay_log: list[dict] = []
    replay = SharedBudget(cfg, NumpyRandomness(5), replay_log.append)
    job = PopulationOperator(cfg, NumpyRandomness(5))
    smoother = cfg.smoother()
    membership = Membership(RequirementRules(cfg.mechanism_spec(), 20))
    states: dict[int, UserState] = {}
    pending = list(declarations(name))
    job_log: list[dict] = []
    for slot in range(1, SLOTS + 1):
        rows: list[SlotChanges | SlotCount] = []
        for _, user, req in [p for p in pending if p[0] == slot]:
            replay.declare(f"u{user}", slot, req)
            applied = membership.apply(f"u{user}", states.get(user, UserState()), slot, req)
            states[user] = applied.state
            if applied.change is not None:
                rows.append(SlotChanges(slot, (applied.change,)))
        users, values = presence(slot)
        users_in = np.array([u for u in users if replay.index_of(f"u{u}") is not None], dtype=np.int64)
        cells = np.array([values[list(users).index(u)] for u in users_in], dtype=np.int64)
        dense = np.array([replay.index_of(f"u{u}") for u in users_in], dtype=np.int64)
        want = replay.step(slot, dense, [cells])[0].outcome
        counts: dict[tuple[str, int], int] = {}
        for user, cell in zip(users_in, cells, strict=True):
            key = (str(states[int(user)].class_id), int(cell))
            counts[key] = counts.get(key, 0) + 1
        rows += [SlotCount(slot, cls, cell, n) for (cls, cell), n in counts.items()]
        for row in rows:
            assert job.on_row(row)[0]
        closed = job.on_slot_end(slot, rows[::-1], ended=False)
        job_log += closed.emitted.audit
        assert closed.emitted.releases == [(slot, release_record(want, cfg, job.rng.label, smoother))], \
            f"slot {slot}"
    assert sorted(map(str, job_log)) == sorted(map(str, replay_log))
    assert [r["slot"] for r in job_log if r["record"] == "utilisation"] == list(range(1, SLOTS + 1))


def test_a_restored_snapshot_continues_like_the_uninterrupted_engine() -> None:
    """The job's path: users tracked outside the engine (the keyed Membership operator); the
    engine's snapshot holds the classes, the release history and the seeded generator."""
    def run(split: int | None) -> list[tuple[str, list[int]]]:
        engine = Engine(spec("DPBA"), D, NumpyRandomness(9), 20)
        membership = Membership(RequirementRules(spec("DPBA"), 20))
        states: dict[int, UserState] = {}
        out = []
        for slot in range(1, SLOTS + 1):
            if slot == split:  # a restart: a new engine (other seed) restored from the snapshot
                restored = Engine(spec("DPBA"), D, NumpyRandomness(123), 20)
                restored.restore(engine.snapshot())
                engine = restored
            for _, user, req in [d for d in declarations("DPBA") if d[0] == slot]:
                applied = membership.apply(f"u{user}", states.get(user, UserState()), slot, req)
                states[user] = applied.state
                if applied.change is not None:
                    engine.apply(applied.change)
            counts: dict[str, np.ndarray] = {}
            for user, cell in zip(*presence(slot), strict=True):
                if int(user) in states:
                    counts.setdefault(states[int(user)].class_id, np.zeros(D, dtype=np.int64))[cell] += 1
            outcome, _ = engine.decide(slot, counts)
            out.append((outcome.kind.value, outcome.counts.tolist()))
        return out

    assert run(split=9) == run(split=None)
