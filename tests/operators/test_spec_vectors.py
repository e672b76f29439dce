"""Every worked example of docs/mechanisms.md (sections 3, 6, 7 and 14)."""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.operators.family import BURST, Adaptive, FamilyRule
from pwevent.operators.obs import BudgetChoice, cell_load, keep_probabilities, optimal_budget
from pwevent.operators.policies import DPBA, DPBD, PBA, PBD, BudgetPolicy, SlotBudget, charge_slot
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.ledger import DynamicLedger, FixedLedger, Ledger
from pwevent.state.requirements import DynamicRequirement, Requirement
from pwevent.state.spend import Kind
from tests.operators.obs_reference import optimal_budget_reference


def continuous_variance(theta):
    return 2.0 / np.asarray(theta, dtype=float) ** 2


class TestOBSExample2:
    budgets = [0.1, 0.4, 0.4, 0.1, 0.4, 0.4, 0.8, 0.8, 0.8, 0.4]

    def test_errors_per_candidate(self):
        levels, counts = np.array([0.1, 0.4, 0.8]), np.array([2, 5, 3])
        for theta, expected in ((0.1, 200.0), (0.4, 15.31), (0.8, 27.73)):
            p = keep_probabilities(levels, theta)
            below = levels < theta
            sampling = (counts[below] * p[below] * (1 - p[below])).sum() + (counts[below] * (1 - p[below])).sum() ** 2
            assert sampling + 2 / theta**2 == pytest.approx(expected, abs=0.01)

    def test_obs_returns_0_4(self):
        choice = optimal_budget(np.array(self.budgets), np.ones(10), continuous_variance)
        assert choice is not None
        assert choice.epsilon == 0.4
        assert choice.error == pytest.approx(15.31, abs=0.01)

    def test_paper_value_89_74_is_a_slip(self):
        ref = optimal_budget_reference(self.budgets, lambda t: 2 / t**2)
        assert ref is not None and ref.epsilon == 0.4


class TestRescaledOBS:
    """Section 14's worked vector: Example 2's budgets with the rescaled error (sampling variance +
    noise variance) / s^2, s the expected kept share; OBS then picks 0.8, not 0.4."""

    levels, counts = np.array([0.1, 0.4, 0.8]), np.array([2.0, 5.0, 3.0])

    def test_keep_probabilities_and_shares(self):
        p = keep_probabilities(self.levels, 0.8)
        assert p == pytest.approx([0.085816, 0.401312, 1.0], abs=1e-6)  # (e^eps - 1) / (e^0.8 - 1)
        for theta, share in ((0.1, 1.0), (0.4, 0.842768), (0.8, 0.517819)):
            assert (self.counts * keep_probabilities(self.levels, theta)).sum() / 10 == pytest.approx(share, abs=1e-6)

    def test_errors_per_candidate(self):
        for theta, expected in ((0.1, 200.0), (0.4, 18.07), (0.8, 16.72)):
            p = keep_probabilities(self.levels, theta)
            share = (self.counts * p).sum() / self.counts.sum()
            error = ((self.counts * p * (1 - p)).sum() + 2 / theta**2) / share**2
            assert error == pytest.approx(expected, abs=0.01)

    def test_obs_returns_0_8_with_its_share(self):
        choice = optimal_budget(self.levels, self.counts, continuous_variance, rescaled=True)
        assert choice is not None and choice.epsilon == 0.8
        assert choice.error == pytest.approx(16.72, abs=0.01)
        assert choice.kept_share == pytest.approx(0.517819, abs=1e-6)
        reference = optimal_budget_reference(TestOBSExample2.budgets, lambda t: 2 / t**2, rescaled=True)
        assert reference is not None and reference.epsilon == 0.8
        assert reference.error == pytest.approx(choice.error, rel=1e-12)


