"""Budgets are compared with relative precision (docs/mechanisms.md section 9): no window of any user
ever exceeds its E_i by more than a relative 1e-9, at any admitted budget down to the floor.

Every window here is summed exactly (`fractions.Fraction` of the logged floats), independently of the
auditor's float convolution; the auditor must agree.
"""

from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.release import release_record
from pwevent.jobs.offline.audit import AuditInputs, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.family import ABSORPTION, EVEN, FAMILIES
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.registry import REGISTRY
from pwevent.state.requirements import RELATIVE_TOLERANCE, DynamicRequirement, Requirement

Record = dict[str, Any]
#: The per-slot budget floor's default; the smallest admitted E is 2 FLOOR w.
FLOOR = 1e-14
LIMIT = 1 + Fraction(RELATIVE_TOLERANCE)


def user_series(log: list[Record]) -> dict[str, dict[int, Fraction]]:
    """Each user's exact spend per slot: the spend line of the ledger its member lines put it in."""
    lines = {(r["ledger"], r["slot"]): Fraction(r["spend1"]) + Fraction(r["spend2"])
             for r in log if r["record"] == "spend"}
    last = max((slot for _, slot in lines), default=0)
    joins: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r in log:
        if r["record"] == "member":
            joins[r["user"]].append((r["since"], r["ledger"]))
    series = {}
    for user, moves in joins.items():
        moves.sort(key=lambda move: move[0])
        spend = {}
        for slot in range(moves[0][0], last + 1):
            ledger = [name for since, name in moves if since <= slot][-1]
            spend[slot] = lines.get((ledger, slot), Fraction(0))
        series[user] = spend
    return series


def worst_window(spend: dict[int, Fraction], timeline: list[tuple[int, Any]]) -> Fraction:
    """The largest window sum over its bound, as a ratio, for a user's declared timeline (slot, requirement):
    fixed windows ending at every slot; dynamic backward windows ending and forward windows starting there."""
    if not spend:
        return Fraction(0)
    last = max(spend)
    worst = Fraction(0)

    def total(first: int, end: int) -> Fraction:
        return sum((spend.get(t, Fraction(0)) for t in range(first, end + 1)), Fraction(0))

    for i, (since, requirement) in enumerate(timeline):
        until = timeline[i + 1][0] - 1 if i + 1 < len(timeline) else last
        for t in range(since, until + 1):
            if isinstance(requirement, Requirement):
                worst = max(worst, total(t - requirement.w + 1, t) / Fraction(requirement.epsilon))
            else:
                back, fwd = requirement.backward, requirement.forward
                before = total(t - back.w + 1, t - 1)
                bound = max(Fraction(back.epsilon), before)  # an infeasible EB is projected (section 7)
                worst = max(worst, (before + spend.get(t, Fraction(0))) / bound)
                worst = max(worst, total(t, t + fwd.w - 1) / Fraction(fwd.epsilon))
    return worst


# ------------------------------------------------------------------ the two reproductions of issue 17


