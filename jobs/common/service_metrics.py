"""What a privacy service is watched by (docs/operations.md, "Metrics"), computed from the engine's
state after each decided slot and from the dead letters; the Flink hosts only copy these numbers into
Flink metrics (jobs/streaming/hosts.py), the names below are theirs.

Per slot (`SlotReport`): the decision (publish / skip / nullify), the OBS threshold of the release
step, the registered users and live ledger classes, and the budget utilisation per window bucket:
for every class, what its ledger spent in the window of w slots ending at the slot, over the epsilon
it may spend there (for dynamic requirements, the backward window's w and epsilon); a bucket's value
is the largest of the classes whose w falls in it (its most constrained class). 1.0 means no budget
is left for the slots still inside the window. The buckets are the decades of w (WINDOW_BUCKETS), a
fixed set, so that the metric has a bounded number of series whatever levels users declare. The
same numbers, in millionths (`utilisation_ppm`), are the spend log's `utilisation` record of the slot
(state/spend_log.py, written by `SharedBudget.budget_view`), which `pwevent audit` recomputes from
the spend lines: so they are defined exactly (`window_utilisation`), not up to a summation order. The
counters (releases by kind, dead letters by reason, late records) are counted where the records are
made.

Flink's gauges from Python carry integers, so fractional values are exported scaled, with the scale in
the name: `obs_threshold_milli` (thresholds in thousandths) and `budget_utilisation_ppm` (millionths).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from pwevent.state.population import LedgerClass
from pwevent.state.requirements import DynamicRequirement, Requirement

#: Release kinds (the label `kind` of the counter `releases`).
KINDS = ("publish", "skip", "nullify")
MILLI = 1_000
PPM = 1_000_000


#: The window buckets (the label `window` of `budget_utilisation_ppm`): name -> the smallest w in it.
WINDOW_BUCKETS = {"w1_9": 1, "w10_99": 10, "w100_999": 100, "w1000_up": 1000}


def _window(requirement: Requirement | DynamicRequirement) -> Requirement:
    """The window a requirement's utilisation is measured on: its own, a dynamic one's backward one."""
    return requirement.backward if isinstance(requirement, DynamicRequirement) else requirement


def window_bucket(requirement: Requirement | DynamicRequirement) -> str:
    """The window bucket of a requirement's w (dynamic ones by their backward window)."""
    w = _window(requirement).w
    return [name for name, lowest in WINDOW_BUCKETS.items() if w >= lowest][-1]


def window_utilisation(classes: list[LedgerClass], slot: int, *more: list[LedgerClass]) -> dict[str, Fraction]:
    """Window bucket -> the largest share of its window budget a class of that bucket has spent in
    the w slots ending at `slot`; every bucket, 0 where no class is. `more`: the classes of the other
    statistics of a shared budget (docs/mechanisms.md, "Several statistics under one budget"), which
    have the same ids: a class's spend is then summed over the statistics, against its members' whole
    budget.

    Exact, so that an auditor gets the same number from the spend lines in any order: a class's share
    is S / E as a fraction, S every spend1 and spend2 of the window (of every statistic) added up
    exactly and rounded once to the nearest float (`math.fsum`), E the epsilon of its members'
    requirement (a float, taken exactly)."""
    spends: dict[str, list[float]] = defaultdict(list)
    for cls in (cls for population in (classes, *more) for cls in population):
        spends[cls.id] += cls.ledger.spends(slot - _window(cls.requirement).w + 1, slot)
    out = dict.fromkeys(WINDOW_BUCKETS, Fraction(0))
    for cls in classes:
        bucket = window_bucket(cls.requirement)
        share = Fraction(math.fsum(spends[cls.id])) / Fraction(_window(cls.requirement).epsilon)
        out[bucket] = max(out[bucket], share)
    return out


def utilisation_ppm(shares: Mapping[str, Fraction]) -> dict[str, int]:
    """`window_utilisation`'s shares in millionths, each rounded to the nearest integer (half to
    even): the gauge `budget_utilisation_ppm` and the spend log's `utilisation` record."""
    return {bucket: round(share * PPM) for bucket, share in shares.items()}


@dataclass(frozen=True)
class SlotReport:
    slot: int
    kind: str
    threshold: float | None
    users: int
    classes: int
    utilisation: dict[str, Fraction] = field(default_factory=dict)

    @classmethod
    def of(cls, slot: int, kind: str, threshold: float | None, classes: list[LedgerClass],
           *more: list[LedgerClass], utilisation: dict[str, Fraction] | None = None) -> SlotReport:
        """The report of `slot` from the live classes after the slot was settled (`more`: the other
        statistics' classes of a shared budget, `window_utilisation`; `utilisation`: that, when the
        caller has it already)."""
        if utilisation is None:
            utilisation = window_utilisation(classes, slot, *more)
        return cls(slot, kind, threshold, sum(c.members for c in classes), len(classes), utilisation)

    def gauges(self) -> dict[str, int]:
        """The slot's gauges as Flink exports them (integers; see the module docstring)."""
        return {
            "last_decided_slot": self.slot,
            "obs_threshold_milli": round((self.threshold or 0.0) * MILLI),
            "registered_users": self.users,
            "ledger_classes": self.classes,
        }

    def utilisation_ppm(self) -> dict[str, int]:
        return utilisation_ppm(self.utilisation)
