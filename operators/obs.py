"""Optimal Budget Selection (docs/mechanisms.md sections 2-3, paper Algorithm 1) in O(m log m)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: A rescaled release divides its noisy counts by the kept share s (section 14); below this share the
#: rescaled noise (up to NOISE_BOUND / s) could leave the int64 range, so such a threshold is never
#: chosen. Only a slot where more than 1,023 of every 1,024 registered users have budget 0 lacks one.
MIN_KEPT_SHARE = 2.0**-10


@dataclass(frozen=True)
class BudgetChoice:
    """The threshold OBS picked and the error it expects there (sampling + noise); both finite.
    kept_share: for a rescaled release (section 14) the expected kept share its counts were divided by.

    The error's square root is a release's public threshold: a NaN or infinity would make every
    later slot a skip and its record invalid JSON (docs/mechanisms.md, Budget floor).
    """

    epsilon: float
    error: float
    kept_share: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0 and math.isfinite(self.error)):
            raise ValueError(f"OBS choice must be finite with epsilon > 0, got ({self.epsilon!r}, {self.error!r})")
        if self.kept_share is not None and not MIN_KEPT_SHARE <= self.kept_share <= 1 + 1e-12:
            raise ValueError(f"a rescaled choice's kept share must be in [{MIN_KEPT_SHARE}, 1], "
                             f"got {self.kept_share!r}")


def cell_load(last: np.ndarray, population: int) -> float:
    """The mean cell's share of the registered users, L / N (docs/mechanisms.md section 14, "The mean
    cell"): L the users per cell by the last released histogram, its sum over its d cells, at least 1
    and at most N = population (> 0). Public: post-processing of a release."""
    if population <= 0:
        raise ValueError(f"a cell load needs registered users, got a population of {population!r}")
    per_cell = float(np.asarray(last, dtype=float).sum()) / len(last)
    return min(max(per_cell, 1.0), float(population)) / population


def keep_probabilities(levels: np.ndarray, theta: float) -> np.ndarray:
    """Sampling Mechanism: p = 1 if eps >= theta else (e^eps - 1)/(e^theta - 1) (section 2)."""
    levels = np.asarray(levels, dtype=float)
    p = np.expm1(levels) / np.expm1(theta)
    return np.where(levels >= theta, 1.0, np.clip(p, 0.0, 1.0))


def optimal_budget(
    levels: np.ndarray, counts: np.ndarray, noise_variance: Callable[[np.ndarray], np.ndarray | float],
    rescaled: bool = False, load: float = 1.0,
) -> BudgetChoice | None:
    """argmin over the distinct positive budgets theta of err_s(theta) + err_dp(theta).

    err_s(theta) = sum_{eps<theta} p(1-p) + (sum_{eps<theta} (1-p))^2 with p = q/Q, q = e^eps - 1,
    Q = e^theta - 1; with the levels sorted, every candidate's terms are prefix sums of n, n q and
    n q^2. Users at budget 0 are never kept and count as bias for every candidate. Ties go to the
    smallest theta. A candidate whose error is not finite (a budget so small that Q^2 underflows or
    the noise variance overflows) is never chosen. Returns None when no candidate remains (nothing
    can be released). docs/mechanisms.md, Budget floor: the floor keeps such budgets out; this
    keeps OBS finite on any input.

    rescaled: the error of the release divided by its kept share s(theta) = (users at or above
    theta + sum_{eps<theta} p) / all users (0 at budget 0), public, which estimates every user's count, not
    only the kept ones': (sum_{eps<theta} p(1-p) + err_dp(theta)) / s^2, no bias term (unbiased when
    budget and cell are independent; docs/mechanisms.md section 14, Adaptive's even spending).
    Candidates with s below MIN_KEPT_SHARE are never chosen. The choice carries s as `kept_share`.
    load (rescaled only): the mean cell's share of the users, L / N in (0, 1] (`cell_load`); the
    error is then the mean cell's, (load * sum_{eps<theta} p(1-p) + err_dp(theta)) / s^2
    (section 14, "The mean cell"); 1 is the paper's worst case, every user in one cell.
    """
    if not 0 < load <= 1:
        raise ValueError(f"a cell load must be in (0, 1], got {load!r}")
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
    cand = np.flatnonzero(positive)
    big_q = q[cand]
    total = float(counts.sum())
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        kept = below_q[cand] / big_q  # sum of p over users below theta
        variance = kept - below_q2[cand] / big_q**2  # sum of p (1 - p)
        if rescaled:
            share = (total - below_n[cand] + kept) / total
            errors = (load * variance + noise_variance(levels[cand])) / share**2
            errors = np.where(share >= MIN_KEPT_SHARE, errors, np.inf)
        else:
            bias = below_n[cand] - kept  # sum of (1 - p)
            errors = variance + bias**2 + noise_variance(levels[cand])
    finite = np.isfinite(errors)
    if not finite.any():
        return None
    best = int(np.argmin(np.where(finite, errors, np.inf)))
    return BudgetChoice(float(levels[cand][best]), float(errors[best]), float(share[best]) if rescaled else None)
