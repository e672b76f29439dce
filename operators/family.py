"""Adaptive: even spending (Uniform's rule), absorption (PBA) or distribution (PBD), re-chosen at
slot boundaries from public releases only (docs/mechanisms.md section 14).

Adaptive starts by spending evenly: every ledger puts its E_i/w_i on a publication at every slot,
which gives a release per slot with a known error variance R. From consecutive such releases it
estimates the stream's per-slot drift Q (E[(r_t - r_{t-1})^2] per cell is R_t + R_{t-1} + Q); a
stream whose drift is, with confidence, small against R is nearly static and switches to absorption,
which spends one large publication where even spending spreads many small ones. Under absorption
(and distribution) the evidence is the share of PUBLISH among the slots that ran a dissimilarity; a
share at or above `switch_rate + hysteresis` means the stream moves again, and absorption goes back
to even spending (distribution, reachable only as the configured `start`, goes to absorption below
`switch_rate - hysteresis`). Every input is part of the releases, so the choice is post-processing.

Privacy does not rest on the choice: whichever family is in force, its budgets are capped by what
the user's window has left (`window_room`), so any w_i consecutive slots of any user spend at most
E_i, however the families alternate; the ledger refuses anything more.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pwevent.operators.policies import PBD, SlotBudget, Uniform, absorption
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.ledger import FixedLedger, Ledger
from pwevent.state.requirements import TOLERANCE
from pwevent.state.spend import Kind

EVEN = "Uniform"
DISTRIBUTION = "PBD"
ABSORPTION = "PBA"
#: Every family a release may name (the release schema's `family` enum, operators/registry.py).
FAMILIES = (EVEN, ABSORPTION, DISTRIBUTION)
#: Standard errors between the drift estimate and its bound: a switch to absorption needs the
#: estimate plus this many standard errors below `static_drift` R (about 98% one-sided).
DRIFT_CONFIDENCE = 2.0


@dataclass(frozen=True)
class FamilyRule:
    """evidence: how many recent slots each test reads (a switch needs that many since the last one):
    consecutive even releases for the drift, dissimilarity slots for the publication share.
    static_drift: under even spending, a drift bound (estimate + DRIFT_CONFIDENCE standard errors)
    below static_drift x the releases' variance R switches to absorption. switch_rate +- hysteresis:
    under absorption a publication share at or above switch_rate + hysteresis switches to even
    spending; under distribution a share below switch_rate - hysteresis switches to absorption.
    start: the family in force at slot 1."""

    evidence: int = 240
    switch_rate: float = 0.5
    hysteresis: float = 0.1
    static_drift: float = 0.01
    start: str = EVEN

    def __post_init__(self) -> None:
        if isinstance(self.evidence, bool) or not isinstance(self.evidence, int):
            raise ValueError(f"evidence must be an integer number of slots, got {self.evidence!r}")
        for name in ("switch_rate", "hysteresis", "static_drift"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.evidence < 2:
            raise ValueError(f"evidence must be at least two slots, got {self.evidence}")
        if not 0 <= self.hysteresis <= self.switch_rate <= 1 - self.hysteresis:
            raise ValueError(f"need 0 <= hysteresis <= switch_rate <= 1 - hysteresis, got switch_rate "
                             f"{self.switch_rate} and hysteresis {self.hysteresis}")
        if self.static_drift < 0:
            raise ValueError(f"static_drift must be at least 0, got {self.static_drift}")
        if self.start not in FAMILIES:
            raise ValueError(f"start must be one of {', '.join(FAMILIES)}, got {self.start!r}")


def _family(name: Any) -> str:
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}")
    return str(name)


class FamilySwitch:
    """The family in force, the slot it came into force (`since`) and the public evidence since:
    `recent`, the kinds of dissimilarity slots (absorption, distribution); `drift`, one
    (drift estimate, variance R) per pair of consecutive even releases, and `last`, the last even
    release (slot, counts, R)."""

    def __init__(self, rule: FamilyRule | None = None, family: str | None = None) -> None:
        self.rule = rule or FamilyRule()
        self.family = _family(family if family is not None else self.rule.start)
        self.since = 1
        self.recent: deque[bool] = deque(maxlen=self.rule.evidence)
        self.drift: deque[tuple[float, float]] = deque(maxlen=self.rule.evidence)
        self.last: tuple[int, list[int], float] | None = None

    @property
    def rate(self) -> float | None:
        """The publication share over the evidence window, once it is full."""
        if len(self.recent) < self.rule.evidence:
            return None
        return sum(self.recent) / len(self.recent)

    def drift_bound(self) -> tuple[float, float] | None:
        """(upper bound on the per-slot drift Q, mean release variance R) over the evidence window,
        once it is full: the mean of the pairs' estimates plus DRIFT_CONFIDENCE standard errors."""
        if len(self.drift) < self.rule.evidence:
            return None
        estimates = np.array([q for q, _ in self.drift])
        spread = float(estimates.std(ddof=1)) / math.sqrt(len(estimates))
        return float(estimates.mean()) + DRIFT_CONFIDENCE * spread, float(np.mean([r for _, r in self.drift]))

    def observe(self, outcome: SlotOutcome) -> None:
        """A decided slot's public outcome; may switch the family for the next slot."""
        if self.family == EVEN:
            self._observe_even(outcome)
        else:
            self._observe_decided(outcome)

    def _observe_even(self, outcome: SlotOutcome) -> None:
        """A pair of consecutive even publications, r_a at slot a and r_b at b, gives the drift
        estimate (mean over cells of (r_b - r_a)^2 - R_a - R_b) / (b - a): unbiased when the noise is
        independent with variances R_a, R_b and the stream drifts by Q per slot."""
        if outcome.kind is not Kind.PUBLISH or outcome.publication is None:
            return
        counts = [int(c) for c in outcome.counts]
        variance = float(outcome.publication.error)
        if self.last is not None:
            slot, previous, previous_variance = self.last
            step = np.asarray(counts, dtype=float) - np.asarray(previous, dtype=float)
            excess = float(np.mean(step * step)) - variance - previous_variance
            self.drift.append((excess / (outcome.slot - slot), variance))
        self.last = (outcome.slot, counts, variance)
        bound = self.drift_bound()
        if bound is not None and bound[0] < self.rule.static_drift * bound[1]:
            self.enter(ABSORPTION, outcome.slot + 1)

    def _observe_decided(self, outcome: SlotOutcome) -> None:
        """Slots that ran no dissimilarity (nullified, empty, or out of budget) are no evidence."""
        if outcome.dissimilarity is None:
            return
        self.recent.append(outcome.kind is Kind.PUBLISH)
        rate, rule = self.rate, self.rule
        if rate is None:
            return
        if self.family == DISTRIBUTION and rate < rule.switch_rate - rule.hysteresis:
            self.enter(ABSORPTION, outcome.slot + 1)
        elif self.family == ABSORPTION and rate >= rule.switch_rate + rule.hysteresis:
            self.enter(EVEN, outcome.slot + 1)

    def enter(self, family: str, slot: int) -> None:
        """`family` is in force from `slot` on; the evidence starts again (the old family's releases
        say nothing about the new one's thresholds or variances)."""
        if _family(family) != self.family:
            self.family, self.since = family, slot
            self.recent.clear()
            self.drift.clear()
            self.last = None

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "since": self.since, "recent": [int(x) for x in self.recent],
                "drift": [list(pair) for pair in self.drift],
                "last": None if self.last is None else list(self.last)}

    def restore(self, obj: dict[str, Any]) -> None:
        self.family, self.since = _family(obj["family"]), int(obj["since"])
        self.recent = deque((bool(x) for x in obj["recent"]), maxlen=self.rule.evidence)
        self.drift = deque(((float(q), float(r)) for q, r in obj.get("drift", [])), maxlen=self.rule.evidence)
        last = obj.get("last")
        self.last = None if last is None else (int(last[0]), [int(c) for c in last[1]], float(last[2]))


