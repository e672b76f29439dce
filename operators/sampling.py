"""The Sampling Mechanism's counting step, per user and aggregated (docs/mechanisms.md section 2)."""

from __future__ import annotations

import numpy as np

from pwevent.operators.noise import Randomness
from pwevent.operators.obs import keep_probabilities


def sample_levels(level_cells: np.ndarray, levels: np.ndarray, theta: float, rng: Randomness) -> np.ndarray:
    """Kept counts per cell from counts per (budget level, cell).

    Keeping each of the n_{b,j} one-hot users at level b independently with probability p_b is one
    Binomial(n_{b,j}, p_b) draw, so the cost depends on the number of levels, not of users.
    """
    level_cells = np.asarray(level_cells, dtype=np.int64)
    probabilities = keep_probabilities(levels, theta)
    return rng.binomial(level_cells, probabilities[:, None]).sum(axis=0)
