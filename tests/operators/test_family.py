"""Adaptive's switch rule (operators/family.py, docs/mechanisms.md section 14): public evidence only,
a sliding window since the last switch, hysteresis, the drift test of even spending, and a state
that survives a checkpoint."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.membership import Membership, UserState
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.operators.family import (
    ABSORPTION,
    BURST,
    DISTRIBUTION,
    DRIFT_CONFIDENCE,
    EVEN,
    Adaptive,
    FamilyRule,
    FamilySwitch,
    day_offset,
)
from pwevent.operators.noise import NumpyRandomness, discrete_laplace_variance
from pwevent.operators.obs import BudgetChoice, cell_load, optimal_budget
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
    switch = FamilySwitch(FamilyRule(evidence=4), ABSORPTION)
    assert Feed(switch)("NNNNNN") == [ABSORPTION] * 6 and switch.rate is None


def test_the_state_round_trips_and_rules_are_validated():
    switch = FamilySwitch(FamilyRule(evidence=4, start=DISTRIBUTION))
    Feed(switch)("SSSSPS")
    again = FamilySwitch(FamilyRule(evidence=4, start=EVEN))
    again.restore(switch.to_json())
    assert (again.family, list(again.recent)) == (switch.family, list(switch.recent))
    assert (again.since, again.family) == (5, "PBA")  # SSSS switched after slot 4
    even = FamilySwitch(FamilyRule(evidence=4, start=EVEN))
    Even(even)([0, 3, 1])
    copy = FamilySwitch(FamilyRule(evidence=4, start=EVEN))
    copy.restore(even.to_json())
    assert (copy.family, list(copy.releases)) == (EVEN, [[0], [3], [1]])
    with pytest.raises(ValueError, match="unknown family"):
        again.restore({"family": "BD", "since": 1, "recent": []})
    for bad in ({"evidence": 3}, {"evidence": "x"}, {"switch_rate": 0.95}, {"hysteresis": -0.1},
                {"static_drift": -1.0}, {"static_drift": float("nan")}, {"start": "BD"},
                {"probe": 0.0}, {"probe": 1.5}, {"probe": True}, {"probe": float("nan")},
                {"level_margin": -1.0}, {"level_margin": float("inf")}, {"level_margin": True}):
        with pytest.raises(ValueError):
            FamilyRule(**bad)  # type: ignore[arg-type]


class Even:
    """Even releases for a FamilySwitch: one publication per slot of one cell with the given count;
    each call returns the family after each slot."""

    def __init__(self, switch: FamilySwitch) -> None:
        self.switch = switch
        self.slot = 0

    def __call__(self, counts: list[int]) -> list[str]:
        out = []
        for count in counts:
            self.slot += 1
            self.switch.observe(SlotOutcome(self.slot, Kind.PUBLISH, np.array([count]), 1,
                                            publication=BudgetChoice(0.01, 1.0)))
            out.append(self.switch.family)
        return out


def loaded(counts: list[int], **rule: float) -> FamilySwitch:
    """A switch in even spending holding one-cell releases `counts` (as restored from a snapshot)."""
    switch = FamilySwitch(FamilyRule(evidence=4, start=EVEN, **rule))  # type: ignore[arg-type]
    switch.restore({"family": EVEN, "since": 1, "recent": [], "releases": [[c] for c in counts]})
    return switch


def test_even_spending_estimates_the_drift_from_two_lags():
    """evidence 4, lag 2: a trend of 10 per slot has squared differences 100 at lag 1 and 400 at lag
    2, so Q = 300 per slot and R = 100 / 2; a run that does not spread (no standard error) is its
    bound. Even slots run no dissimilarity, so there is no publication-share evidence."""
    assert loaded([0, 10, 20]).drift_bound() is None  # not full yet
    assert loaded([0, 10, 20, 30]).drift_bound() == (300.0, 50.0)
    switch = FamilySwitch(FamilyRule(evidence=4, static_drift=1.0, start=EVEN))
    assert Even(switch)([0, 10, 20, 30]) == [EVEN] * 4 and switch.rate is None
    assert not switch.releases  # the block was tested; the next one starts empty
    assert Even(switch)([40, 50, 60]) == [EVEN] * 3 and len(switch.releases) == 3


def test_a_static_stream_under_even_spending_switches_to_absorption():
    """Releases that jump by their noise and come back (lag-2 differences 0, lag-1 100): the drift is
    -100 < static_drift R once the block of `evidence` releases is full; the evidence starts again."""
    switch = FamilySwitch(FamilyRule(evidence=4, static_drift=0.0, start=EVEN))
    feed = Even(switch)
    assert feed([0, 10, 0]) == [EVEN] * 3
    assert feed([10]) == [ABSORPTION] and switch.since == 5
    assert not switch.releases and switch.drift_bound() is None


def test_a_noisy_drift_estimate_does_not_switch():
    """0, 10, 0, 0: Q = 50 - 66.7 = -16.7, below 1 x R = 33.3, but DRIFT_CONFIDENCE standard errors
    (sqrt(3333/3 + 5000/2) = 60.1 each) put the bound above it."""
    bound = loaded([0, 10, 0, 0]).drift_bound()
    assert bound is not None and bound[0] == pytest.approx(-50 / 3 + DRIFT_CONFIDENCE * 60.093, abs=0.01)
    assert bound[1] == pytest.approx(100 / 3) and bound[0] > bound[1]
    assert Even(FamilySwitch(FamilyRule(evidence=4, static_drift=1.0, start=EVEN)))([0, 10, 0, 0]) == [EVEN] * 4


def test_a_slot_without_an_even_release_starts_the_run_again():
    """Consecutive releases only: a skip (no users) empties the window."""
    switch = FamilySwitch(FamilyRule(evidence=4, static_drift=0.0, start=EVEN))
    Even(switch)([0, 10, 0])
    switch.observe(SlotOutcome(4, Kind.SKIP, np.array([0]), 0))
    assert not switch.releases
    feed = Even(switch)
    feed.slot = 4
    assert feed([10, 0, 10]) == [EVEN] * 3 and len(switch.releases) == 3


def run(split: int | None, slots: int = 40) -> list[tuple[str, str | None, list[int]]]:
    """The job's path (users tracked outside the engine, as by the keyed Membership operator): an
    Engine running Adaptive (evidence 3) on a stream that alternates between busy and quiet; a restart
    from the snapshot at `split` (new engine, other seed) must continue exactly as the uninterrupted one."""
    def engine(seed: int) -> Engine:
        spec = MechanismSpec("Adaptive", Adaptive(FamilyRule(evidence=4, static_drift=100.0, start=EVEN)), None)
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


def test_even_releases_publish_at_obs_for_the_rescaled_error():
    """Even spending publishes at OBS's threshold for the rescaled error of the mean cell, not at the
    lowest budget: a strict registrant (here w = 5, E = 0.1, so 0.02 a slot) is sampled, the counts
    are divided by the kept share, and each ledger is still charged its own E_i/w_i like a
    personalized Uniform. The mean cell's load is the last release's users per cell over all 21 (1 of
    them before the first release)."""
    spec = MechanismSpec("Adaptive", Adaptive(FamilyRule(start=EVEN)), None)
    engine = Engine(spec, 2, NumpyRandomness(3), 10)
    requirements = [Requirement(4, 2.0)] * 20 + [Requirement(5, 0.1)]
    for user, requirement in enumerate(requirements):
        engine.register(user, requirement, 1)
    levels, members = np.array([0.5, 0.02]), np.array([20.0, 1.0])
    p = math.expm1(0.02) / math.expm1(0.5)  # the strict user's keep probability
    share = (20 + p) / 21  # the public expected kept share
    same = NumpyRandomness(3)  # the engine's stream: per slot one binomial per level, then the noise
    last = np.zeros(2, dtype=np.int64)
    for slot in range(1, 4):
        load = min(max(float(last.sum()) / 2, 1.0), 21.0) / 21
        assert cell_load(last, 21) == load
        expected = optimal_budget(levels, members, discrete_laplace_variance, rescaled=True, load=load)
        assert expected is not None and expected.epsilon == 0.5  # the strict user does not set the noise
        assert expected.kept_share == pytest.approx(share, rel=1e-12)
        assert expected.error == pytest.approx(
            (load * p * (1 - p) + float(discrete_laplace_variance(0.5))) / share**2, rel=1e-9)
        outcome, _ = engine.step(slot, np.arange(21), np.array([1] * 10 + [0] * 11))
        assert outcome.kind is Kind.PUBLISH and outcome.family == EVEN and outcome.dissimilarity is None
        assert outcome.publication == expected
        sampled = same.binomial(np.array([[1, 0], [10, 10]]), np.array([[p], [1.0]])).sum(axis=0)
        noisy = sampled + same.discrete_laplace(0.5, 2)
        assert outcome.counts.tolist() == np.rint(noisy / share).astype(np.int64).tolist()
        last = outcome.counts
        for cls in engine.population.live():
            req = cls.requirement
            assert cls.ledger.spent(slot, slot) == pytest.approx((0.0, req.epsilon / req.w))


def burst_engine(seed: int, w: tuple[int, ...] = (6, 8), epsilon: float = 2.0, users: int = 40,
                 day: int = 1) -> Engine:
    """An Engine running the default Adaptive (bursts first, `day` slots in a day) over users with
    windows `w` in turn."""
    engine = Engine(MechanismSpec("Adaptive", Adaptive(FamilyRule(day=day)), None), 4, NumpyRandomness(seed), max(w))
    for user in range(users):
        engine.register(user, Requirement(w[user % len(w)], epsilon), 1)
    return engine


def test_the_default_starts_with_a_probe_and_stays_in_bursts_on_a_sparse_stream():
    """Slot 1 spends the probe's share of each E_i, slot 2 the rest of the window (E_i / ceil(w_i /
    P) of it), then a burst every P slots, P the narrowest w_i (6 here): the users of window 6 spend
    their whole E_i at each, those of window 8 half of it (two bursts fit in 8 slots), within their
    window's room; skips (repeats) in between; every window spends at most E_i, and a stream whose
    cells hold a user or two stays in bursts."""
    engine = burst_engine(5)
    probe = FamilyRule().probe
    kinds, families = [], []
    spends: dict[str, list[float]] = {}
    for slot in range(1, 28):
        outcome, _ = engine.step(slot, np.array([slot % 40]), np.array([slot % 4]))  # one present user
        kinds.append(outcome.kind)
        families.append(outcome.family)
        if outcome.kind is Kind.PUBLISH:
            assert outcome.publication is not None and outcome.publication.kept_share is not None  # rescaled
        for cls in engine.population.live():
            spends.setdefault(cls.id, []).append(cls.ledger.spent(slot, slot)[1])
    assert set(families) == {BURST}
    bursts = [slot for slot, kind in enumerate(kinds, 1) if kind is Kind.PUBLISH]
    assert bursts == [1, 2, 8, 14, 20, 26]
    for cls in engine.population.live():
        req = cls.requirement
        spent = spends[cls.id]
        assert spent[0] == pytest.approx(probe * req.epsilon, rel=1e-12)
        if req.w == 6:  # the period: the rest of the window, then the whole E_i at every burst
            assert spent[1] == pytest.approx((1 - probe) * req.epsilon, rel=1e-12)
            assert all(spent[t - 1] == pytest.approx(req.epsilon, rel=1e-12) for t in bursts[2:])
        else:  # half of E_i; at slot 8 what the window 1-8 has left after the probe and slot 2
            assert spent[1] == pytest.approx(req.epsilon / 2, rel=1e-12)
            assert spent[7] == pytest.approx((1 / 2 - probe) * req.epsilon, rel=1e-12)
            assert all(spent[t - 1] == pytest.approx(req.epsilon / 2, rel=1e-12) for t in bursts[3:])
        for start in range(1, 28 - req.w + 2):  # every window of the user's w within E
            assert sum(spent[start - 1:start - 1 + req.w]) <= req.epsilon * (1 + 1e-12)


def test_a_dense_stream_leaves_bursts_after_the_probe():
    """Every user present in one cell: the probe's level is far above what a burst could win against,
    so even spending is in force from slot 2, within what the probe left of each window (the slots at
    the end of the first window whose room is below E_i/w_i skip)."""
    engine = burst_engine(6, w=(40,), users=400)
    out = [engine.step(slot, np.arange(400), np.zeros(400, dtype=np.int64))[0] for slot in range(1, 50)]
    assert [o.family for o in out] == [BURST] + [EVEN] * 48
    publishing = [o.slot for o in out if o.kind is Kind.PUBLISH]
    # the probe spent 5 slots' worth (1/8 of E = 40 x E/40 / 8): slots 37-40 find no room
    assert publishing == [*range(1, 37), *range(41, 50)]
    ledger = engine.population.live()[0].ledger
    for start in range(1, 11):
        assert sum(sum(ledger.spent(t, t)) for t in range(start, start + 40)) <= 2.0 * (1 + 1e-12)


def test_the_level_test_compares_a_burst_with_what_even_spending_could_win():
    """After a burst: level M = mean(counts^2) - R (R the release's error per cell, scaled to a whole
    burst by the share squared); M above level_margin x period^2 x R means dense (even spending from
    the next slot)."""
    def outcome(slot: int, counts: list[int], error: float) -> SlotOutcome:
        return SlotOutcome(slot, Kind.PUBLISH, np.array(counts, dtype=np.int64), 10,
                           publication=BudgetChoice(1.0, error, 1.0))

    assert FamilyRule().level_margin == 4.0
    dense = FamilySwitch(FamilyRule(probe=0.5))
    dense.narrowest = 10
    dense.observe(outcome(1, [30, 0], 4.0))  # M = 450 - 4 = 446 > 4 x period^2 10^2 x R 4 x share^2 0.25 = 400
    assert (dense.family, dense.since) == (EVEN, 2)
    calm = FamilySwitch(FamilyRule(probe=0.5))
    calm.narrowest = 10
    calm.observe(outcome(1, [4, 2], 4.0))  # M = 10 - 4 = 6 <= 400: stays, the rest at slot 2
    assert (calm.family, calm.next_burst, calm.probing) == (BURST, 2, False)
    calm.observe(outcome(2, [6, 0], 1.0))  # M = 17: above period x R = 10, far below 4 x 10^2 x 1: stays
    assert (calm.family, calm.next_burst) == (BURST, 12)
    calm.observe(outcome(12, [29, 0], 1.0))  # M = 420.5 - 1 = 419.5 > 400: dense now
    assert (calm.family, calm.since) == (EVEN, 13)
    loose = FamilySwitch(FamilyRule(probe=0.5, level_margin=0.0))
    loose.observe(outcome(1, [4, 2], 4.0))  # margin 0: any level above the noise is dense
    assert loose.family == EVEN
    empty = FamilySwitch(FamilyRule(probe=0.5))
    empty.observe(SlotOutcome(1, Kind.SKIP, np.zeros(2, dtype=np.int64), 0))  # no users: the probe waits
    assert (empty.family, empty.next_burst, empty.probing) == (BURST, 2, True)
    spent = FamilySwitch(FamilyRule(probe=0.5))
    spent.observe(SlotOutcome(1, Kind.SKIP, np.zeros(2, dtype=np.int64), 3))  # users, no budget: no evidence
    assert (spent.family, spent.next_burst, spent.probing) == (BURST, 2, False)


def test_the_probe_waits_for_the_first_registered_users():
    """Slots without registered users hold no burst: users who register at slot 4 of a dense stream
    get the probe there (not a whole-E burst that would leave even spending no room for a window)."""
    engine = Engine(MechanismSpec("Adaptive", Adaptive(), None), 4, NumpyRandomness(2), 8)
    out = [engine.step(slot, np.array([], dtype=np.int64), np.array([], dtype=np.int64))[0] for slot in (1, 2, 3)]
    assert [o.kind for o in out] == [Kind.SKIP] * 3 and {o.family for o in out} == {BURST}
    for user in range(400):
        engine.register(user, Requirement(8, 2.0), 4)
    outcome, _ = engine.step(4, np.arange(400), np.zeros(400, dtype=np.int64))
    ledger = engine.population.live()[0].ledger
    assert outcome.kind is Kind.PUBLISH and ledger.spent(4, 4)[1] == pytest.approx(FamilyRule().probe * 2.0)
    assert engine.step(5, np.arange(400), np.zeros(400, dtype=np.int64))[0].family == EVEN  # dense


def test_bursts_survive_a_restart_and_an_earlier_snapshot_restores():
    """A restart between bursts continues exactly as the uninterrupted engine; a snapshot of a
    release without bursts (no burst keys) restores to the same family and evidence."""
    def run(split: int | None) -> list[tuple[str, str | None, list[int]]]:
        current = burst_engine(8)
        out = []
        for slot in range(1, 30):
            if slot == split:
                restored = burst_engine(99)
                restored.restore(current.snapshot())
                current = restored
            outcome, _ = current.step(slot, np.array([slot % 40]), np.array([slot % 4]))
            out.append((outcome.kind.value, outcome.family, outcome.counts.tolist()))
        return out

    whole = run(None)
    assert run(split=14) == whole and run(split=3) == whole
    old = {"family": "Uniform", "since": 1, "recent": [], "releases": [[1], [2]]}
    switch = FamilySwitch(FamilyRule(evidence=4))
    switch.restore(old)
    assert (switch.family, list(switch.releases), switch.probing) == (EVEN, [[1], [2]], False)


def burst_slots(w: tuple[int, ...], day: int, slots: int, split: int | None = None) -> list[int]:
    """The slots `burst_engine(3, w, day=day)` publishes at over `slots` slots of one present user,
    restored at `split` into a fresh engine of the same users and rule from its snapshot."""
    engine = burst_engine(3, w=w, day=day)
    out = []
    for slot in range(1, slots + 1):
        if slot == split:
            restored = burst_engine(99, w=w, day=day)
            restored.restore(engine.snapshot())
            engine = restored
        outcome, _ = engine.step(slot, np.array([slot % 40]), np.array([slot % 4]))
        if outcome.kind is Kind.PUBLISH:
            out.append(slot)
    return out


def test_gaps_of_whole_days_are_a_quarter_of_a_day_longer():
    """4 slots in a day, P = 8 (whole days): every gap after slot 2 is P plus a quarter of a day (9:
    slots 11, 20, 29, 38, at four hours of the day in turn). A restart anywhere, from the snapshot,
    continues the same schedule; P = 6 (not whole days) or `day` 1 has no offset, an odd `day` (8-hour
    slots: 3) one slot, 24 slots a day 6."""
    whole = burst_slots((8,), 4, 40)
    assert whole == [1, 2, 11, 20, 29, 38]
    assert all(burst_slots((8,), 4, 40, split) == whole for split in (2, 5, 11, 12, 21))
    assert burst_slots((8,), 1, 40) == [1, 2, 10, 18, 26, 34]
    assert burst_slots((24,), 3, 60) == [1, 2, 27, 52]
    assert burst_slots((6,), 4, 40) == [1, 2, 8, 14, 20, 26, 32, 38]
    assert [day_offset(24, p) for p in (24, 72, 168, 36, 12)] == [6, 6, 6, 0, 0]
    assert [day_offset(day, day) for day in (1, 2, 3, 4, 48)] == [0, 1, 1, 1, 12]


def test_users_of_a_narrower_window_shorten_the_period_within_every_window():
    """Users of window 12 alone burst every 12 slots at their whole E; users of window 3 who register
    at slot 16 are charged at the next burst (26), which sets P = 3 after it: the first users then
    spend E / 4 every 3 slots, within what each of their windows has left (the window cap), and every
    window of every user stays within E."""
    engine = burst_engine(4, w=(12,), users=20)
    slots, spends = 60, {}
    bursts = []
    for slot in range(1, slots + 1):
        if slot == 16:
            for user in range(20, 30):
                engine.register(user, Requirement(3, 2.0), 16)
        outcome, _ = engine.step(slot, np.array([slot % 20]), np.array([slot % 4]))
        if outcome.kind is Kind.PUBLISH:
            bursts.append(slot)
        for cls in engine.population.live():
            spends.setdefault(cls.id, {})[slot] = cls.ledger.spent(slot, slot)[1]
    assert bursts == [1, 2, 14, 26, *range(29, slots + 1, 3)]
    assert engine.spec.policy.switch.period == 3
    for cls in engine.population.live():
        req, spent = cls.requirement, spends[cls.id]
        per_slot = [spent.get(t, 0.0) for t in range(1, slots + 1)]
        assert max(np.convolve(per_slot, np.ones(req.w))) <= req.epsilon * (1 + 1e-12)
        if req.w == 12:
            assert spent[26] == pytest.approx(req.epsilon, rel=1e-12)  # P was still 12 at slot 26
            assert spent[29] == 0.0  # the window 18-29 holds slot 26's whole E
            assert spent[41] == pytest.approx(req.epsilon / 4, rel=1e-12)
        else:
            assert spent[26] == pytest.approx(req.epsilon, rel=1e-12)
            assert all(spent[t] == pytest.approx(req.epsilon, rel=1e-12) for t in range(29, slots + 1, 3))


def test_a_snapshot_from_before_the_narrowest_period_keeps_its_period():
    """A snapshot from before the narrowest period (its `widest` key, the period it ran at, and the
    day rule's keys) restores with that period; a period that is no whole number of slots is refused."""
    switch = FamilySwitch(FamilyRule(day=4))
    switch.restore({"family": BURST, "since": 1, "recent": [], "releases": [], "next_burst": 10, "probing": False,
                    "widest": 8, "day_stage": "settled", "day_last": None})
    assert (switch.narrowest, switch.period) == (8, 8)
    switch.observe(SlotOutcome(10, Kind.PUBLISH, np.zeros(4, dtype=np.int64), 40,
                               publication=BudgetChoice(2.0, 0.5, 1.0)))
    assert switch.next_burst == 19  # P = 8 is two days: plus a quarter of a day
    fresh = FamilySwitch()
    fresh.restore({"family": BURST, "since": 1, "recent": [], "next_burst": 1, "probing": True, "widest": 1})
    assert (fresh.narrowest, fresh.period) == (None, None)
    with pytest.raises(ValueError, match="burst period"):
        FamilySwitch().restore({**switch.to_json(), "period": 0})
    with pytest.raises(ValueError, match="day must be a whole number"):
        FamilyRule(day=0)


def test_a_probe_below_the_budget_floor_publishes_nothing_and_the_next_burst_is_whole():
    """probe = 1e-300: every probe budget is under caps.min_slot_epsilon, so slot 1 publishes nothing
    and spends nothing; slot 2's burst is each user's whole E (docs/mechanisms.md section 14)."""
    engine = Engine(MechanismSpec("Adaptive", Adaptive(FamilyRule(probe=1e-300)), None), 4, NumpyRandomness(4), 8)
    for user in range(40):
        engine.register(user, Requirement(8, 2.0), 1)
    first, _ = engine.step(1, np.array([0]), np.array([1]))
    ledger = engine.population.live()[0].ledger
    assert first.kind is Kind.SKIP and ledger.spent(1, 1) == (0.0, 0.0)
    second, _ = engine.step(2, np.array([0]), np.array([1]))
    assert second.kind is Kind.PUBLISH and ledger.spent(2, 2)[1] == pytest.approx(2.0)
