"""`pwevent evaluate` with whole bursts moved by part of a day: after a burst of a period P that is a
whole number of days (P a multiple of 24 under hourly slots), the next burst comes P + `--offset`
slots later instead of P (measured, not adopted; ../README.md, "A day offset"). The hourly datasets
(`Sparse-hourly-*` and Foursquare at 60-minute slots) take the offset; the others are the default.
Everything else is the code of this checkout.

    .venv/bin/python docs/results/sparse-workloads/equal-requirements/day-offset/rule.py --offset 12 \\
        evaluate --datasets Sparse-hourly-336,Sparse-hourly-720 --mechanisms Adaptive ... --seed 1 --out ...
"""

import argparse
import sys

import numpy as np

import pwevent.jobs.evaluation.evaluate as evaluate
import pwevent.operators.family as family
from pwevent.state.spend import Kind

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--offset", type=int, default=0, help="slots added to a period of whole days")
options, rest = parser.parse_known_args()
HOURS_PER_DAY = 24
hourly = [False]  # whether the task being run has hourly slots (set per task; workers are forked)
run_mechanism = evaluate.run_mechanism


def run_hourly_aware(name, task, data, d, users):
    hourly[0] = task.dataset.startswith(("Sparse-hourly", "Foursquare"))
    return run_mechanism(name, task, data, d, users)


def observe_burst(self, outcome):
    """FamilySwitch._observe_burst, with the offset after a burst whose period is whole days."""
    if outcome.slot != self.next_burst:
        return
    if outcome.population == 0:
        self.next_burst = outcome.slot + 1
        return
    share = self.burst_share(outcome.slot)
    period = max(self.widest, 1)
    offset = options.offset if hourly[0] and period % HOURS_PER_DAY == 0 else 0
    self.next_burst = outcome.slot + 1 if self.probing else outcome.slot + period + offset
    self.probing = False
    if outcome.kind is not Kind.PUBLISH or outcome.publication is None:
        return
    if family.dense(np.asarray(outcome.counts, dtype=float), outcome.publication.error, share, period,
                    self.rule.level_margin):
        self.enter(family.EVEN, outcome.slot + 1)


evaluate.run_mechanism = run_hourly_aware
family.FamilySwitch._observe_burst = observe_burst

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(rest))