class TestMeanCell:
    """Section 14's "The mean cell" vector: 90 users at 0.1 and 10 at 0.8, error 2 / theta^2. In the
    worst case (every user in one cell) OBS keeps everybody at 0.1; for the mean cell of a release
    with L users per cell (the last release's sum over its d cells, clipped to [1, N]) it samples at
    0.8 while L / N is small."""

    levels, counts = np.array([0.1, 0.8]), np.array([90.0, 10.0])

    @pytest.mark.parametrize(("last", "load"), [([6, 4], 0.05), ([0, 0], 0.01), ([-3, 1], 0.01),
                                                ([60, 50], 0.55), ([150, 90], 1.0)])
    def test_the_load_is_the_last_release_per_cell_over_all_users(self, last, load):
        assert cell_load(np.array(last), 100) == pytest.approx(load, rel=1e-12)

    @pytest.mark.parametrize(("load", "theta", "error"), [(1.0, 0.1, 200.0), (0.55, 0.1, 200.0),
                                                          (0.05, 0.8, 110.72), (0.01, 0.8, 101.73)])
    def test_obs_for_the_mean_cell(self, load, theta, error):
        choice = optimal_budget(self.levels, self.counts, continuous_variance, rescaled=True, load=load)
        assert choice is not None and choice.epsilon == theta
        assert choice.error == pytest.approx(error, abs=0.01)
        p = keep_probabilities(self.levels, 0.8)[0]
        share = (10 + 90 * p) / 100
        assert share == pytest.approx(0.177234, abs=1e-6)
        at_08 = (load * 90 * p * (1 - p) + 2 / 0.64) / share**2  # 7.060639 users' sampling variance
        assert at_08 == pytest.approx({1.0: 324.26, 0.55: 223.11, 0.05: 110.72, 0.01: 101.73}[load], abs=0.01)

    def test_a_load_outside_0_1_is_refused(self):
        for load in (0.0, 1.5, float("nan")):
            with pytest.raises(ValueError, match="cell load"):
                optimal_budget(self.levels, self.counts, continuous_variance, rescaled=True, load=load)
        with pytest.raises(ValueError, match="registered users"):
            cell_load(np.array([1, 2]), 0)


def drive(policy: BudgetPolicy, ledgers: list[Ledger], decisions: dict[int, Kind], requirements=None):
    """Run ledgers through slots with the given decisions; returns per-slot budgets and kinds.

    A slot is nullified when its number is at most the largest border, as the release step does.
    """
    out: dict[int, list[SlotBudget]] = {}
    kinds: dict[int, Kind] = {}
    for t in sorted(decisions):
        if requirements:
            for ledger, req in zip(ledgers, requirements[t], strict=True):
                ledger.declare(req)
        budgets = [charge_slot(policy, ledger, t) for ledger in ledgers]
        kind = Kind.NULLIFY if t <= max(b.border for b in budgets) + 1e-9 else decisions[t]
        for ledger in ledgers:
            ledger.settle(t, kind)
        out[t], kinds[t] = budgets, kind
    return out, kinds


E = (1.2, 0.8, 0.9)
W = (4, 2, 3)


def fixed_ledgers():
    return [FixedLedger(Requirement(w, e), 1) for w, e in zip(W, E, strict=True)]


class TestFixedExamples34:
    decisions = {1: Kind.PUBLISH, 2: Kind.SKIP, 3: Kind.PUBLISH}

    def test_pbd_user1(self):
        out, _ = drive(PBD(), fixed_ledgers(), self.decisions)
        e1 = E[0]
        assert [out[t][0].eps1 for t in (1, 2, 3)] == pytest.approx([e1 / 8] * 3)
        assert out[1][0].eps2 == pytest.approx(e1 / 4)
        assert out[3][0].eps2 == pytest.approx(e1 / 8)

    def test_pba(self):
        decisions = {1: Kind.PUBLISH, 2: Kind.SKIP, 3: Kind.PUBLISH, 4: Kind.PUBLISH, 5: Kind.PUBLISH}
        out, kinds = drive(PBA(), fixed_ledgers(), decisions)
        shares = [e / (2 * w) for w, e in zip(W, E, strict=True)]
        assert [b.eps2 for b in out[1]] == pytest.approx(shares)
        assert [b.eps2 for b in out[3]] == pytest.approx([E[0] / 4, E[1] / 2, E[2] / 3])
        assert kinds[4] is Kind.NULLIFY
        assert [b.eps2 for b in out[5]] == pytest.approx([E[0] / 8, E[1] / 4, E[2] / 6])


