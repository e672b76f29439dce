"""The paper's O(m^2) OBS loop, straight from the definition: the reference that
`operators.obs.optimal_budget` (O(m log m)) is tested equal to (docs/mechanisms.md section 3)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pwevent.operators.obs import MIN_KEPT_SHARE, BudgetChoice


def optimal_budget_reference(
    budgets: list[float], noise_variance: Callable[[float], float], rescaled: bool = False
) -> BudgetChoice | None:
    """The best budget by a loop over every candidate; with `rescaled`, the rescaled release's error
    (optimal_budget)."""
    best: BudgetChoice | None = None
    for theta in sorted({b for b in budgets if b > 0}):
        below = [b for b in budgets if b < theta]
        ps = [float(np.expm1(b) / np.expm1(theta)) for b in below]
        share = None
        if rescaled:
            share = (len(budgets) - len(below) + sum(ps)) / len(budgets)
            if share < MIN_KEPT_SHARE:
                continue
            error = (sum(p * (1 - p) for p in ps) + noise_variance(theta)) / share**2
        else:
            error = sum(p * (1 - p) for p in ps) + sum(1 - p for p in ps) ** 2 + noise_variance(theta)
        if best is None or error < best.error:
            best = BudgetChoice(theta, error, share)
    return best
