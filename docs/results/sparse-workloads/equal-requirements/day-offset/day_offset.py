"""`pwevent evaluate` with the default's whole bursts moved by part of a day under hourly slots
(../../README.md, "A day offset": the fixed offset measured, not adopted; `--explore --margin 4` is the default's rule since commit 7d5bc82, FamilySwitch.day_offset). Under hourly slots (`Sparse-hourly-*`,
Foursquare at 60-minute slots) and a burst period P of whole days, every whole burst falls on the same
hour. Only `FamilySwitch.burst_after` (the slot of the next burst) is replaced; the daily workloads and
the synthetic streams keep the default's schedule. No gap is below P, so every window of every user
still holds at most one whole burst; only public releases are read.

- `--offset N`: every next burst P + N slots after a burst whose period is whole days.
- `--explore --margin M`: the burst after the first whole one (the rest of the first window) comes
  P + 12 slots later, half a day away; the two releases are then compared, D = mean over cells of
  (a - b)^2 minus both releases' error per cell (an unbiased estimate of the mean squared difference
  of the true counts half a day apart). If D > M x R (R the later burst's error per cell), the
  bursts keep alternating, P + 12 slots apart; otherwise the next gap is P + 12 once more (back to
  the first hour), then P.

    .venv/bin/python docs/results/sparse-workloads/equal-requirements/day-offset/day_offset.py --explore \\
        --margin 4 evaluate --datasets Sparse-hourly-336,Sparse-hourly-720 --mechanisms Adaptive ... --out ...
"""

import argparse
import sys

import numpy as np

import pwevent.jobs.evaluation.evaluate as evaluate
import pwevent.operators.family as family
from pwevent.state.spend import Kind

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--offset", type=int, default=0, help="slots added to every period of whole days")
parser.add_argument("--explore", action="store_true", help="try the other half of the day once instead")
parser.add_argument("--margin", type=float, default=4.0, help="with --explore: D must exceed margin x R")
options, rest = parser.parse_known_args()
HOURS_PER_DAY, HALF_DAY = 24, 12
hourly = [False]  # whether the task being run has hourly slots (set per task; workers are forked)
run_mechanism = evaluate.run_mechanism


def run_hourly_aware(name, task, data, d, users):
    hourly[0] = task.dataset.startswith(("Sparse-hourly", "Foursquare"))
    return run_mechanism(name, task, data, d, users)


def explored_offset(switch, outcome):
    """--explore: the offset after this whole burst (stages first -> explored -> alternate, or ->
    back -> plain), from this release and the one before."""
    day = switch.__dict__.setdefault("_day", {"stage": "first", "last": None})
    published = outcome.kind is Kind.PUBLISH and outcome.publication is not None
    release = (np.asarray(outcome.counts, dtype=float), outcome.publication.error) if published else None
    offset = 0
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
    return offset


def burst_after(self, outcome, period):
    """FamilySwitch.burst_after, with the offset after a whole burst whose period is whole days."""
    if self.probing:
        return outcome.slot + 1
    if not hourly[0] or period % HOURS_PER_DAY:
        return outcome.slot + period
    return outcome.slot + period + (explored_offset(self, outcome) if options.explore else options.offset)


evaluate.run_mechanism = run_hourly_aware
family.FamilySwitch.burst_after = burst_after

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(rest))