class TestBursts:
    """Section 14's worked vector for bursts: Examples 3-4's users (w, E) = (4, 1.2), (2, 0.8),
    (3, 0.9) under Adaptive held in bursts (probe 1/8): the probe at slot 1, the rest of each window
    at slot 2 (each user's share of it: E / ceil(w / P), P = 2 the narrowest w), then a burst every
    P slots, each user at E / ceil(w / P) within its window's room: slot 4, 6, ..."""

    @staticmethod
    def bursts(slots: int, day: int = 1) -> dict[int, list[float]]:
        """The users under Adaptive held in bursts (`day` slots in a day) for `slots` slots; each
        burst's release is 0 in one cell with error 1 (sparse). Returns each burst slot's spends,
        after checking that every window of every user is within E."""
        policy, ledgers = Adaptive(FamilyRule(start=BURST, day=day)), fixed_ledgers()
        spent: dict[int, list[float]] = {}
        for t in range(1, slots + 1):
            budgets = [charge_slot(policy, ledger, t) for ledger in ledgers]
            kind = policy.scheduled_kind(t)
            assert kind is not None
            for ledger in ledgers:
                ledger.settle(t, kind)
            if kind is Kind.PUBLISH:
                spent[t] = [b.eps2 for b in budgets]
            policy.observe(SlotOutcome(t, kind, np.zeros(1, dtype=np.int64), len(ledgers),
                                       publication=BudgetChoice(0.9, 1.0, 1.0) if kind is Kind.PUBLISH else None))
        for ledger, epsilon in zip(ledgers, E, strict=True):
            w = ledger.requirement.w
            for start in range(1, slots - w + 2):
                assert sum(sum(ledger.spent(t, t)) for t in range(start, start + w)) <= epsilon * (1 + 1e-12)
        return spent

    def test_probe_rest_and_period(self):
        spent = self.bursts(10)
        assert sorted(spent) == [1, 2, 4, 6, 8, 10]  # the slots between spend nothing
        assert spent[1] == pytest.approx([0.15, 0.1, 0.1125])  # E / 8
        # E / ceil(w / 2) = 0.6, 0.8, 0.45, the second user's capped by the rest of its window (0.7)
        assert spent[2] == pytest.approx([0.6, 0.7, 0.45])
        assert spent[4] == pytest.approx([0.45, 0.8, 0.45])  # the first user's window 1-4 has 0.45 left
        for t in (6, 8, 10):  # from then on every user's window holds its whole E
            assert spent[t] == pytest.approx([0.6, 0.8, 0.45])

    def test_a_quarter_of_a_day(self):
        """2 slots in a day: P = 2 is whole days, and each gap is P plus a quarter of a day, at least
        one slot (3): bursts at 2, 5, 8, 11, at the same shares (each window holds at most as many
        bursts as at gaps of P)."""
        spent = self.bursts(12, day=2)
        assert sorted(spent) == [1, 2, 5, 8, 11]
        assert spent[2] == pytest.approx([0.6, 0.7, 0.45])
        assert all(spent[t] == pytest.approx([0.6, 0.8, 0.45]) for t in (5, 8, 11))


