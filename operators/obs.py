"""Optimal Budget Selection (docs/mechanisms.md sections 2-3, paper Algorithm 1) in O(m log m)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BudgetChoice:
    """The threshold OBS picked and the error it expects there (sampling + noise); both finite.

    The error's square root is a release's public threshold: a NaN or infinity would make every
    later slot a skip and its record invalid JSON (docs/mechanisms.md, Budget floor).
    """

    epsilon: float
    error: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0 and math.isfinite(self.error)):
            raise ValueError(f"OBS choice must be finite with epsilon > 0, got ({self.epsilon!r}, {self.error!r})")


def keep_probabilities(levels: np.ndarray, theta: float) -> np.ndarray:
    """Sampling Mechanism: p = 1 if eps >= theta else (e^eps - 1)/(e^theta - 1) (section 2)."""
    levels = np.asarray(levels, dtype=float)
    p = np.expm1(levels) / np.expm1(theta)
    return np.where(levels >= theta, 1.0, np.clip(p, 0.0, 1.0))


def optimal_budget(
    levels: np.ndarray, counts: np.ndarray, noise_variance: Callable[[np.ndarray], np.ndarray | float],
    lowest: bool = False,
) -> BudgetChoice | None:
    """argmin over the distinct positive budgets theta of err_s(theta) + err_dp(theta).

    err_s(theta) = sum_{eps<theta} p(1-p) + (sum_{eps<theta} (1-p))^2 with p = q/Q, q = e^eps - 1,
    Q = e^theta - 1; with the levels sorted, every candidate's terms are prefix sums of n, n q and
    n q^2. Users at budget 0 are never kept and count as bias for every candidate. Ties go to the
    smallest theta. A candidate whose error is not finite (a budget so small that Q^2 underflows or
    the noise variance overflows) is never chosen. Returns None when no candidate remains (nothing
    can be released). docs/mechanisms.md, Budget floor: the floor keeps such budgets out; this
    keeps OBS finite on any input.

    lowest: theta is the smallest positive budget, so that every user with a positive budget is kept
    (docs/mechanisms.md section 14: Adaptive's even spending, whose releases a filter averages, where
    a sampling bias would not average out); its error is computed the same way.
    """
    levels = np.asarray(levels, dtype=float)
    counts = np.asarray(counts, dtype=float)
    order = np.argsort(levels, kind="stable")
    levels, counts = levels[order], counts[order]
    if len(levels) > 1 and np.any(np.diff(levels) == 0):
        unique, inverse = np.unique(levels, return_inverse=True)
        counts = np.bincount(inverse, weights=counts)
        levels = unique
    positive = levels > 0
    if not positive.any():
        return None
    q = np.expm1(levels)
    below_n = np.concatenate(([0.0], np.cumsum(counts)))[:-1]
    below_q = np.concatenate(([0.0], np.cumsum(counts * q)))[:-1]
    below_q2 = np.concatenate(([0.0], np.cumsum(counts * q * q)))[:-1]
    cand = np.flatnonzero(positive)[:1] if lowest else np.flatnonzero(positive)
    big_q = q[cand]
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        kept = below_q[cand] / big_q  # sum of p over users below theta
        variance = kept - below_q2[cand] / big_q**2  # sum of p (1 - p)
        bias = below_n[cand] - kept  # sum of (1 - p)
        errors = variance + bias**2 + noise_variance(levels[cand])
    finite = np.isfinite(errors)
    if not finite.any():
        return None
    best = int(np.argmin(np.where(finite, errors, np.inf)))
    return BudgetChoice(float(levels[cand][best]), float(errors[best]))


def optimal_budget_reference(
    budgets: list[float], noise_variance: Callable[[float], float]
) -> BudgetChoice | None:
    """The paper's O(m^2) loop over every candidate, straight from the definition (for tests)."""
    best: BudgetChoice | None = None
    for theta in sorted({b for b in budgets if b > 0}):
        below = [b for b in budgets if b < theta]
        ps = [float(np.expm1(b) / np.expm1(theta)) for b in below]
        error = sum(p * (1 - p) for p in ps) + sum(1 - p for p in ps) ** 2 + noise_variance(theta)
        if best is None or error < best.error:
            best = BudgetChoice(theta, error)
    return best
