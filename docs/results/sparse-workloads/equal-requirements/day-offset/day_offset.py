"""`pwevent evaluate` with the default's whole bursts moved by part of a day under hourly slots
(../../README.md, "A day offset": the fixed offset measured, not adopted; `--explore --margin 4` is the default's rule since commit 7d5bc82, FamilySwitch.day_offset). Under hourly slots (`Sparse-hourly-*`,
Foursquare at 60-minute slots) and a burst period P of whole days, every whole burst falls on the same
hour. `--offset` replaces only `FamilySwitch.burst_after` (the slot of the next burst); the daily workloads
and the synthetic streams keep the default's schedule. No gap is below P, so every window of every user
still holds at most one whole burst; only public releases are read.

- `--offset N`: every next burst P + N slots after a burst whose period is whole days.
- `--explore --margin M`: the default's own rule since commit 7d5bc82 (`FamilySwitch.day_offset`,
  docs/mechanisms.md section 14) with its margin set to M: the burst after the first whole one comes
  half a day later; the bursts keep alternating when the two releases differ by more than M x R
  (D = mean over cells of (a - b)^2 minus both releases' error per cell), else they go back to the
  first hour. The runs of `explore-margin-*/` were made before the rule was built, with a copy of it
  here; this reproduces them.

    .venv/bin/python docs/results/sparse-workloads/equal-requirements/day-offset/day_offset.py --explore \\
        --margin 4 evaluate --datasets Sparse-hourly-336,Sparse-hourly-720 --mechanisms Adaptive ... --out ...

Written for the code before the narrowest period (../README.md, "The narrowest period and a quarter
of a day"): it patches methods that code had, so run it in a worktree of commit 5d85fc5.
"""

import argparse
import sys

import pwevent.jobs.evaluation.evaluate as evaluate
import pwevent.operators.family as family

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--offset", type=int, default=0, help="slots added to every period of whole days")
parser.add_argument("--explore", action="store_true", help="try the other half of the day once instead")
parser.add_argument("--margin", type=float, default=4.0, help="with --explore: D must exceed margin x R")
options, rest = parser.parse_known_args()
HOURS_PER_DAY = 24
hourly = [False]  # whether the task being run has hourly slots (set per task; workers are forked)
run_mechanism = evaluate.run_mechanism


def run_hourly_aware(name, task, data, d, users):
    hourly[0] = task.dataset.startswith(("Sparse-hourly", "Foursquare"))
    return run_mechanism(name, task, data, d, users)


def burst_after(self, outcome, period):
    """FamilySwitch.burst_after, with the offset after a whole burst whose period is whole days."""
    if self.probing:
        return outcome.slot + 1
    if not hourly[0] or period % HOURS_PER_DAY:
        return outcome.slot + period
    return outcome.slot + period + options.offset


if options.explore:  # the default's own rule since commit 7d5bc82 (FamilySwitch.day_offset), at --margin
    family.HALF_DAY_MARGIN = options.margin
else:
    evaluate.run_mechanism = run_hourly_aware
    family.FamilySwitch.burst_after = burst_after

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(rest))
