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
counters (releases by kind, dead letters by reason, late records) are counted where the records are
made.

Flink's gauges from Python carry integers, so fractional values are exported scaled, with the scale in
the name: `obs_threshold_milli` (thresholds in thousandths) and `budget_utilisation_ppm` (millionths).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pwevent.state.population import LedgerClass
from pwevent.state.requirements import DynamicRequirement, Requirement

#: Release kinds (the label `kind` of the counter `releases`).
KINDS = ("publish", "skip", "nullify")
MILLI = 1_000
PPM = 1_000_000


#: The window buckets (the label `window` of `budget_utilisation_ppm`): name -> the smallest w in it.
WINDOW_BUCKETS = {"w1_9": 1, "w10_99": 10, "w100_999": 100, "w1000_up": 1000}


def window_bucket(requirement: Requirement | DynamicRequirement) -> str:
    """The window bucket of a requirement's w (dynamic ones by their backward window)."""
    fixed = requirement.backward if isinstance(requirement, DynamicRequirement) else requirement
    return [name for name, lowest in WINDOW_BUCKETS.items() if fixed.w >= lowest][-1]


def window_utilisation(classes: list[LedgerClass], slot: int, *more: list[LedgerClass]) -> dict[str, float]:
    """Window bucket -> the largest share of its window budget a class of that bucket has spent in
    the w slots ending at `slot`; every bucket, 0.0 where no class is. `more`: the classes of the other
    statistics of a shared budget (docs/mechanisms.md, "Several statistics under one budget"), which
    have the same ids: a class's spend is then summed over the statistics, against its members' whole
    budget."""
    spent: dict[str, float] = {}
    for cls in (cls for population in (classes, *more) for cls in population):
        fixed = cls.requirement.backward if isinstance(cls.requirement, DynamicRequirement) else cls.requirement
        spend1, spend2 = cls.ledger.spent(slot - fixed.w + 1, slot)
        spent[cls.id] = spent.get(cls.id, 0.0) + spend1 + spend2
    out = dict.fromkeys(WINDOW_BUCKETS, 0.0)
    for cls in classes:
        fixed = cls.requirement.backward if isinstance(cls.requirement, DynamicRequirement) else cls.requirement
        bucket = window_bucket(cls.requirement)
        out[bucket] = max(out[bucket], spent[cls.id] / fixed.epsilon)
    return out


@dataclass(frozen=True)
class SlotReport:
    slot: int
    kind: str
    threshold: float | None
    users: int
    classes: int
    utilisation: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, slot: int, kind: str, threshold: float | None, classes: list[LedgerClass],
           *more: list[LedgerClass]) -> SlotReport:
        """The report of `slot` from the live classes after the slot was settled (`more`: the other
        statistics' classes of a shared budget, `window_utilisation`)."""
        return cls(slot, kind, threshold, sum(c.members for c in classes), len(classes),
                   window_utilisation(classes, slot, *more))

    def gauges(self) -> dict[str, int]:
        """The slot's gauges as Flink exports them (integers; see the module docstring)."""
        return {
            "last_decided_slot": self.slot,
            "obs_threshold_milli": round((self.threshold or 0.0) * MILLI),
            "registered_users": self.users,
            "ledger_classes": self.classes,
        }

    def utilisation_ppm(self) -> dict[str, int]:
        return {bucket: round(share * PPM) for bucket, share in self.utilisation.items()}
