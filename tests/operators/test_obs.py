"""OBS in O(m log m) against the paper's O(m^2) loop (docs/mechanisms.md section 3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pwevent.operators.noise import discrete_laplace_variance
from pwevent.operators.obs import MIN_KEPT_SHARE, keep_probabilities, optimal_budget
from tests.operators.obs_reference import optimal_budget_reference

budgets = st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.25, 0.4, 0.5, 0.8, 1.0, 2.0, 3.5]), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(budgets)
def test_fast_equals_brute_force(values):
    fast = optimal_budget(np.array(values), np.ones(len(values)), discrete_laplace_variance)
    slow = optimal_budget_reference(values, lambda t: float(discrete_laplace_variance(t)))
    if slow is None:
        assert fast is None
        return
    assert fast is not None
    assert fast.epsilon == slow.epsilon
    assert fast.error == pytest.approx(slow.error, rel=1e-9, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.01, 5.0, allow_nan=False), min_size=1, max_size=30))
def test_fast_equals_brute_force_on_continuous_budgets(values):
    fast = optimal_budget(np.array(values), np.ones(len(values)), discrete_laplace_variance)
    slow = optimal_budget_reference(values, lambda t: float(discrete_laplace_variance(t)))
    assert fast is not None and slow is not None
    assert fast.error == pytest.approx(slow.error, rel=1e-9)


def test_counts_are_multiplicities():
    grouped = optimal_budget(np.array([0.1, 0.4, 0.8]), np.array([2, 5, 3]), discrete_laplace_variance)
    flat = optimal_budget(np.array([0.1] * 2 + [0.4] * 5 + [0.8] * 3), np.ones(10), discrete_laplace_variance)
    assert grouped == flat


def test_no_positive_budget_means_nothing_to_release():
    assert optimal_budget(np.array([0.0, 0.0]), np.array([3, 1]), discrete_laplace_variance) is None


def test_single_budget_is_its_own_threshold():
    choice = optimal_budget(np.array([0.6]), np.array([100]), discrete_laplace_variance)
    assert choice is not None
    assert choice.epsilon == 0.6
    assert choice.error == pytest.approx(discrete_laplace_variance(0.6))


def test_ties_take_the_smallest_theta():
    # one level only at each side, identical errors forced by a flat variance
    choice = optimal_budget(np.array([1.0, 2.0]), np.array([0, 5]), lambda t: np.zeros_like(t))
    assert choice is not None and choice.epsilon == 1.0


def test_keep_probabilities():
    p = keep_probabilities(np.array([0.0, 0.2, 0.5, 0.9]), 0.5)
    assert p[0] == 0.0 and p[2] == 1.0 and p[3] == 1.0
    assert p[1] == pytest.approx(np.expm1(0.2) / np.expm1(0.5))


@settings(max_examples=300, deadline=None)
@given(budgets)
def test_rescaled_fast_equals_brute_force(values):
    """The rescaled error (section 14): (sum p (1 - p) + noise variance) / s^2, s the kept share."""
    fast = optimal_budget(np.array(values), np.ones(len(values)), discrete_laplace_variance, rescaled=True)
    slow = optimal_budget_reference(values, lambda t: float(discrete_laplace_variance(t)), rescaled=True)
    if slow is None:
        assert fast is None
        return
    assert fast is not None and slow.kept_share is not None and fast.kept_share is not None
    assert fast.epsilon == slow.epsilon
    assert fast.error == pytest.approx(slow.error, rel=1e-9)
    assert fast.kept_share == pytest.approx(slow.kept_share, rel=1e-12)
    # users at 0 have p = 0: the share is the mean keep probability over every registered user
    assert fast.kept_share == pytest.approx(float(keep_probabilities(np.array(values), fast.epsilon).mean()), rel=1e-12)


def test_a_floor_registrant_does_not_set_the_rescaled_threshold():
    """200 users at 0.1 a slot and one at the floor (2e-14): the plain lowest-budget rule would publish
    at 2e-14; the rescaled OBS keeps 0.1 and samples the floor user with p ~ 2e-13."""
    choice = optimal_budget(np.array([0.1, 2e-14]), np.array([200.0, 1.0]), discrete_laplace_variance, rescaled=True)
    assert choice is not None and choice.epsilon == 0.1
    assert choice.kept_share == pytest.approx(200 / 201, rel=1e-9)
    assert choice.error == pytest.approx(float(discrete_laplace_variance(0.1)) * (201 / 200) ** 2, rel=1e-9)


def test_a_threshold_that_keeps_too_few_users_is_never_chosen():
    """Below MIN_KEPT_SHARE the rescaled noise could leave int64: 1 user of 2,000 with a budget."""
    assert optimal_budget(np.array([0.0, 1.0]), np.array([1999.0, 1.0]), discrete_laplace_variance,
                          rescaled=True) is None
    kept = optimal_budget(np.array([0.0, 1.0]), np.array([999.0, 1.0]), discrete_laplace_variance, rescaled=True)
    assert kept is not None and kept.kept_share == pytest.approx(1 / 1000) and kept.kept_share >= MIN_KEPT_SHARE
