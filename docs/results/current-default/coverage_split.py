"""Interval coverage on Foursquare split by the true count: empty (slot, cell) pairs against
occupied ones, for the default (Adaptive with the Kalman post-processing) at the paper's defaults,
repetitions 0-2, noise seed 1 (as `pwevent evaluate --seed 1`).

    .venv/bin/python docs/results/current-default/coverage_split.py
"""

from __future__ import annotations

import numpy as np

from pwevent.jobs.evaluation.evaluate import dataset_of, run_mechanism, smooth
from pwevent.jobs.evaluation.grid import GridSpec


def main() -> None:
    grid = GridSpec(datasets=("Foursquare",), mechanisms=("Adaptive",), epsilons=(0.6,), windows=(120,), ratios=(),
                    reps=3, real_sweeps=("epsilon",), noise_seed=1, workers=1)
    print("| repetition | empty pairs | coverage, empty | coverage, occupied | mean width | intervals above 0 |")
    print("|---|---|---|---|---|---|")
    for task in grid.tasks():
        dataset = dataset_of(task)
        data = [(np.asarray(u), np.asarray(v, dtype=np.int32)) for u, v in dataset.slot_values()]
        truth = np.array([np.bincount(v, minlength=dataset.d) for _, v in data], dtype=float)
        _, intervals = smooth(run_mechanism("Adaptive", task, data, dataset.d, dataset.users), dataset.d)
        inside = (intervals[:, :, 0] <= truth) & (truth <= intervals[:, :, 1])
        empty = truth == 0
        width = intervals[:, :, 1] - intervals[:, :, 0]
        print(f"| {task.rep} | {empty.mean():.1%} | {inside[empty].mean():.1%} | {inside[~empty].mean():.1%} "
              f"| {width.mean():.1f} | {(intervals[:, :, 0] > 0).mean():.1%} |")


if __name__ == "__main__":
    main()
