"""Adaptive choices of mechanism from releases only (docs/evaluation.md, "Beyond the paper"; privacy
by docs/mechanisms.md section 1): distribution (PBD) vs absorption (PBA), and even (Uniform) vs burst
(Sample) spending. Both read only public decisions, released counts and announced variances.

Distribution vs absorption:

A pilot runs the distribution family. Its decisions are public (every release carries its kind), and
the share of PUBLISH slots says how often the stream moved by more than the announced error: a stream
that rarely needs a fresh publication wastes the distribution family's halving and suits absorption,
which turns every skipped slot's budget into a larger later one; a stream that needs one most slots
suits distribution, since absorption would nullify the slots after each large publication.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pwevent.state.spend import Kind

DISTRIBUTION = "PBD"
ABSORPTION = "PBA"
EVEN = "Uniform"
BURST = "Sample"


@dataclass(frozen=True)
class FamilyRule:
    """pilot: slots run with the distribution family; switch_rate: the publication share at or above
    which distribution is kept. The switch waits `gap` = the longest registered window (public), so
    that no user's window holds spend of both mechanisms (sequential composition within a window)."""

    pilot: int = 240
    switch_rate: float = 0.5

    def __post_init__(self) -> None:
        if self.pilot < 1:
            raise ValueError(f"pilot must be at least one slot, got {self.pilot}")
        if not 0 <= self.switch_rate <= 1:
            raise ValueError(f"switch_rate must be in [0, 1], got {self.switch_rate}")


class FamilySelector:
    """Counts the pilot's public decisions; `choice()` names the family for the rest of the stream."""

    def __init__(self, rule: FamilyRule | None = None) -> None:
        self.rule = rule or FamilyRule()
        self.seen = 0
        self.published = 0

    def observe(self, kind: Kind) -> None:
        """One pilot slot's public decision."""
        self.seen += 1
        self.published += kind is Kind.PUBLISH

    @property
    def done(self) -> bool:
        return self.seen >= self.rule.pilot

    @property
    def rate(self) -> float:
        return self.published / self.seen if self.seen else 0.0

    def choice(self) -> str:
        return DISTRIBUTION if self.rate >= self.rule.switch_rate else ABSORPTION


@dataclass(frozen=True)
class SpendingRule:
    """Even spending (Uniform: E/w every slot) or bursts (Sample: E every w slots), chosen once from
    the first two Sample publications (slots 1 and w+1).

    With the stream drifting by about Q per slot (random-walk scale), Sample's stale releases cost
    about w Q / 2 per cell on average, and a filtered Uniform about sqrt(Q R_u), R_u the public noise
    variance of one Uniform slot: even spending wins when Q > margin * 4 R_u / w^2 (margin 1 by
    default). Q is estimated from releases only: from two Sample publications w slots apart,
    E[(r2 - r1)^2] ~ 2 R_s + w Q per cell (R_s their announced variance).
    """

    margin: float = 1.0

    def __post_init__(self) -> None:
        if not self.margin > 0:
            raise ValueError(f"margin must be positive, got {self.margin}")

    @staticmethod
    def drift(first: np.ndarray, second: np.ndarray, noise: float, w: int) -> float:
        """Per-slot drift variance Q from two estimates w slots apart whose difference carries
        `noise` of variance per cell (clipped at 0)."""
        diff = np.asarray(second, dtype=float) - np.asarray(first, dtype=float)
        return max(float(np.mean(diff**2)) - noise, 0.0) / w

    def choose(self, drift: float, uniform_variance: float, w: int) -> str:
        """'Uniform' when a drift Q makes even spending cheaper, else 'Sample'."""
        return EVEN if drift > self.margin * 4.0 * uniform_variance / w**2 else BURST

    def from_publications(
        self, first: np.ndarray, second: np.ndarray, sample_variance: float, uniform_variance: float, w: int
    ) -> str:
        """The choice from two consecutive Sample publications (w slots apart)."""
        return self.choose(self.drift(first, second, 2.0 * sample_variance, w), uniform_variance, w)
