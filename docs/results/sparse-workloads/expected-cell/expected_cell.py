"""`pwevent evaluate` with the threshold of the default's rescaled releases chosen for the expected
cell instead of the worst case (measured, not adopted; ../README.md, "The threshold for the expected
cell").

OBS's rescaled error (docs/mechanisms.md section 14) has a sampling term in the paper's worst-case
form: every registered user in one cell, V(theta) = sum over users below theta of p_i (1 - p_i). A
cell holds n_c of the N registered users, and with budgets independent of the cells its sampling
variance is V n_c / N; over the cells its mean is V L / N, L = C / d the expected users per cell.
Here L comes from the last released histogram (public): the sum of its counts over d, at least 1
and at most N. OBS then picks theta minimising (V L / N + noise) / s^2. Only the threshold's choice
changes; the privacy argument does not read it (every user still pays its own eps_i).

- `--variant choice`: the release still announces the worst-case error at that theta (its
  `threshold`, which the filter and the audit read, keeps its meaning); Adaptive's level test and
  half-day test read the expected cell's error.
- `--variant error`: the release announces the expected cell's error, and the filter spreads its
  sampling part, d times the announced mean, over the cells by their shares (so a cell gets V n_c / N).

    .venv/bin/python docs/results/sparse-workloads/expected-cell/expected_cell.py --variant error \\
        evaluate --datasets ... --mechanisms Adaptive ... --out ...

Written for commit 85ee199, before the rule was built: run it in a worktree of that commit. Since
then `--variant error` is the default (docs/mechanisms.md section 14, "The mean cell"); on a later
commit the script does not apply (the product's OBS takes the load itself).
"""

import argparse
import dataclasses
import sys

import numpy as np

import pwevent.operators.family as family
import pwevent.operators.obs as obs
import pwevent.operators.postprocess as postprocess
import pwevent.operators.slot_release as slot_release

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--variant", choices=("choice", "error"), required=True)
options, rest = parser.parse_known_args()
load = [1.0]  # L / N of the slot being decided (set per slot by decide; workers are forked)
optimal_budget = obs.optimal_budget
decide = slot_release.SlotRelease.decide
observe = family.FamilySwitch.observe
cell_variances = postprocess.PublicRelease.cell_variances


def expected_cell_budget(levels, counts, noise_variance, rescaled=False):
    """obs.optimal_budget with the sampling term of a rescaled release weighted by L / N."""
    if not rescaled:
        return optimal_budget(levels, counts, noise_variance, rescaled)
    weighted = optimal_budget(levels, counts, lambda theta: noise_variance(theta) / load[0], rescaled)
    if weighted is None:
        return None
    # (V + noise / f) / s^2 is minimised where (f V + noise) / s^2 is (f > 0): the same theta
    expected = weighted.error * load[0]
    chosen = dataclasses.replace(weighted, error=expected)
    if options.variant == "choice":
        chosen = dataclasses.replace(weighted, error=_worst_error(levels, counts, noise_variance, weighted))
        object.__setattr__(chosen, "expected", expected)
    return chosen


def _worst_error(levels, counts, noise_variance, choice):
    """The worst-case rescaled error at the chosen theta: (V + noise) / s^2."""
    levels, counts = np.asarray(levels, dtype=float), np.asarray(counts, dtype=float)
    below = levels < choice.epsilon
    p = np.expm1(levels[below]) / np.expm1(choice.epsilon)
    variance = float(np.sum(counts[below] * p * (1 - p)))
    return (variance + float(noise_variance(np.array([choice.epsilon]))[0])) / choice.kept_share**2


def expected_cell_decide(self, slot, groups, last, scheduled, rescaled=False):
    registered = float(groups.members.sum())
    if registered > 0:
        per_cell = min(max(float(np.asarray(last, dtype=float).sum()) / self.d, 1.0), registered)
        load[0] = per_cell / registered
    return decide(self, slot, groups, last, scheduled, rescaled)


def expected_error_observe(self, outcome):
    """--variant choice: the family's tests read the expected cell's error."""
    publication = outcome.publication
    if publication is not None and hasattr(publication, "expected"):
        publication = obs.BudgetChoice(publication.epsilon, publication.expected, publication.kept_share)
        outcome = dataclasses.replace(outcome, publication=publication)
    return observe(self, outcome)


def spread_cell_variances(self):
    """--variant error: the announced sampling part is a cell's mean; the cells hold d times it."""
    out = cell_variances(self)
    if self.epsilon is None or self.kept_share is None:
        return out
    noise = float(postprocess.discrete_laplace_variance(self.epsilon)) / self.kept_share**2
    return noise + (out - noise) * len(self.counts)


slot_release.optimal_budget = expected_cell_budget
slot_release.SlotRelease.decide = expected_cell_decide
if options.variant == "choice":
    family.FamilySwitch.observe = expected_error_observe
else:
    postprocess.PublicRelease.cell_variances = spread_cell_variances

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(rest))
