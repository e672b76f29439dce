"""The noise sampler's range, OBS on tiny budgets, budgets under the floor (docs/mechanisms.md, Budget floor)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pwevent.operators.noise import (
    NOISE_BOUND,
    SAMPLER_MIN_EPSILON,
    NoiseRangeError,
    NumpyRandomness,
    SecureRandomness,
    discrete_laplace_variance,
)
from pwevent.operators.obs import BudgetChoice, optimal_budget
from pwevent.operators.policies import DPBA, DPBD, PBD, SlotBudget, charge_slot
from pwevent.operators.sampling import sample_levels
from pwevent.state.ledger import DynamicLedger, FixedLedger
from pwevent.state.requirements import DEFAULT_MIN_SLOT_EPSILON, DynamicRequirement, Requirement
from pwevent.state.spend import Kind

SMALLEST = 5e-324


def tail_beyond_bound(epsilon: float) -> float:
    """P(|X| >= NOISE_BOUND) for the discrete Laplace: 2 alpha^k / (1 + alpha), alpha = e^-epsilon."""
    return 2 * math.exp(-epsilon * NOISE_BOUND) / (1 + math.exp(-epsilon))


def test_default_floor_keeps_the_noise_within_the_sampler_range():
    assert DEFAULT_MIN_SLOT_EPSILON >= SAMPLER_MIN_EPSILON
    assert tail_beyond_bound(SAMPLER_MIN_EPSILON) <= 2.0**-64 * (1 + 1e-9)
    assert tail_beyond_bound(DEFAULT_MIN_SLOT_EPSILON) < 2.0**-64
    assert NOISE_BOUND < 2**53  # releases stay exact integers for JSON readers that use doubles


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=SMALLEST, max_value=1e3, allow_subnormal=True))
def test_every_epsilon_is_refused_or_within_the_sampler_range(epsilon):
    floored = SlotBudget(epsilon, epsilon).floored(DEFAULT_MIN_SLOT_EPSILON).eps1  # what charge_slot passes on
    assert floored == 0.0 or (floored == epsilon and floored >= SAMPLER_MIN_EPSILON)
    for rng in (NumpyRandomness(1), SecureRandomness()):
        try:
            draws = rng.discrete_laplace(epsilon, 4)
        except NoiseRangeError:
            assert epsilon < SAMPLER_MIN_EPSILON
            continue
        assert tail_beyond_bound(epsilon) <= 2.0**-64 * (1 + 1e-9)
        assert draws.dtype == np.int64 and np.all(np.abs(draws) < NOISE_BOUND)


def test_numpy_noise_is_not_degenerate_near_the_floor():
    draws = NumpyRandomness(3).discrete_laplace(SAMPLER_MIN_EPSILON, 50)
    assert np.count_nonzero(draws) == 50
    with pytest.raises(NoiseRangeError, match="epsilon"):
        NumpyRandomness(3).discrete_laplace(1e-19, 1)


def test_opendp_noise_is_64_bit():
    draws = SecureRandomness().discrete_laplace(1e-12, 200)  # scale 1e12: 99.8% clipped on 32 bits
    assert np.count_nonzero(np.abs(draws) >= 2**31 - 1) > 150
    assert len(set(np.abs(draws).tolist())) > 190


@pytest.mark.parametrize(
    "levels",
    [[SMALLEST], [SMALLEST, 1e-300, 1e-200], [SMALLEST, 0.5, 1.0], [0.0, SMALLEST, 1e-170, 0.3], [1e-165, 1e-160]],
)
def test_obs_never_returns_nan(levels):
    choice = optimal_budget(np.array(levels), np.arange(1, len(levels) + 1, dtype=float), discrete_laplace_variance)
    if choice is not None:
        assert math.isfinite(choice.epsilon) and math.isfinite(choice.error) and choice.epsilon > 0
    if max(levels) >= 0.3:
        assert choice is not None and choice.epsilon >= 0.3


def test_budget_choice_refuses_non_finite_values():
    with pytest.raises(ValueError, match="finite"):
        BudgetChoice(0.1, math.nan)
    with pytest.raises(ValueError, match="finite"):
        BudgetChoice(0.1, math.inf)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=5.0, allow_subnormal=True), min_size=1, max_size=12))
def test_obs_is_finite_on_any_budgets(levels):
    choice = optimal_budget(np.array(levels), np.ones(len(levels)), discrete_laplace_variance)
    if choice is not None:
        assert math.isfinite(choice.error) and choice.epsilon in levels


def test_float_residue_calculation_budget_is_exactly_zero():
    """0.1/2 - 0.3/6 = 6.9e-18 in floats: DPBA's eps1 at slot 2 of this user is exactly 0."""
    forward = Requirement(3, 0.3)
    ledger = DynamicLedger(DynamicRequirement(Requirement(1, 10.0), forward), 1, 10)
    charge_slot(DPBA(), ledger, 1)
    ledger.settle(1, Kind.SKIP)
    ledger.declare(DynamicRequirement(Requirement(2, 0.1), forward))
    budget = charge_slot(DPBA(), ledger, 2)
    assert budget.eps1 == 0.0
    assert ledger.settle(2, Kind.SKIP).spend1 == 0.0


def test_budgets_below_the_floor_are_zero_and_only_ever_lower():
    assert SlotBudget(1e-15, 0.2, 3.0).floored(1e-14) == SlotBudget(0.0, 0.2, 3.0)
    assert SlotBudget(0.1, 1e-15).floored(1e-14) == SlotBudget(0.1, 0.0)
    assert SlotBudget(1e-14, 0.5).floored(1e-14) == SlotBudget(1e-14, 0.5)


def test_a_class_under_the_floor_is_out_of_the_slot():
    """Its budget is 0: never an OBS candidate, sampled with p = 0, and its ledger spends 0."""
    floor = 1e-3
    ledgers = [FixedLedger(Requirement(10, 1.0), 1), FixedLedger(Requirement(1000, 1.0), 1)]  # share 0.05, 5e-4
    budgets = [charge_slot(PBD(), ledger, 1, floor) for ledger in ledgers]
    eps1 = np.array([b.eps1 for b in budgets])
    assert eps1.tolist() == [0.05, 0.0]
    calc = optimal_budget(eps1, np.array([1.0, 500.0]), discrete_laplace_variance)
    assert calc is not None and calc.epsilon == 0.05
    present = np.array([[0, 0], [400, 100]])  # only the class under the floor has values
    assert sample_levels(present, eps1, calc.epsilon, NumpyRandomness(5)).tolist() == [0, 0]
    assert ledgers[1].settle(1, Kind.SKIP).spend1 == 0.0


def test_dynamic_residue_under_the_floor_is_not_spent():
    ledger = DynamicLedger(DynamicRequirement(Requirement(1, 10.0), Requirement(3, 0.3)), 1, 10)
    budget = charge_slot(DPBD(), ledger, 1, floor=0.06)  # eps1 = 0.05 is under this floor
    assert budget.eps1 == 0.0
    assert ledger.settle(1, Kind.PUBLISH).spend1 == 0.0
