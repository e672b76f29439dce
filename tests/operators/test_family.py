"""Adaptive's switch rule (operators/family.py, docs/mechanisms.md section 14): public evidence only,
a sliding window since the last switch, hysteresis, the drift test of even spending, and a state
that survives a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.membership import Membership, UserState
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.operators.family import ABSORPTION, DISTRIBUTION, EVEN, Adaptive, FamilyRule, FamilySwitch
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.obs import BudgetChoice
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
    switch = FamilySwitch(FamilyRule(evidence=4, start=DISTRIBUTION))
    feed = Feed(switch)
    assert feed("SSS") == [DISTRIBUTION] * 3  # the window is not full yet
    assert feed("S") == [ABSORPTION] and switch.since == 5  # in force from the next slot
    assert switch.rate is None  # the evidence starts again under the new family


def test_hysteresis_and_re_decision():
    switch = FamilySwitch(FamilyRule(evidence=4, switch_rate=0.5, hysteresis=0.25, start=DISTRIBUTION))
    feed = Feed(switch)
    assert feed("PSPS") == [DISTRIBUTION] * 4
    assert feed("SS") == [DISTRIBUTION] * 2  # windows SPSS, PSSS: 0.25 is not below 0.25
    assert feed("S") == [ABSORPTION]  # SSSS: 0 < 0.25
    assert feed("PPSS") == [ABSORPTION] * 4  # a fresh window: PPSS = 0.5 is not 0.75
    assert feed("PPP") == [ABSORPTION, ABSORPTION, EVEN]  # PSSP, SSPP, then SPPP = 0.75: even spending


def test_slots_without_a_dissimilarity_are_no_evidence():
    switch = FamilySwitch(FamilyRule(evidence=2), ABSORPTION)
    assert Feed(switch)("NNNNNN") == [ABSORPTION] * 6 and switch.rate is None


def test_the_state_round_trips_and_rules_are_validated():
    switch = FamilySwitch(FamilyRule(evidence=3, start=DISTRIBUTION))
    Feed(switch)("SSSPS")
    again = FamilySwitch(FamilyRule(evidence=3))
    again.restore(switch.to_json())
    assert (again.family, list(again.recent)) == (switch.family, list(switch.recent))
    assert (again.since, again.family) == (4, "PBA")  # SSS switched after slot 3
    even = FamilySwitch(FamilyRule(evidence=3))
    Even(even)([0, 0, 0], [100.0, 100.0, 100.0])
    copy = FamilySwitch(FamilyRule(evidence=3))
    copy.restore(even.to_json())
    assert (copy.family, list(copy.drift), copy.last) == (EVEN, list(even.drift), even.last) and copy.last
    with pytest.raises(ValueError, match="unknown family"):
        again.restore({"family": "Sample", "since": 1, "recent": []})
    for bad in ({"evidence": 1}, {"evidence": "x"}, {"switch_rate": 0.95}, {"hysteresis": -0.1},
                {"static_drift": -1.0}, {"static_drift": float("nan")}, {"start": "Sample"}):
        with pytest.raises(ValueError):
            FamilyRule(**bad)  # type: ignore[arg-type]


class Even:
    """Even releases for a FamilySwitch: one publication per slot of one cell with the given count
    and error variance; each call returns the family after each slot."""

    def __init__(self, switch: FamilySwitch) -> None:
        self.switch = switch
        self.slot = 0

    def __call__(self, counts: list[int], variances: list[float]) -> list[str]:
        out = []
        for count, variance in zip(counts, variances, strict=True):
            self.slot += 1
            self.switch.observe(SlotOutcome(self.slot, Kind.PUBLISH, np.array([count]), 1,
                                            publication=BudgetChoice(0.01, variance)))
            out.append(self.switch.family)
        return out


def test_even_spending_estimates_the_drift_from_consecutive_releases():
    """(r_b - r_a)^2 - R_a - R_b per slot between them: 0-10-0 with R = 1 gives 100 - 2 = 98 per pair."""
    switch = FamilySwitch(FamilyRule(evidence=2, static_drift=0.5))
    assert Even(switch)([0, 10, 0], [1.0, 1.0, 1.0]) == [EVEN] * 3
    assert list(switch.drift) == [(98.0, 1.0), (98.0, 1.0)]
    bound = switch.drift_bound()
    assert bound is not None and bound[0] == pytest.approx(98.0) and bound[1] == 1.0  # no spread
    assert switch.rate is None  # even slots run no dissimilarity: no publication-share evidence


def test_a_static_stream_under_even_spending_switches_to_absorption():
    """Releases that differ by no more than their noise (drift bound below static_drift R) switch;
    the evidence window must be full first; a drifting stream stays even."""
    switch = FamilySwitch(FamilyRule(evidence=3, static_drift=0.1))
    feed = Even(switch)
    assert feed([5, 6, 5], [1.0, 1.0, 1.0]) == [EVEN] * 3  # two pairs: the window is not full yet
    assert feed([6], [1.0]) == [ABSORPTION] and switch.since == 5  # 1 - 2 = -1 per pair: static
    assert switch.last is None and not switch.drift  # the evidence starts again
    moving = FamilySwitch(FamilyRule(evidence=3, static_drift=0.1))
    assert Even(moving)(list(range(0, 400, 20)), [1.0] * 20) == [EVEN] * 20  # 400 - 2 per slot
    assert moving.drift_bound() == (398.0, 1.0)


def test_a_noisy_drift_estimate_does_not_switch():
    """The bound adds DRIFT_CONFIDENCE standard errors: estimates of -100 and 96 average -2, below
    0.6 x 50, but their spread puts the bound above it."""
    rule = FamilyRule(evidence=2, static_drift=0.6)
    switch = FamilySwitch(rule)
    assert Even(switch)([0, 0, 14], [50.0, 50.0, 50.0]) == [EVEN] * 3  # pairs: 0 - 100, 196 - 100
    bound = switch.drift_bound()
    assert bound is not None and bound[0] > 0.6 * 50 > sum(q for q, _ in switch.drift) / 2


def test_skips_and_gaps_under_even_spending():
    """A slot without a publication (no users) is no evidence; a gap of g slots divides the excess by g."""
    switch = FamilySwitch(FamilyRule(evidence=2, static_drift=0.0))
    Even(switch)([0], [1.0])
    switch.observe(SlotOutcome(2, Kind.SKIP, np.array([0]), 0))
    switch.observe(SlotOutcome(3, Kind.PUBLISH, np.array([6]), 1, publication=BudgetChoice(0.01, 1.0)))
    assert list(switch.drift) == [(17.0, 1.0)]  # (36 - 2) / 2


def run(split: int | None, slots: int = 40) -> list[tuple[str, str | None, list[int]]]:
    """The job's path (users tracked outside the engine, as by the keyed Membership operator): an
    Engine running Adaptive (evidence 3) on a stream that alternates between busy and quiet; a restart
    from the snapshot at `split` (new engine, other seed) must continue exactly as the uninterrupted one."""
    def engine(seed: int) -> Engine:
        spec = MechanismSpec("Adaptive", Adaptive(FamilyRule(evidence=3, static_drift=1.0)), None)
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
    assert families[0] == EVEN and {EVEN, ABSORPTION} <= set(families)  # it switched, at slot boundaries
    assert [kind for (kind, _, _), family in zip(whole, families, strict=True) if family == EVEN] == \
        ["publish"] * families.count(EVEN)  # even spending publishes at every slot
    assert run(split=17) == whole
