"""`pwevent evaluate` with Adaptive's level test as it was before issue 45: dense when M > P R, with
no confidence term (docs/mechanisms.md section 14 has the current test). Everything else is the code
of this checkout. Used for before/ (README.md):

    .venv/bin/python docs/results/sparse-workloads/before/old_rule.py evaluate \
        --datasets Sparse-daily-200,Sparse-daily-500,Sparse-hourly-336,Sparse-daily-365,Sparse-hourly-720,\
Sparse-daily-250 \
        --mechanisms Adaptive --epsilons 0.2,0.6,1.0 --windows 120 --ratios '' --reps 10 --real-sweeps epsilon \
        --workers 2 --seed 1 --out docs/results/sparse-workloads/before
"""

import sys

import numpy as np

import pwevent.operators.family as family


def old_dense(counts: np.ndarray, error: float, share: float, period: int, margin: float) -> bool:
    return float(np.mean(counts**2)) - error > period * error * share**2


family.dense = old_dense

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(sys.argv[1:]))