def _replay(tmp_path: Path, config: Record, requirements: list[Record], events: list[Record]) -> dict[str, Any]:
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    (tmp_path / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    parsed = parse_config({**config, "noise": "numpy-fast"})  # a seeded replay: a test run
    paths = {name: str(tmp_path / f"{name}.jsonl") for name in ("rel", "spend", "rejects")}
    run_replay(parsed, str(tmp_path / "ev.jsonl"), str(tmp_path / "req.jsonl"), paths["rel"], paths["spend"],
               rejects_out=paths["rejects"], seed=5)
    out = {name: [json.loads(line) for line in Path(path).read_text().splitlines()] for name, path in paths.items()}
    lines = [(f"req:{n}", json.dumps(r)) for n, r in enumerate(requirements, 1)]
    out["audit"] = audit_records(out["spend"], AuditInputs.build(lines, out["rel"], parsed))
    return out


def test_adaptive_at_a_tiny_budget_keeps_every_window(tmp_path: Path) -> None:
    """Adaptive, 200 users at (20, 2.0) flipping cells and a few at (5, 1e-10), switching families
    within a few slots: an absolute 2.5e-10 margin in the caps let the tiny users spend 1.4e-10 over
    5 slots (an absorption publication then even slots), and the audit passed it."""
    requirements = [{"user": f"u{u}", "time": 0, "w": 20, "epsilon": 2.0} for u in range(200)]
    requirements += [{"user": f"t{u}", "time": 0, "w": 5, "epsilon": 1e-10} for u in range(3)]
    rng = np.random.default_rng(1)
    slots = 120
    events = [{"user": r["user"], "time": (slot - 1) * 1000 + 500, "value": int(rng.random() < 0.5)}
              for slot in range(1, slots + 1) for r in requirements]
    config = {"mechanism": "Adaptive", "slot": "1s", "origin": 0, "domain": {"type": "binary"},
              "adaptive": {"evidence": 4, "static_drift": 100.0, "switch_rate": 0.5, "hysteresis": 0.1,
                           "level_margin": 0.0},
              "postprocess": "none"}
    out = _replay(tmp_path, config, requirements, events)
    families = {r.get("family") for r in out["rel"]}
    assert {EVEN, ABSORPTION} <= families, families
    series = user_series(out["spend"])
    for user in ("t0", "t1", "t2"):
        assert worst_window(series[user], [(1, Requirement(5, 1e-10))]) <= LIMIT
    assert out["audit"].ok, out["audit"].render()


def test_a_baseline_refuses_a_user_whose_budget_is_below_the_global_one(tmp_path: Path) -> None:
    """Global (10, 1e-9): users at (10, 2e-13) and (10, 5e-10) are not covered (an absolute 1e-9 margin
    accepted both, and their windows then spent the global 1e-9); (10, 1e-9) and (10, 3e-9) are."""
    declared = {"a": (10, 2e-13), "b": (10, 5e-10), "c": (10, 1e-9), "d": (10, 3e-9)}
    requirements = [{"user": u, "time": 0, "w": w, "epsilon": e} for u, (w, e) in declared.items()]
    events = [{"user": u, "time": (slot - 1) * 1000 + 500, "value": slot % 2} for slot in range(1, 31)
              for u in declared]
    for mechanism in ("Uniform", "Sample", "BD", "BA"):
        folder = tmp_path / mechanism
        folder.mkdir()
        config = {"mechanism": mechanism, "slot": "1s", "origin": 0, "domain": {"type": "binary"},
                  "window": 10, "epsilon": 1e-9, "postprocess": "none"}
        out = _replay(folder, config, requirements, events)
        refused = {json.loads(r["original"])["user"] for r in out["rejects"] if r["source"] == "requirements"}
        assert refused == {"a", "b"}, (mechanism, out["rejects"])
        series = user_series(out["spend"])
        assert set(series) == {"c", "d"}
        for user in ("c", "d"):
            assert worst_window(series[user], [(1, Requirement(*declared[user]))]) <= LIMIT, mechanism
        assert out["audit"].ok, out["audit"].render()


# ------------------------------------------------ every mechanism, down to the floor (property test)


#: E_i = FLOOR * 2 w_i * multiple: the floor itself, just above it, and budgets up to ordinary ones,
#: mixed in one run (where an absolute margin lets the small ones through).
MULTIPLES = [1.0, 1.25, 3.0, 1e3, 1e6, 1e10, 5e12, 1e13]


def _requirement(data: st.DataObject, w_max: int = 8) -> Requirement:
    w = data.draw(st.integers(1, w_max))
    return Requirement(w, FLOOR * 2 * w * data.draw(st.sampled_from(MULTIPLES)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(REGISTRY.names()))
def test_every_mechanism_keeps_every_window_down_to_the_floor(data: st.DataObject, name: str) -> None:
    """Random joins, requirement changes, presence and (for Adaptive) switch rules, with budgets from the
    floor up: every window of every user within a relative 1e-9 of its bound (exact sums), and the
    full audit (which compares with the same precision) passes."""
    entry = REGISTRY.get(name)
    options = ({"evidence": data.draw(st.integers(4, 6)), "static_drift": data.draw(st.sampled_from([0.0, 100.0])),
                "start": data.draw(st.sampled_from(FAMILIES))} if "evidence" in entry.section_keys else {})
    global_ = _requirement(data)
    spec = entry.spec(global_.w, global_.epsilon, options)
    horizon = 12
    log: list[Record] = []
    releases: list[Record] = []
    declared: list[str] = []
    timelines: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    config = parse_config({"mechanism": name, "slot": "1s", "origin": 0, "domain": {"type": "cells", "d": 3},
                           **entry.global_keys(global_.w, global_.epsilon),
                           **({entry.section: options} if options else {}),
                           "caps": {"max_w": horizon}, "postprocess": "none", "noise": "numpy-fast"})
    engine = Engine(spec, 3, NumpyRandomness(data.draw(st.integers(0, 10_000))), horizon, log.append)

    def draw_requirement() -> Requirement | DynamicRequirement:
        if spec.dynamic:
            return DynamicRequirement(_requirement(data), _requirement(data))
        if spec.global_requirement is not None:  # a baseline admits only users it covers
            w = data.draw(st.integers(1, global_.w))
            return Requirement(w, global_.epsilon * data.draw(st.sampled_from([1.0, 1.5, 10.0])))
        return _requirement(data)

    def declare(user: int, requirement: Requirement | DynamicRequirement, slot: int) -> None:
        declared.append(json.dumps({"user": str(user), "time": (slot - 1) * 1000, **requirement.to_json()}))
        timeline = timelines[str(user)]
        if timeline and timeline[-1][0] == slot:
            timeline.pop()
        timeline.append((slot, requirement))

    users = data.draw(st.integers(1, 8))
    slots = data.draw(st.integers(1, 30))
    joins = [data.draw(st.integers(1, slots)) for _ in range(users)]
    for slot in range(1, slots + 1):
        for user in (u for u in range(users) if joins[u] == slot):
            requirement = draw_requirement()
            engine.register(user, requirement, slot)
            declare(user, requirement, slot)
        registered = [u for u in range(users) if engine.class_of(u) is not None]
        if spec.dynamic and registered and data.draw(st.booleans()):
            requirement = draw_requirement()
            engine.redeclare(registered[0], requirement, slot)
            declare(registered[0], requirement, slot)
        present = [u for u in registered if data.draw(st.booleans())]
        values = [data.draw(st.integers(0, 2)) for _ in present]
        outcome, _ = engine.step(slot, np.array(present, dtype=np.int64), np.array(values, dtype=np.int64))
        releases.append(release_record(outcome, config, "numpy-geometric (seeded, not for production)"))
    series = user_series(log)
    for user, spend in series.items():
        assert worst_window(spend, timelines[user]) <= LIMIT, (user, timelines[user])
    lines = [(f"requirements:{n}", text) for n, text in enumerate(declared, 1)]
    full = audit_records(log, AuditInputs.build(lines, releases, config))
    assert full.ok and full.skipped is None, full.render()
