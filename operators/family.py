"""Adaptive: bursts (Sample's schedule), even spending (Uniform's rule), absorption (PBA) or
distribution (PBD), re-chosen at slot boundaries from public releases only (docs/mechanisms.md
section 14).

Adaptive starts with bursts: slot 1 publishes at a probe's share of every E_i and slot 2 at the rest
of the window; from then on one burst every P slots, P the narrowest w_i charged, at which each user
spends its E_i / ceil(w_i / P) (a user with a wider window is in several bursts per window, so
every user spends its whole E_i per window); under slots shorter than a day and a P of whole days,
each gap is P plus a quarter of a day, so that the bursts move through the day.
After each burst a level test reads its release: with R its error per
cell, the stream's mean square per cell M = mean(counts^2) - R; a stream whose M is above
level_margin x period^2 x R (R scaled to a whole-E burst; level_margin 4) is dense, and even
spending takes over from the next slot: only such a stream can drift by more per slot than
4 R, where even spending with the filter starts to beat one burst per period. Sparse
streams (cells of a few users, where one accurate release per period beats many noisy ones) stay
in bursts. Even spending puts E_i/w_i on a publication at every slot; from the last
`evidence` of its releases it estimates the stream's per-slot drift Q: with R the releases' error
(noise, sampling, the stream's own jitter), the mean squared difference per cell at lag k is 2R + k Q,
so the lag-L and lag-1 differences give Q without knowing R. A stream whose drift is, with
confidence, small against R is nearly static and switches to absorption, which spends one large
publication where even spending spreads many small ones. Under absorption (and distribution) the
evidence is the share of PUBLISH among the slots that ran a dissimilarity; a share at or above
`switch_rate + hysteresis` means the stream moves again, and absorption goes back to even spending
(distribution, reachable only as the configured `start`, goes to absorption below `switch_rate -
hysteresis`). Every input is part of the releases, so the choice is post-processing.

Privacy does not rest on the choice: whichever family is in force, its budgets are capped by what
the user's window has left (`window_room`), so any w_i consecutive slots of any user spend at most
E_i, however the families alternate; the ledger refuses anything more.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pwevent.operators.policies import PBD, SlotBudget, Uniform, absorption
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.ledger import FixedLedger, Ledger
from pwevent.state.requirements import RELATIVE_TOLERANCE
from pwevent.state.spend import Kind

EVEN = "Uniform"
DISTRIBUTION = "PBD"
ABSORPTION = "PBA"
BURST = "Sample"
#: Every family a release may name (the release schema's `family` enum, operators/registry.py).
FAMILIES = (EVEN, ABSORPTION, DISTRIBUTION, BURST)
#: Standard errors between the drift estimate and its bound: a switch to absorption needs the
#: estimate plus this many standard errors below `static_drift` R. The test runs once per block of
#: `evidence` releases, so a 10,000-slot stream sees ~40 tests; at 4 standard errors a stream whose
#: true drift is exactly at the threshold passes one test with probability ~3e-5.
DRIFT_CONFIDENCE = 4.0
#: The share of a day by which a gap between bursts is longer than a period of whole days
#: (`day_offset`): a quarter, so that four bursts in a row fall at four hours of the day.
DAY_SHARE = 4


@dataclass(frozen=True)
class FamilyRule:
    """evidence: how many recent slots each test reads (a switch needs that many since the last one):
    consecutive even releases for the drift (lags 1 and evidence // 2), dissimilarity slots for the
    publication share. static_drift: under even spending, a drift bound (estimate +
    DRIFT_CONFIDENCE standard errors) below static_drift x the releases' error R switches to
    absorption. switch_rate +- hysteresis: under absorption a publication share at or above
    switch_rate + hysteresis switches to even spending; under distribution a share below
    switch_rate - hysteresis switches to absorption. start: the family in force at slot 1. probe: the
    share of each E_i the first burst of a run of bursts spends (the level test reads it; the rest
    of the window goes to the next slot's burst, or to even spending if the probe found the stream
    dense). level_margin: after a burst the stream is dense when its mean square per cell is above
    level_margin x period^2 x a whole-E burst's error (`dense`). day: the slots in a day (1: the slot
    is a day or longer, or does not divide one); with at least 2 slots in a day and a burst period
    of whole days, every gap between bursts is a quarter of a day longer (`day_offset`)."""

    evidence: int = 240
    switch_rate: float = 0.5
    hysteresis: float = 0.1
    static_drift: float = 0.001
    start: str = BURST
    probe: float = 0.125
    level_margin: float = 4.0
    day: int = field(default=1, metadata={
        "from_clock": True, "minimum": 1,
        "description": "slots in a day; default: from `slot` (86,400,000 ms over the slot's length when whole, "
                       "else 1); a period of whole days between bursts is lengthened by a quarter of it "
                       "(at least 1 slot), and 1 turns that off (docs/mechanisms.md section 14)"})

    def __post_init__(self) -> None:
        if isinstance(self.evidence, bool) or not isinstance(self.evidence, int):
            raise ValueError(f"evidence must be an integer number of slots, got {self.evidence!r}")
        for name in ("switch_rate", "hysteresis", "static_drift", "level_margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a number (finite), got {value!r}")
        if isinstance(self.day, bool) or not isinstance(self.day, int) or self.day < 1:
            raise ValueError(f"day must be a whole number of slots, at least 1, got {self.day!r}")
        if self.evidence < 4:
            raise ValueError(f"evidence must be at least 4 slots (two lags of the drift), got {self.evidence}")
        if not 0 <= self.hysteresis <= self.switch_rate <= 1 - self.hysteresis:
            raise ValueError(f"need 0 <= hysteresis <= switch_rate <= 1 - hysteresis, got switch_rate "
                             f"{self.switch_rate} and hysteresis {self.hysteresis}")
        if isinstance(self.probe, bool) or not isinstance(self.probe, (int, float)) or not 0 < self.probe <= 1:
            raise ValueError(f"probe must be a share of E in (0, 1], got {self.probe!r}")
        if self.static_drift < 0:
            raise ValueError(f"static_drift must be at least 0, got {self.static_drift}")
        if self.level_margin < 0:
            raise ValueError(f"level_margin must be at least 0, got {self.level_margin}")
        if self.start not in FAMILIES:
            raise ValueError(f"start must be one of {', '.join(FAMILIES)}, got {self.start!r}")


def _family(name: Any) -> str:
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}")
    return str(name)


class FamilySwitch:
    """The family in force, the slot it came into force (`since`) and the public evidence since:
    `recent`, the kinds of dissimilarity slots (absorption, distribution); `releases`, the even
    releases of consecutive slots since the last drift test (even spending)."""

    def __init__(self, rule: FamilyRule | None = None, family: str | None = None) -> None:
        self.rule = rule or FamilyRule()
        self.family = _family(family if family is not None else self.rule.start)
        self.since = 1
        self.recent: deque[bool] = deque(maxlen=self.rule.evidence)
        self.releases: deque[list[int]] = deque(maxlen=self.rule.evidence)
        #: Bursts: the next burst slot, whether it is the run's probe, the narrowest w_i charged at
        #: any burst of this run of bursts so far, and the period P it set after the last burst (the
        #: gap to the next one, and what each user's share of a burst is divided by: `burst_share`).
        self.next_burst = 1
        self.probing = self.family == BURST
        self.narrowest: int | None = None
        self.period: int | None = None

    @property
    def rate(self) -> float | None:
        """The publication share over the evidence window, once it is full."""
        if len(self.recent) < self.rule.evidence:
            return None
        return sum(self.recent) / len(self.recent)

    def drift_bound(self) -> tuple[float, float] | None:
        """(upper bound on the per-slot drift Q, the releases' error R) over the evidence window, once
        it is full. With D_k the squared differences per cell at lag k (mean 2R + k Q) and L =
        evidence // 2: Q = (mean D_L - mean D_1) / (L - 1), R = mean D_1 / 2 (at most Q/2 high), and
        the bound adds DRIFT_CONFIDENCE standard errors of the two means (taken as independent)."""
        if len(self.releases) < self.rule.evidence:
            return None
        counts = np.array(self.releases, dtype=float)
        lag = self.rule.evidence // 2
        near = ((counts[1:] - counts[:-1]) ** 2).ravel()
        far = ((counts[lag:] - counts[:-lag]) ** 2).ravel()
        estimate = (far.mean() - near.mean()) / (lag - 1)
        spread = math.sqrt(far.var(ddof=1) / far.size + near.var(ddof=1) / near.size) / (lag - 1)
        return float(estimate + DRIFT_CONFIDENCE * spread), float(near.mean() / 2)

    def observe(self, outcome: SlotOutcome) -> None:
        """A decided slot's public outcome; may switch the family for the next slot."""
        if self.family == EVEN:
            self._observe_even(outcome)
        elif self.family == BURST:
            self._observe_burst(outcome)
        else:
            self._observe_decided(outcome)

    def burst_share(self, slot: int, w: int) -> float | None:
        """Under bursts: the share of E_i a ledger of window `w` may spend at `slot`, or None when
        `slot` is not a burst. The probe's share at the run's first burst; at later ones 1 / k, k =
        ceil(w / P) the bursts P or more slots apart a window of w slots can hold, so that the
        user's window holds its whole E_i and no more (the window room caps it in any case)."""
        if not self.is_burst(slot):
            return None
        if self.probing:
            return self.rule.probe
        return 1.0 / bursts_per_window(w, self.period)

    def is_burst(self, slot: int) -> bool:
        return self.family == BURST and slot == self.next_burst

    def charge(self, w: int) -> None:
        """A ledger of window `w` is charged at a burst: the next period is at most w."""
        self.narrowest = w if self.narrowest is None else min(self.narrowest, w)

    def _observe_burst(self, outcome: SlotOutcome) -> None:
        """After a burst: the period P (the narrowest charged window so far), the next burst (right
        after the probe, which left the rest of the window, else P slots later plus `day_offset`; a
        slot without registered users moves the burst it was due to hold to the next slot); then the
        level test (`dense`) on the burst's release, scaled to a whole-E burst by the probe's share."""
        if outcome.slot != self.next_burst:
            return
        if outcome.population == 0:  # nobody registered: the burst (the probe too) moves to the next slot
            self.next_burst = outcome.slot + 1
            return
        share = self.rule.probe if self.probing else 1.0
        period = self.period = self.narrowest or 1
        if self.probing:  # the rest of the first window comes next
            self.next_burst = outcome.slot + 1
        else:
            self.next_burst = outcome.slot + period + day_offset(self.rule.day, period)
        self.probing = False
        if outcome.kind is not Kind.PUBLISH or outcome.publication is None:
            return
        if dense(np.asarray(outcome.counts, dtype=float), outcome.publication.error, share, period,
                 self.rule.level_margin):
            self.enter(EVEN, outcome.slot + 1)

    def _observe_even(self, outcome: SlotOutcome) -> None:
        """An even release; a slot without one (no users, no positive budget) breaks the run of
        consecutive releases, which starts again. Each full block of `evidence` releases is tested
        once and then dropped: disjoint blocks, so a long stream is not tested at every slot."""
        if outcome.kind is not Kind.PUBLISH:
            self.releases.clear()
            return
        self.releases.append([int(c) for c in outcome.counts])
        bound = self.drift_bound()
        if bound is None:
            return
        if bound[0] < self.rule.static_drift * bound[1]:
            self.enter(ABSORPTION, outcome.slot + 1)
        self.releases.clear()

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
            self.releases.clear()
            self.next_burst, self.probing = slot, family == BURST
            self.narrowest = self.period = None

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "since": self.since, "recent": [int(x) for x in self.recent],
                "releases": list(self.releases), "next_burst": self.next_burst, "probing": self.probing,
                "narrowest": self.narrowest, "period": self.period}

    def restore(self, obj: dict[str, Any]) -> None:
        self.family, self.since = _family(obj["family"]), int(obj["since"])
        self.recent = deque((bool(x) for x in obj["recent"]), maxlen=self.rule.evidence)
        self.releases = deque(([int(c) for c in counts] for counts in obj.get("releases", [])),
                              maxlen=self.rule.evidence)
        # a snapshot of a release without bursts: its family is never BURST, so these are unused
        self.next_burst = int(obj.get("next_burst", self.since))
        self.probing = bool(obj.get("probing", False))
        if "narrowest" in obj:
            self.narrowest, self.period = _window(obj["narrowest"]), _window(obj["period"])
        else:  # a snapshot from before the narrowest period: its period was the widest window charged
            widest = obj.get("widest", 1)
            self.narrowest = self.period = None if widest == 1 else _window(widest)