TABLE3 = {
    1: [((1, 1.0), (4, 2.4)), ((1, 0.6), (2, 1.6)), ((1, 2.0), (3, 1.2))],
    2: [((2, 2.4), (4, 3.2)), ((2, 1.6), (2, 2.4)), ((2, 1.2), (3, 3.0))],
    3: [((2, 2.8), (3, 4.2)), ((2, 3.2), (2, 2.8)), ((3, 1.8), (2, 1.2))],
    4: [((2, 2.4), (3, 2.4)), ((3, 4.2), (2, 2.8)), ((2, 3.2), (3, 0.6))],
    5: [((5, 3.0), (2, 0.8)), ((3, 3.6), (2, 2.0)), ((4, 2.4), (3, 1.8))],
}
REQS = {
    t: [DynamicRequirement(Requirement(*b), Requirement(*f)) for b, f in rows] for t, rows in TABLE3.items()
}
DYN_DECISIONS = {1: Kind.PUBLISH, 2: Kind.SKIP, 3: Kind.PUBLISH, 4: Kind.SKIP, 5: Kind.PUBLISH}


def dynamic_ledgers():
    return [DynamicLedger(req, 1, 10) for req in REQS[1]]


class TestDynamicTable3:
    def test_dpbd(self):
        out, kinds = drive(DPBD(), dynamic_ledgers(), DYN_DECISIONS, REQS)
        eps1 = [(0.3, 0.3, 0.2), (0.3, 0.4, 0.2), (0.3, 0.6, 0.2), (0.3, 0.7, 0.1), (0.2, 0.5, 0.1)]
        eps2 = [(0.5, 0.3, 0.3), (0.35, 0.25, 0.15), (0.35, 0.6, 0.15), (0.175, 0.4, 0.15), (0.2, 0.5, 0.15)]
        for t in range(1, 6):
            assert [b.eps1 for b in out[t]] == pytest.approx(eps1[t - 1]), t
            assert [b.eps2 for b in out[t]] == pytest.approx(eps2[t - 1]), t
        assert all(kinds[t] is DYN_DECISIONS[t] for t in kinds)

    def test_dpba(self):
        out, kinds = drive(DPBA(), dynamic_ledgers(), DYN_DECISIONS, REQS)
        assert [b.eps1 for b in out[3]] == pytest.approx([0.3, 0.6, 0.2])
        assert [b.eps2 for b in out[1]] == pytest.approx([0.3, 0.3, 0.2])
        assert [b.eps2 for b in out[3]] == pytest.approx([0.8, 1.2, 0.4])
        assert [b.border for b in out[4]] == pytest.approx([11 / 3, 26 / 7, 10 / 3], abs=1e-3)
        assert kinds[4] is Kind.SKIP, "t=4 must NOT be nullified"
        assert [b.eps2 for b in out[5]] == pytest.approx([0.4, 0.6, 0.3])

    def test_paper_example7_value_is_not_produced(self):
        out, _ = drive(DPBA(), dynamic_ledgers(), DYN_DECISIONS, REQS)
        assert out[3][2].eps2 != pytest.approx(0.6)
        # u3's forward requirement from t=1, (3, 1.2): publication spend over slots 1..3 <= 0.6
        assert out[1][2].eps2 + out[3][2].eps2 <= 1.2 / 2 + 1e-9

    def test_dpba_intermediate_values_at_t3(self):
        ledgers = dynamic_ledgers()
        drive(DPBA(), ledgers, {1: Kind.PUBLISH, 2: Kind.SKIP}, REQS)
        u1 = ledgers[0]
        u1.declare(REQS[3][0])
        u1.open_slot(3)
        windows = u1.forward_windows()
        right = [u1.spent(f.tau, 2)[1] / f.requirement.share + f.tau - 1 for f in windows]
        assert right == pytest.approx([1, 1, 2])
        assert max((3 - r) * f.requirement.share for r, f in zip(right, windows, strict=True)) == pytest.approx(0.8)
        assert min(f.requirement.epsilon / 2 - u1.spent(f.tau, 2)[1] for f in windows) == pytest.approx(0.9)
        assert u1.requirement.backward.epsilon / 2 - u1.spent(2, 2)[1] == pytest.approx(1.4)


SPLITS = [(0.5, 0.5), (0.25, 0.75), (0.1, 0.2, 0.7)]


