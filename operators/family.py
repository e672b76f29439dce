"""Adaptive: distribution (PBD) or absorption (PBA), re-chosen at slot boundaries from public
decisions only (docs/mechanisms.md section 14).

A stream that rarely moves by more than the announced error wastes the distribution family's
halving and suits absorption, which turns every skipped slot's share into a larger later
publication; a stream that needs a fresh publication at most slots suits distribution, since
absorption would nullify the slots after each large publication. The evidence is the share of
PUBLISH decisions among the last `evidence` slots that ran a dissimilarity, counted since the last
switch; two thresholds (hysteresis) keep the choice from flapping. Every decision is public (each
release carries its kind and whether a dissimilarity ran), so the choice is post-processing.

Privacy does not rest on the choice: whichever family is in force, its budgets are capped by what
the user's window has left (`window_room`), so any w_i consecutive slots of any user spend at most
E_i, however the families alternate; the ledger refuses anything more.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from pwevent.operators.policies import PBD, SlotBudget, absorption
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.ledger import FixedLedger, Ledger
from pwevent.state.requirements import TOLERANCE
from pwevent.state.spend import Kind

DISTRIBUTION = "PBD"
ABSORPTION = "PBA"


@dataclass(frozen=True)
class FamilyRule:
    """evidence: how many recent dissimilarity slots the publication share is taken over (a switch
    needs that many since the last one); switch_rate +- hysteresis: under distribution a share below
    switch_rate - hysteresis switches to absorption, under absorption a share at or above
    switch_rate + hysteresis switches back."""

    evidence: int = 240
    switch_rate: float = 0.5
    hysteresis: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.evidence, bool) or not isinstance(self.evidence, int):
            raise ValueError(f"evidence must be an integer number of slots, got {self.evidence!r}")
        for name in ("switch_rate", "hysteresis"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if self.evidence < 1:
            raise ValueError(f"evidence must be at least one slot, got {self.evidence}")
        if not 0 <= self.hysteresis <= self.switch_rate <= 1 - self.hysteresis:
            raise ValueError(f"need 0 <= hysteresis <= switch_rate <= 1 - hysteresis, got switch_rate "
                             f"{self.switch_rate} and hysteresis {self.hysteresis}")


class FamilySwitch:
    """The family in force, the slot it came into force (`since`) and the public evidence since."""

    def __init__(self, rule: FamilyRule | None = None, family: str = DISTRIBUTION) -> None:
        self.rule = rule or FamilyRule()
        self.family = family
        self.since = 1
        self.recent: deque[bool] = deque(maxlen=self.rule.evidence)

    @property
    def rate(self) -> float | None:
        """The publication share over the evidence window, once it is full."""
        if len(self.recent) < self.rule.evidence:
            return None
        return sum(self.recent) / len(self.recent)

    def observe(self, outcome: SlotOutcome) -> None:
        """A decided slot's public outcome; may switch the family for the next slot. Slots that ran
        no dissimilarity (nullified, empty, or out of budget) are no evidence."""
        if outcome.dissimilarity is None:
            return
        self.recent.append(outcome.kind is Kind.PUBLISH)
        rate, rule = self.rate, self.rule
        if rate is None:
            return
        if self.family == DISTRIBUTION and rate < rule.switch_rate - rule.hysteresis:
            self.enter(ABSORPTION, outcome.slot + 1)
        elif self.family == ABSORPTION and rate >= rule.switch_rate + rule.hysteresis:
            self.enter(DISTRIBUTION, outcome.slot + 1)

    def enter(self, family: str, slot: int) -> None:
        """`family` is in force from `slot` on; the evidence starts again (the old family's decisions
        say nothing about the new one's thresholds)."""
        if family not in (DISTRIBUTION, ABSORPTION):
            raise ValueError(f"unknown family {family!r}")
        if family != self.family:
            self.family, self.since = family, slot
            self.recent.clear()

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "since": self.since, "recent": [int(x) for x in self.recent]}

    def restore(self, obj: dict[str, Any]) -> None:
        if obj["family"] not in (DISTRIBUTION, ABSORPTION):
            raise ValueError(f"unknown family {obj['family']!r}")
        self.family, self.since = obj["family"], int(obj["since"])
        self.recent = deque((bool(x) for x in obj["recent"]), maxlen=self.rule.evidence)


def window_room(ledger: FixedLedger, slot: int, budget: SlotBudget) -> SlotBudget:
    """`budget` capped so that the window of w slots ending at `slot` spends at most E/2 on each
    half: eps1 by E/2 - calculation spend, eps2 by E/2 - publication spend of the w - 1 slots before
    (docs/mechanisms.md section 14). Under one family alone the caps never bind."""
    req = ledger.requirement
    spent1, spent2 = ledger.spent(slot - req.w + 1, slot - 1)
    half = req.epsilon / 2
    return replace(budget, eps1=_cap(budget.eps1, half - spent1), eps2=_cap(budget.eps2, half - spent2))


def _cap(value: float, room: float) -> float:
    """`value`, or `room` (at least 0) when `value` is over it by more than float noise: a cap within
    TOLERANCE/4 of the value is rounding of the window sums, not a binding cap (the two halves'
    residues stay within the ledger's TOLERANCE together)."""
    return max(0.0, room) if value > room + TOLERANCE / 4 else value


class Adaptive:
    """The Adaptive budget policy: the budgets of the family in force (PBD or PBA, fixed requirements),
    capped by each window's room; `observe` re-decides the family after every slot."""

    name = "Adaptive"
    dynamic = False

    def __init__(self, rule: FamilyRule | None = None, family: str = DISTRIBUTION) -> None:
        self.switch = FamilySwitch(rule, family)
        self._distribution = PBD()

    @property
    def family(self) -> str:
        return self.switch.family

    def in_force(self) -> str | None:
        return self.family

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, FixedLedger)
        if self.family == DISTRIBUTION:
            budget = self._distribution.budgets(ledger, slot)
        else:  # absorption from the switch on: a publication of the distribution family absorbed nothing
            publication = ledger.last_publication()
            since = self.switch.since
            if publication is not None and publication.slot < since:
                publication = None
            budget = absorption(ledger.requirement, slot, publication, max(ledger.since, since))
        return window_room(ledger, slot, budget)

    def scheduled_kind(self, slot: int) -> Kind | None:
        return None

    def observe(self, outcome: SlotOutcome) -> None:
        self.switch.observe(outcome)

    def snapshot(self) -> dict[str, Any] | None:
        return self.switch.to_json()

    def restore(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.switch.restore(state)