def _window(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"a burst period must be a whole number of slots, at least 1, got {value!r}")
    return value


def bursts_per_window(w: int, period: int | None) -> int:
    """How many bursts at least `period` slots apart a window of `w` slots can hold: ceil(w / period),
    1 before any period is set."""
    return 1 if period is None else -(-w // period)


def day_offset(day: int, period: int) -> int:
    """Slots added to a gap of `period` between bursts (docs/mechanisms.md section 14, "A quarter of a
    day"). With `day` slots in a day and a period of whole days every burst would fall on the same
    hour, so a stream whose counts change with the hour would only ever be seen at one: each gap is
    a quarter of a day longer (at least one slot), and four bursts in a row fall at four hours. Every
    gap is at least `period`, which is what `burst_share` divides each window by; only the public
    clock is read."""
    if day < 2 or period % day:
        return 0
    return max(1, day // DAY_SHARE)


def dense(counts: np.ndarray, error: float, share: float, period: int, margin: float) -> bool:
    """The level test after a burst at `share` of E (docs/mechanisms.md section 14, "Bursts and the
    level test"): M = mean(counts^2) - error, an unbiased estimate of the stream's mean square per
    cell, above margin x period^2 x R, R = error x share^2 the error of a whole-E burst. Even spending
    with the filter beats one burst per window of P slots only when the stream drifts per slot by
    more than about 4 R; streams drift per slot by at most about 1/P of their level (Q <= M / P^2),
    so only a stream with M > 4 P^2 R can (margin 4, the default)."""
    level = float(np.mean(counts**2)) - error
    return level > margin * period**2 * error * share**2


def window_room(ledger: FixedLedger, slot: int, budget: SlotBudget, halves: bool) -> SlotBudget:
    """`budget` capped by what the window of w slots ending at `slot` has left (docs/mechanisms.md
    section 14): eps1 + eps2 <= E - (spend1 + spend2) of the w - 1 slots before, which alone keeps
    every window within E whatever the families did; with `halves` (distribution, absorption) also
    eps1 <= E/2 - spend1 and eps2 <= E/2 - spend2 of those slots, the halves their rules assume.
    Under one family alone the caps never bind."""
    req = ledger.requirement
    spent1, spent2 = ledger.spent(slot - req.w + 1, slot - 1)
    room = req.epsilon - spent1 - spent2
    eps1 = _cap(budget.eps1, room, req.epsilon)
    eps2 = _cap(budget.eps2, room - eps1, req.epsilon)
    if halves:
        half = req.epsilon / 2
        eps1, eps2 = _cap(eps1, half - spent1, req.epsilon), _cap(eps2, half - spent2, req.epsilon)
    return replace(budget, eps1=eps1, eps2=eps2)


def _cap(value: float, room: float, epsilon: float) -> float:
    """`value`, or `room` (at least 0) when `value` is over it by more than float noise: a cap within
    RELATIVE_TOLERANCE/4 of the user's E is rounding of the window sums, not a binding cap. The margin
    is relative to E (docs/mechanisms.md section 9), so it means the same at every budget: the window
    total then stays within E (1 + RELATIVE_TOLERANCE/4), inside what the ledger admits."""
    return max(0.0, room) if value > room + epsilon * RELATIVE_TOLERANCE / 4 else value


class Adaptive:
    """The Adaptive budget policy: the budgets of the family in force (a burst's share of E_i at its
    burst slots, Uniform's E_i/w_i published at every slot, PBA or PBD; fixed requirements), capped
    by each window's room; `observe` re-decides the family after every slot."""

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
        if self.family == BURST:
            share = self.switch.burst_share(slot, ledger.requirement.w)
            if share is None:
                return SlotBudget(0.0, 0.0)
            self.switch.charge(ledger.requirement.w)
            return window_room(ledger, slot, SlotBudget(0.0, share * ledger.requirement.epsilon), halves=False)
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
        """Even spending publishes at every slot (Uniform's schedule), bursts at their burst slots
        and skip the others; absorption and distribution let the dissimilarity decide."""
        if self.family == BURST:
            return Kind.PUBLISH if self.switch.is_burst(slot) else Kind.SKIP
        return Kind.PUBLISH if self.family == EVEN else None

    def rescaled(self, slot: int) -> bool:
        """Even releases and bursts are published at OBS's threshold for the rescaled error, users
        below it sampled, the counts divided by the public kept share (section 14): no registrant's
        budget sets everybody's noise."""
        return self.family in (EVEN, BURST)

    def observe(self, outcome: SlotOutcome) -> None:
        self.switch.observe(outcome)

    def snapshot(self) -> dict[str, Any] | None:
        return self.switch.to_json()

    def restore(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.switch.restore(state)
