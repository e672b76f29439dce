"""The bias/variance trade of Adaptive's rescaled even release (docs/mechanisms.md section 14).

10,000 users with the paper's default requirements (RequirementDraw(0.6, 120): E in {0.6, 0.8, 1.0},
w in {40, 80, 120}), each present at every slot in a fixed cell of d = 4, run through Adaptive's even
spending for SLOTS slots (seeded numpy noise). Two layouts:
- independent: cells drawn uniformly, independently of the budgets;
- correlated: the users whose per-slot budget E/w is below the threshold OBS picks are all in cell 0,
  the others uniform over cells 1-3 (the worst case the rescale is biased in).
Per cell: the true count, the mean release minus the truth (bias), the raw MSE and the squared error
of the mean release over the slots (what a filter that averages a static stream tends to). Run with
the code to measure on the path: `python docs/results/robust-default/bias.py` prints a markdown table.
"""

from __future__ import annotations

import numpy as np

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.synthetic import RequirementDraw
from pwevent.operators.family import Adaptive
from pwevent.operators.noise import NumpyRandomness, discrete_laplace_variance
from pwevent.operators.policies import MechanismSpec

USERS, SLOTS, D = 10_000, 3_000, 4


def layout(requirements, correlated: bool, rng: np.random.Generator) -> np.ndarray:
    eps = np.array([r.epsilon / r.w for r in requirements])
    if not correlated:
        return rng.integers(0, D, len(eps))
    return np.where(eps < threshold(eps), 0, rng.integers(1, D, len(eps)))


def threshold(eps: np.ndarray) -> float:
    """The threshold the rescaled OBS picks (section 14), written out here so that the script runs the
    same layout under code without it: argmin (sum p (1 - p) + Var_dp(theta)) / s^2."""
    best, chosen = np.inf, float(eps.min())
    for theta in np.unique(eps):
        p = np.where(eps >= theta, 1.0, np.expm1(eps) / np.expm1(theta))
        error = ((p * (1 - p)).sum() + float(discrete_laplace_variance(theta))) / p.mean() ** 2
        if error < best:
            best, chosen = error, float(theta)
    return chosen


def run(correlated: bool, seed: int = 0) -> list[tuple[int, float, float, float]]:
    requirements = RequirementDraw(0.6, 120).fixed(USERS, seed)
    cells = layout(requirements, correlated, np.random.default_rng(seed))
    engine = Engine(MechanismSpec("Adaptive", Adaptive(), None), D, NumpyRandomness(seed), 120)
    for user, requirement in enumerate(requirements):
        engine.register(user, requirement, 1)
    truth = np.bincount(cells, minlength=D).astype(float)
    users = np.arange(USERS)
    released = np.array([engine.step(slot, users, cells)[0].counts for slot in range(1, SLOTS + 1)], dtype=float)
    mean = released.mean(axis=0)
    mse = ((released - truth) ** 2).mean(axis=0)
    return [(int(truth[j]), float(mean[j] - truth[j]), float(mse[j]), float((mean[j] - truth[j]) ** 2))
            for j in range(D)]


def main() -> None:
    eps = np.array([r.epsilon / r.w for r in RequirementDraw(0.6, 120).fixed(USERS, 0)])
    theta = threshold(eps)
    print(f"threshold {theta:.6g}; users below it: {int((eps < theta).sum()):,}\n")
    print("| layout | cell | true count | bias (mean release - truth) | raw MSE | (mean release - truth)^2 |")
    print("|---|---|---|---|---|---|")
    for correlated in (False, True):
        for j, (truth, bias, mse, squared) in enumerate(run(correlated)):
            name = "correlated" if correlated else "independent"
            print(f"| {name} | {j} | {truth:,} | {bias:+,.1f} | {mse:,.0f} | {squared:,.1f} |")


if __name__ == "__main__":
    main()
