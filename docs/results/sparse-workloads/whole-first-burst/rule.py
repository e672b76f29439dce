"""`pwevent evaluate` with Adaptive's first burst changed (measured, not adopted; README.md, "A whole
first burst"). Everything else is the code of this checkout. Options, before `evaluate`:

- `--probe P`: the probe's share of E_i (the default's is 1/8); at P = 1 the first burst is whole;
- `--period-from-first`: with a whole first burst, the next burst P slots after it (Sample's
  schedule: 1, 1 + P, 1 + 2P, ...), not P slots after the slot after it (the rest's slot, empty at
  P = 1: 1, 2 + P, 2 + 2P, ..., the default's burst slots after the probe);
- `--first-burst T`: the first burst at slot T instead of 1 (slots before it repeat the zeros);
- `--extra-spacing sqrt`: whole bursts P + ceil(sqrt(P)) slots apart instead of P (each falls at
  another phase of a cycle whose length divides P, such as the day under hourly slots), `1`: P + 1.

    .venv/bin/python docs/results/sparse-workloads/whole-first-burst/rule.py --probe 1 --period-from-first \
        evaluate --datasets ... --mechanisms Adaptive ... --seed 1 --out ...

Written for the code before the narrowest period (../README.md, "The narrowest period and a quarter
of a day"): it patches methods that code had, so run it in a worktree of commit 5d85fc5.
"""

import argparse
import dataclasses
import math
import sys

import pwevent.operators.family as family

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--probe", type=float, default=family.FamilyRule().probe)
parser.add_argument("--period-from-first", action="store_true")
parser.add_argument("--first-burst", type=int, default=1)
parser.add_argument("--extra-spacing", choices=("0", "1", "sqrt"), default="0")
options, rest = parser.parse_known_args()

original_init = family.FamilySwitch.__init__


def init(self, rule=None, name=None):
    original_init(self, dataclasses.replace(rule or family.FamilyRule(), probe=options.probe), name)
    if self.family == family.BURST:
        self.next_burst = options.first_burst


def burst_after(self, outcome, period):
    """FamilySwitch.burst_after, the next burst's slot as the options say."""
    rest_next = self.probing and not (options.period_from_first and self.rule.probe >= 1)
    extra = {"0": 0, "1": 1, "sqrt": math.ceil(math.sqrt(period))}[options.extra_spacing]
    return outcome.slot + 1 if rest_next else outcome.slot + period + extra


family.FamilySwitch.__init__ = init
family.FamilySwitch.burst_after = burst_after

from pwevent.jobs.cli.main import main  # noqa: E402  (after the patch)

sys.exit(main(rest))
