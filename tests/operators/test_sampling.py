"""Aggregated binomial sampling has the per-user sampling's distribution (docs/mechanisms.md section 2).

Seeded two-sample chi-squared test per cell at alpha = 0.001 with a Bonferroni split over the cells:
a correct implementation fails with probability below 0.1% (and, seeded, never flakes).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2_contingency

from pwevent.operators.noise import NumpyRandomness, Randomness
from pwevent.operators.obs import keep_probabilities
from pwevent.operators.sampling import sample_levels

pytestmark = pytest.mark.slow

LEVELS = np.array([0.1, 0.3, 0.6])
THETA = 0.6


def sample_users(values: np.ndarray, budgets: np.ndarray, theta: float, d: int, rng: Randomness) -> np.ndarray:
    """The per-user form: one coin per present user, then a histogram of the kept values."""
    probabilities = keep_probabilities(budgets, theta)
    coins = rng.binomial(np.ones(len(probabilities), dtype=np.int64), probabilities).astype(bool)
    return np.bincount(np.asarray(values, dtype=np.int64)[coins], minlength=d).astype(np.int64)


def test_aggregated_matches_per_user_in_distribution():
    d = 3
    rng_values = np.random.default_rng(0)
    values = rng_values.integers(0, d, 60)
    budgets = LEVELS[rng_values.integers(0, 3, 60)]
    level_cells = np.zeros((3, d), dtype=np.int64)
    for value, budget in zip(values, budgets, strict=True):
        level_cells[int(np.flatnonzero(LEVELS == budget)[0]), value] += 1
    trials = 4000
    agg_rng, user_rng = NumpyRandomness(1), NumpyRandomness(2)
    agg = np.array([sample_levels(level_cells, LEVELS, THETA, agg_rng) for _ in range(trials)])
    per = np.array([sample_users(values, budgets, THETA, d, user_rng) for _ in range(trials)])
    alpha = 0.001 / d
    for cell in range(d):
        low, high = min(agg[:, cell].min(), per[:, cell].min()), max(agg[:, cell].max(), per[:, cell].max())
        support = np.arange(low, high + 1)
        table = np.array([[np.sum(sample[:, cell] == k) for k in support] for sample in (agg, per)])
        table = table[:, table.sum(axis=0) >= 10]  # pool away sparse tails the test cannot judge
        assert chi2_contingency(table)[1] > alpha, f"cell {cell} differs"


def test_full_budget_levels_are_kept_whole():
    cells = np.array([[0, 0], [4, 7]])
    kept = sample_levels(cells, np.array([0.1, 0.6]), 0.6, NumpyRandomness(0))
    assert kept[0] >= 4 and kept[1] >= 7


def test_zero_budget_is_never_kept():
    kept = sample_levels(np.array([[5, 5]]), np.array([0.0]), 0.6, NumpyRandomness(0))
    assert kept.tolist() == [0, 0]
