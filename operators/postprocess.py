"""Post-processing of the releases: a causal local-level Kalman filter bank (evaluation.md, "Beyond
the paper"; privacy by mechanisms.md section 1).

Post-processing reads only what is public: each slot's released counts, its kind and the error
variance the mechanism itself announced for the publication (the OBS error err2 = threshold^2,
sections 2-5, or the noise variance of epsilon_publication when no threshold is given), plus the
registered population. It never sees true counts, so it costs no privacy budget.

Model, per cell j: the true count follows a random walk x_t = x_{t-1} + N(0, Q); a PUBLISH slot
observes r_t = x_t + N(0, R_t) with R_t the announced variance; SKIP and NULLIFY slots repeat an
old release and carry no new observation, so the filter only predicts. Q is not known: the bank runs
one filter per fraction f of the public noise variance (Q = f R, R the variance of the latest
publication) and outputs the filter whose one-step predictions of the releases have the smallest
exponentially weighted squared error. Since r_t - x_pred = (x_t - x_pred) + noise and the noise term
is common to every filter, this ranks the filters by how well they track the truth, from releases only.
The output is clipped to [0, population] (counts are non-negative and no cell can exceed the number
of registered users). Everything is per slot and causal; `snapshot`/`restore` carry the state for a
streaming host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pwevent.operators.noise import discrete_laplace_variance
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.spend import Kind

DEFAULT_FRACTIONS = (1e-4, 1e-3, 1e-2, 1e-1)


@dataclass(frozen=True)
class PublicRelease:
    """The public part of one slot's release that post-processing may read."""

    slot: int
    kind: Kind
    counts: np.ndarray
    population: int
    variance: float | None

    def __post_init__(self) -> None:
        if self.kind is Kind.PUBLISH and not (self.variance is not None and self.variance > 0):
            raise ValueError(f"a publication needs a positive error variance, got {self.variance!r} at slot {self.slot}")

    @classmethod
    def from_outcome(cls, outcome: SlotOutcome) -> PublicRelease:
        variance = outcome.publication.error if outcome.publication else None
        return cls(outcome.slot, outcome.kind, np.asarray(outcome.counts), outcome.population, variance)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PublicRelease:
        """From a release line/message (docs/schemas/release.schema.json)."""
        kind = Kind(record["kind"])
        variance: float | None = None
        if record.get("threshold") is not None:
            variance = float(record["threshold"]) ** 2
        elif record.get("epsilon_publication") is not None:
            variance = float(discrete_laplace_variance(float(record["epsilon_publication"])))
        counts = np.asarray(record["counts"], dtype=float)
        return cls(int(record["slot"]), kind, counts, int(record["population"]), variance)


@dataclass(frozen=True)
class FilterConfig:
    """Parameters of the filter bank; all public, none estimated from true counts.

    fractions: candidate process variances as fractions of the publication variance.
    forgetting: weight of the past in the predictive-error score (0.999 ~ the last 1,000 publications).
    default: index of the fraction used until the first scored publication.
    """

    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    forgetting: float = 0.999
    default: int = 2

    def __post_init__(self) -> None:
        if not self.fractions or any(not f > 0 for f in self.fractions):
            raise ValueError(f"fractions must be positive, got {self.fractions!r}")
        if not 0 < self.forgetting <= 1:
            raise ValueError(f"forgetting must be in (0, 1], got {self.forgetting!r}")
        if not 0 <= self.default < len(self.fractions):
            raise ValueError(f"default must index fractions, got {self.default!r}")


@dataclass
class _BankState:
    estimate: np.ndarray  # (filters, d)
    variance: np.ndarray  # (filters,) the posterior variance, the same for every cell
    score: np.ndarray  # (filters,) exponentially weighted squared one-step prediction error
    noise: float | None = None  # R of the latest publication
    scored: int = 0


class KalmanSmoother:
    """Per-slot, causal smoothing of released histograms: `step(release) -> smoothed counts`."""

    def __init__(self, d: int, config: FilterConfig | None = None) -> None:
        self.d = d
        self.config = config or FilterConfig()
        k = len(self.config.fractions)
        self._fractions = np.asarray(self.config.fractions, dtype=float)
        self._state = _BankState(np.zeros((k, d)), np.full(k, np.nan), np.zeros(k))

    @property
    def chosen(self) -> float:
        """The process-variance fraction currently selected."""
        return float(self._fractions[self._choice()])

    def _choice(self) -> int:
        s = self._state
        return self.config.default if s.scored == 0 else int(np.argmin(s.score))

    def step(self, release: PublicRelease) -> np.ndarray:
        """Fold one slot's release in and return the smoothed histogram of that slot."""
        s = self._state
        counts = np.asarray(release.counts, dtype=float)
        if counts.shape != (self.d,):
            raise ValueError(f"release at slot {release.slot} has {counts.shape} counts, expected ({self.d},)")
        if np.isnan(s.variance).all():
            # Prior: mean 0 and the scale of one cell's share of the population (public).
            s.variance[:] = max(release.population / self.d, 1.0) ** 2
        if s.noise is not None:
            s.variance = s.variance + self._fractions * s.noise
        if release.kind is Kind.PUBLISH:
            assert release.variance is not None
            if s.noise is not None:
                error = np.mean((counts[None, :] - s.estimate) ** 2, axis=1)
                s.score = self.config.forgetting * s.score + error
                s.scored += 1
            gain = s.variance / (s.variance + release.variance)
            s.estimate = s.estimate + gain[:, None] * (counts[None, :] - s.estimate)
            s.variance = (1.0 - gain) * s.variance
            s.noise = release.variance
        upper = max(float(release.population), 0.0)
        return np.clip(s.estimate[self._choice()], 0.0, upper)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain JSON-able values."""
        s = self._state
        return {
            "estimate": s.estimate.tolist(),
            "variance": [None if np.isnan(v) else float(v) for v in s.variance],
            "score": s.score.tolist(),
            "noise": s.noise,
            "scored": s.scored,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continue from a `snapshot` taken with the same d and configuration."""
        estimate = np.asarray(snapshot["estimate"], dtype=float)
        if estimate.shape != (len(self._fractions), self.d):
            raise ValueError(f"snapshot estimate has shape {estimate.shape}, expected {(len(self._fractions), self.d)}")
        variance = np.array([np.nan if v is None else v for v in snapshot["variance"]], dtype=float)
        self._state = _BankState(
            estimate, variance, np.asarray(snapshot["score"], dtype=float), snapshot["noise"], int(snapshot["scored"])
        )