def split_ledgers(share: float, dynamic: bool) -> list[Ledger]:
    """The paper's users as one statistic's ledger classes at `share` (state.population: a class
    named by its members' requirement, its ledger at the share of it)."""
    from pwevent.jobs.common.requirement_rules import RequirementRules
    from pwevent.operators.registry import REGISTRY
    from pwevent.state.population import MembershipChange, Population

    rules = RequirementRules(REGISTRY.spec("DPBD" if dynamic else "PBD"), 10)
    population = Population(rules.new_ledger, share)
    requirements = REQS[1] if dynamic else [Requirement(w, e) for w, e in zip(W, E, strict=True)]
    classes = [population.apply(MembershipChange.of(1, f"u{i}", None, req)) for i, req in enumerate(requirements)]
    assert all(c is not None and c.ledger.requirement == req.scaled(share)
               for c, req in zip(classes, requirements, strict=True))
    return [c.ledger for c in classes if c is not None]


class TestSplitAcrossStatistics:
    """docs/mechanisms.md, "Several statistics under one budget": a statistic at share s runs every
    worked example above at s times each budget (every rule is homogeneous in E; PBA's and DPBA's
    borders, spend2 / share, do not move), so the statistics' budgets add up to the example's."""

    @pytest.mark.parametrize("shares", SPLITS)
    def test_pbd_and_pba_examples_3_4(self, shares):
        whole_pbd, _ = drive(PBD(), fixed_ledgers(), TestFixedExamples34.decisions)
        decisions = {1: Kind.PUBLISH, 2: Kind.SKIP, 3: Kind.PUBLISH, 4: Kind.PUBLISH, 5: Kind.PUBLISH}
        whole_pba, whole_kinds = drive(PBA(), fixed_ledgers(), decisions)
        for policy, whole, wanted in ((PBD(), whole_pbd, TestFixedExamples34.decisions), (PBA(), whole_pba, decisions)):
            parts = [drive(type(policy)(), split_ledgers(share, False), wanted) for share in shares]
            for t, budgets in whole.items():
                for user in range(3):
                    for field in ("eps1", "eps2"):
                        said = [getattr(out[t][user], field) for out, _ in parts]
                        assert said == pytest.approx([share * getattr(budgets[user], field) for share in shares])
                        assert sum(said) == pytest.approx(getattr(budgets[user], field), rel=1e-12)
        pba_parts = [drive(PBA(), split_ledgers(share, False), decisions) for share in shares]
        assert all(kinds == whole_kinds for _, kinds in pba_parts)  # t = 4 nullified in every statistic
        assert [b.eps2 for b in pba_parts[0][0][3]] == pytest.approx([shares[0] * x for x in (E[0] / 4, E[1] / 2,
                                                                                            E[2] / 3)])

    @pytest.mark.parametrize("shares", SPLITS)
    def test_dpbd_and_dpba_table_3(self, shares):
        for policy in (DPBD, DPBA):
            whole, whole_kinds = drive(policy(), dynamic_ledgers(), DYN_DECISIONS, REQS)
            for share in shares:
                scaled = {t: [req.scaled(share) for req in reqs] for t, reqs in REQS.items()}
                out, kinds = drive(policy(), split_ledgers(share, True), DYN_DECISIONS, scaled)
                assert kinds == whole_kinds
                for t in whole:
                    assert [b.eps1 for b in out[t]] == pytest.approx([share * b.eps1 for b in whole[t]]), (policy, t)
                    assert [b.eps2 for b in out[t]] == pytest.approx([share * b.eps2 for b in whole[t]]), (policy, t)
        dpbd, _ = drive(DPBD(), split_ledgers(0.5, True), DYN_DECISIONS,
                        {t: [req.scaled(0.5) for req in reqs] for t, reqs in REQS.items()})
        assert [b.eps2 for b in dpbd[1]] == pytest.approx([0.25, 0.15, 0.15])  # half of (0.5, 0.3, 0.3)

    def test_a_share_outside_0_1_is_refused(self):
        from pwevent.state.population import Population

        for share in (0.0, -0.5, 1.5):
            with pytest.raises(ValueError, match="share"):
                Population(lambda requirement, slot: FixedLedger(requirement, slot), share)
