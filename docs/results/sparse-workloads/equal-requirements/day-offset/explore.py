"""`pwevent evaluate` with the default's bursts trying the other half of the day once (measured, not
adopted; ../../README.md, "A day offset"). Under hourly slots (`Sparse-hourly-*`, Foursquare at
60-minute slots) and a burst period P of whole days, every whole burst falls on the same hour. Here
the burst after the first whole one (the rest of the first window, at slot 2) comes P + 12 slots
later, half a day away; the two releases are then compared, D = mean over cells of (a - b)^2 minus
both releases' error per cell (an unbiased estimate of the mean squared difference of the true
counts half a day apart). If D > `--margin` x R (R the later burst's error per cell), the bursts
keep alternating, P + 12 slots apart; otherwise the next gap is P + 12 once more (back to the first
hour) and then P. Only public releases are read (post-processing), and no gap is below P, so every
window of every user still holds at most one whole burst. Everything else is this checkout's code.

    .venv/bin/python docs/results/sparse-workloads/equal-requirements/day-offset/explore.py --margin 4 \\
        evaluate --datasets Sparse-hourly-336,Sparse-hourly-720 --mechanisms Adaptive ... --seed 1 --out ...
"""

import argparse
import sys

import numpy as np

import pwevent.jobs.evaluation.evaluate as evaluate
import pwevent.operators.family as family
from pwevent.state.spend import Kind

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--margin", type=float, default=4.0, help="D must exceed margin x R to keep alternating")
options, rest = parser.parse_known_args()
HOURS_PER_DAY, HALF_DAY = 24, 12
hourly = [False]  # whether the task being run has hourly slots (set per task; workers are forked)
run_mechanism = evaluate.run_mechanism


def run_hourly_aware(name, task, data, d, users):
    hourly[0] = task.dataset.startswith(("Sparse-hourly", "Foursquare"))
    return run_mechanism(name, task, data, d, users)


def observe_burst(self, outcome):
    """FamilySwitch._observe_burst with the half-day exploration (stages: first -> explored ->
    alternate, or -> back -> plain)."""
    if outcome.slot != self.next_burst:
        return
    if outcome.population == 0:
        self.next_burst = outcome.slot + 1
        return
    share = self.burst_share(outcome.slot)
    period = max(self.widest, 1)
    day = self.__dict__.setdefault("_day", {"stage": "first", "last": None})
    published = outcome.kind is Kind.PUBLISH and outcome.publication is not None
    offset = 0
    if not self.probing and hourly[0] and period % HOURS_PER_DAY == 0:
        release = (np.asarray(outcome.counts, dtype=float), outcome.publication.error) if published else None
        if day["stage"] == "first":
            offset, day["stage"] = HALF_DAY, "explored"
        elif day["stage"] == "explored":
            differ = False
            if release is not None and day["last"] is not None:
                (counts, error), (before, error_before) = release, day["last"]
                differ = float(np.mean((counts - before) ** 2)) - error - error_before > options.margin * error
            offset, day["stage"] = HALF_DAY, "alternate" if differ else "back"
        elif day["stage"] == "alternate":
            offset = HALF_DAY
        elif day["stage"] == "back":
            day["stage"] = "plain"
        if release is not None:
            day["last"] = release
    self.next_burst = outcome.slot + 1 if self.probing else outcome.slot + period + offset
    self.probing = False
    if not published:
        return
    if family.dense(np.asarray(outcome.counts, dtype=float), outcome.publication.error, share, period,
                    self.rule.level_margin):
        self.enter(family.EVEN, outcome.slot + 1)


evaluate.run_mechanism = run_hourly_aware
family.FamilySwitch._observe_burst = observe_burst

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(rest))
