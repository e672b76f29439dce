"""Adaptive's switch rule (operators/family.py, docs/mechanisms.md section 14): public evidence only,
a sliding window since the last switch, hysteresis, and a state that survives a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.membership import Membership, UserState
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.operators.family import ABSORPTION, DISTRIBUTION, Adaptive, FamilyRule, FamilySwitch
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.policies import MechanismSpec
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.requirements import Requirement
from pwevent.state.spend import Kind


class Feed:
    """Public outcomes for a FamilySwitch, slot after slot: P = publish, S = skip, N = nullified (no
    dissimilarity); each call returns the family after each slot."""

    def __init__(self, switch: FamilySwitch) -> None:
        self.switch = switch
        self.slot = 0

    def __call__(self, kinds: str) -> list[str]:
        out = []
        for k in kinds:
            self.slot += 1
            kind = {"P": Kind.PUBLISH, "S": Kind.SKIP, "N": Kind.NULLIFY}[k]
            self.switch.observe(SlotOutcome(self.slot, kind, np.zeros(2, dtype=np.int64), 1,
                                            dissimilarity=None if k == "N" else 1.0))
            out.append(self.switch.family)
        return out


def test_a_quiet_stream_switches_to_absorption_once_the_window_is_full():
    switch = FamilySwitch(FamilyRule(evidence=4))
    feed = Feed(switch)
    assert feed("SSS") == [DISTRIBUTION] * 3  # the window is not full yet
    assert feed("S") == [ABSORPTION] and switch.since == 5  # in force from the next slot
    assert switch.rate is None  # the evidence starts again under the new family


def test_hysteresis_and_re_decision():
    switch = FamilySwitch(FamilyRule(evidence=4, switch_rate=0.5, hysteresis=0.25))
    feed = Feed(switch)
    assert feed("PSPS") == [DISTRIBUTION] * 4
    assert feed("SS") == [DISTRIBUTION] * 2  # windows SPSS, PSSS: 0.25 is not below 0.25
    assert feed("S") == [ABSORPTION]  # SSSS: 0 < 0.25
    assert feed("PPSS") == [ABSORPTION] * 4  # a fresh window: PPSS = 0.5 is not 0.75
    assert feed("PPP") == [ABSORPTION, ABSORPTION, DISTRIBUTION]  # PSSP, SSPP, then SPPP = 0.75


def test_slots_without_a_dissimilarity_are_no_evidence():
    switch = FamilySwitch(FamilyRule(evidence=2))
    assert Feed(switch)("NNNNNN") == [DISTRIBUTION] * 6 and switch.rate is None


def test_the_state_round_trips_and_rules_are_validated():
    switch = FamilySwitch(FamilyRule(evidence=3))
    Feed(switch)("SSSPS")
    again = FamilySwitch(FamilyRule(evidence=3))
    again.restore(switch.to_json())
    assert (again.family, list(again.recent)) == (switch.family, list(switch.recent))
    assert (again.since, again.family) == (4, "PBA")  # SSS switched after slot 3
    with pytest.raises(ValueError, match="unknown family"):
        again.restore({"family": "Uniform", "since": 1, "recent": []})
    for bad in ({"evidence": 0}, {"evidence": "x"}, {"switch_rate": 0.95}, {"hysteresis": -0.1}):
        with pytest.raises(ValueError):
            FamilyRule(**bad)  # type: ignore[arg-type]


def run(split: int | None, slots: int = 40) -> list[tuple[str, str | None, list[int]]]:
    """The job's path (users tracked outside the engine, as by the keyed Membership operator): an
    Engine running Adaptive (evidence 3) on a stream that alternates between busy and quiet; a restart
    from the snapshot at `split` (new engine, other seed) must continue exactly as the uninterrupted one."""
    def engine(seed: int) -> Engine:
        spec = MechanismSpec("Adaptive", Adaptive(FamilyRule(evidence=3)), None)
        return Engine(spec, 2, NumpyRandomness(seed), 10)

    current = engine(4)
    membership = Membership(RequirementRules(current.spec, 10))
    classes = []
    for user in range(30):
        applied = membership.apply(f"u{user}", UserState(), 1, Requirement(4 + user % 3, 2.0 + user % 2))
        assert applied.change is not None and applied.state.class_id is not None
        current.apply(applied.change)
        classes.append(applied.state.class_id)
    out = []
    data = np.random.default_rng(1)
    for slot in range(1, slots + 1):
        if slot == split:
            restored = engine(77)
            restored.restore(current.snapshot())
            current = restored
        values = (data.random(30) < (0.1 if (slot // 8) % 2 else 0.9)).astype(np.int64)
        counts: dict[str, np.ndarray] = {}
        for cid, value in zip(classes, values, strict=True):
            counts.setdefault(cid, np.zeros(2, dtype=np.int64))[value] += 1
        result, _ = current.decide(slot, counts)
        out.append((result.kind.value, result.family, result.counts.tolist()))
    return out


def test_adaptive_in_an_engine_switches_and_survives_a_restart():
    whole = run(None)
    families = [family for _, family, _ in whole]
    assert {DISTRIBUTION, ABSORPTION} <= set(families)  # it switched, at slot boundaries
    assert run(split=17) == whole
