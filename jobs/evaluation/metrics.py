"""Error metrics of a released stream against the true histograms (docs/mechanisms.md section 11).

All take `released` and `truth` as (T, d) arrays, one row per slot, and average over slots:
- MSE = (1/T) sum_t (1/d) ||r_t - c_t||_2^2 (what the paper calls "AMRE");
- MAE = (1/T) sum_t (1/d) ||r_t - c_t||_1;
- MRE = mean over t, j of |r_t[j] - c_t[j]| / max(c_t[j], delta_t), with the floor
  delta_t = max(MRE_FLOOR_FRACTION * sum_j c_t[j], 1): 0.1% of the slot's total as in the reference
  code, and at least one count so that empty slots (real data) stay finite;
- AJSD = mean over t of the Jensen-Shannon divergence (base 2, in [0, 1]) between the normalised
  release and truth. A release's negative cells are set to 0 before normalising; a row with no
  positive mass (all-zero truth or release) is taken as the uniform distribution over the d cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MRE_FLOOR_FRACTION = 0.001


@dataclass(frozen=True)
class Errors:
    """The four errors of one released stream (section 11)."""

    mse: float
    mae: float
    mre: float
    ajsd: float


def _check(released: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    released = np.asarray(released, dtype=float)
    truth = np.asarray(truth, dtype=float)
    if released.shape != truth.shape or released.ndim != 2:
        raise ValueError(f"released {released.shape} and truth {truth.shape} must be equal (T, d) arrays")
    return released, truth


def mse(released: np.ndarray, truth: np.ndarray) -> float:
    released, truth = _check(released, truth)
    return float(np.mean((released - truth) ** 2))


def mae(released: np.ndarray, truth: np.ndarray) -> float:
    released, truth = _check(released, truth)
    return float(np.mean(np.abs(released - truth)))


def mre(released: np.ndarray, truth: np.ndarray) -> float:
    released, truth = _check(released, truth)
    floor = np.maximum(MRE_FLOOR_FRACTION * truth.sum(axis=1, keepdims=True), 1.0)
    return float(np.mean(np.abs(released - truth) / np.maximum(truth, floor)))


def _distributions(rows: np.ndarray) -> np.ndarray:
    positive = np.clip(rows, 0.0, None)
    mass = positive.sum(axis=1, keepdims=True)
    uniform = np.full_like(positive, 1.0 / rows.shape[1])
    return np.where(mass > 0, positive / np.where(mass > 0, mass, 1.0), uniform)


def ajsd(released: np.ndarray, truth: np.ndarray) -> float:
    released, truth = _check(released, truth)
    p, q = _distributions(released), _distributions(truth)
    m = (p + q) / 2

    def kl(a: np.ndarray) -> np.ndarray:
        ratio = np.where(a > 0, a / np.where(m > 0, m, 1.0), 1.0)
        return np.sum(a * np.log2(ratio), axis=1)

    return float(np.mean(np.clip((kl(p) + kl(q)) / 2, 0.0, 1.0)))


def errors(released: np.ndarray, truth: np.ndarray) -> Errors:
    """All four metrics of section 11."""
    return Errors(mse(released, truth), mae(released, truth), mre(released, truth), ajsd(released, truth))