def window_room(ledger: FixedLedger, slot: int, budget: SlotBudget, halves: bool) -> SlotBudget:
    """`budget` capped by what the window of w slots ending at `slot` has left (docs/mechanisms.md
    section 14): eps1 + eps2 <= E - (spend1 + spend2) of the w - 1 slots before, which alone keeps
    every window within E whatever the families did; with `halves` (distribution, absorption) also
    eps1 <= E/2 - spend1 and eps2 <= E/2 - spend2 of those slots, the halves their rules assume.
    Under one family alone the caps never bind."""
    req = ledger.requirement
    spent1, spent2 = ledger.spent(slot - req.w + 1, slot - 1)
    room = req.epsilon - spent1 - spent2
    eps1 = _cap(budget.eps1, room)
    eps2 = _cap(budget.eps2, room - eps1)
    if halves:
        half = req.epsilon / 2
        eps1, eps2 = _cap(eps1, half - spent1), _cap(eps2, half - spent2)
    return replace(budget, eps1=eps1, eps2=eps2)


def _cap(value: float, room: float) -> float:
    """`value`, or `room` (at least 0) when `value` is over it by more than float noise: a cap within
    TOLERANCE/4 of the value is rounding of the window sums, not a binding cap (the residues of the
    caps stay within the ledger's TOLERANCE together)."""
    return max(0.0, room) if value > room + TOLERANCE / 4 else value


class Adaptive:
    """The Adaptive budget policy: the budgets of the family in force (Uniform's E_i/w_i published at
    every slot, PBD or PBA; fixed requirements), capped by each window's room; `observe` re-decides
    the family after every slot."""

    name = "Adaptive"
    dynamic = False

    def __init__(self, rule: FamilyRule | None = None, family: str | None = None) -> None:
        self.switch = FamilySwitch(rule, family)
        self._even = Uniform()
        self._distribution = PBD()

    @property
    def family(self) -> str:
        return self.switch.family

    def in_force(self) -> str | None:
        return self.family

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, FixedLedger)
        if self.family == EVEN:
            return window_room(ledger, slot, self._even.budgets(ledger, slot), halves=False)
        if self.family == DISTRIBUTION:
            budget = self._distribution.budgets(ledger, slot)
        else:  # absorption from the switch on: a publication of another family absorbed nothing
            publication = ledger.last_publication()
            since = self.switch.since
            if publication is not None and publication.slot < since:
                publication = None
            budget = absorption(ledger.requirement, slot, publication, max(ledger.since, since))
        return window_room(ledger, slot, budget, halves=True)

    def scheduled_kind(self, slot: int) -> Kind | None:
        """Even spending publishes at every slot (Uniform's schedule); the other families let the
        dissimilarity decide."""
        return Kind.PUBLISH if self.family == EVEN else None

    def observe(self, outcome: SlotOutcome) -> None:
        self.switch.observe(outcome)

    def snapshot(self) -> dict[str, Any] | None:
        return self.switch.to_json()

    def restore(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.switch.restore(state)
