"""The level test's evidence from the true counts (docs/mechanisms.md section 14, "Bursts and the level test").

For each dataset at its default point (E = 0.6, its widest window P; repetition 0's data): M = the mean
square per cell, the per-slot drift Q = (D_P - D_1) / (P - 1) from the mean squared differences of the
true counts at lags 1 and P, and R = a whole-E burst's noise variance at E = 0.6. Even spending with the
filter can beat one burst per window only when Q > 4 R; the level test asks M > 4 P^2 R.

    .venv/bin/python docs/results/sparse-workloads/level_evidence.py TLNS Sin Log Foursquare Sparse-daily-200

(synthetic streams: 10,000 users, the first 2,000 slots; Foursquare: 60-minute slots, found as
docs/evaluation.md says.) Reads only the data, never a mechanism's release.
"""

from __future__ import annotations

import sys

import numpy as np

from pwevent.jobs.evaluation.evaluate import dataset_of
from pwevent.jobs.evaluation.grid import GridSpec
from pwevent.operators.noise import discrete_laplace_variance


def evidence(name: str) -> dict[str, float]:
    grid = GridSpec(datasets=(name,), epsilons=(0.6,), ratios=(), reps=1, workers=1, users=10_000, slots=2_000,
                    real_sweeps=("epsilon",))
    task = grid.tasks()[0]
    dataset = dataset_of(task)
    truth = np.array([np.bincount(v, minlength=dataset.d) for _, v in dataset.slot_values()], dtype=float)
    period = task.w
    near = float(np.mean((truth[1:] - truth[:-1]) ** 2))
    far = float(np.mean((truth[period:] - truth[:-period]) ** 2))
    drift = (far - near) / (period - 1)
    level = float(np.mean(truth**2))
    noise = float(discrete_laplace_variance(0.6))
    return {"P": period, "M": level, "Q/R": drift / noise, "M/(P R)": level / (period * noise),
            "M/(P^2 R)": level / (period**2 * noise), "Q P^2/M": drift * period**2 / level}


if __name__ == "__main__":
    print("| dataset | P | M | Q / R | M / (P R) | M / (P^2 R) | Q P^2 / M |")
    print("|---|---|---|---|---|---|---|")
    for dataset_name in sys.argv[1:]:
        e = evidence(dataset_name)
        print(f"| {dataset_name} | {e['P']:.0f} | {e['M']:.4g} | {e['Q/R']:.3g} | {e['M/(P R)']:.3g} "
              f"| {e['M/(P^2 R)']:.3g} | {e['Q P^2/M']:.3g} |")
