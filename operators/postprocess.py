"""Post-processing of the releases: a causal Kalman filter bank (docs/evaluation.md, "Beyond the
paper"; privacy by docs/mechanisms.md section 1).

Post-processing reads only what is public: each slot's released counts, its kind and the error
variance the mechanism itself announced for the publication (the OBS error err2 = threshold^2,
sections 2-5, or the noise variance of epsilon_publication when no threshold is given), plus the
registered population. It never sees true counts, so it costs no privacy budget.

Models, per cell, with R the variance of the latest publication (public):
- local level: x_t = x_{t-1} + N(0, f R) (a random walk; `levels` holds the fractions f);
- local linear trend: x_t = x_{t-1} + b_{t-1}, b_t = b_{t-1} + N(0, g R) (a smooth trend whose slope
  drifts; `trends` holds the fractions g).
A PUBLISH slot observes r_t = x_t + N(0, R_t); SKIP and NULLIFY slots repeat an old release and carry
no new observation, so the filters only predict.
Opt-in (`FilterConfig.sampling`), variants "+B": a slot's true count is the level plus its own
sampling deviation, c_t = x_t + u_t, u_t white with variance B (each of the n registered users falls
in a cell independently, so B ~ x (1 - x / n) per cell, taken from the filter's own level and the
public population, averaged over cells), and r_t = c_t + N(0, R_t). Without B an accurate but rare
publication (Sample, DPBA: R_t far below B) looks like a jump of the level and the filters follow it;
with B they average successive publications into the level, and a publishing slot's output is the
level plus the share (P + B) / (P + B + R_t) of its innovation (docs/evaluation.md, "Post-processing").
Which model and fraction fit is not known: the bank runs them all and outputs the one with the best
exponentially weighted predictive likelihood of the releases: each publication adds log S + e^2 / S
per cell to a filter's score, e = r_t - x_pred its one-step prediction error and
S = P_pred + B + R_t its predictive variance (B = 0 without the opt-in). This is the Gaussian
negative log-likelihood of the releases, i.e. a discounted maximum-likelihood choice made from
releases alone.
Pooling across cells (`FilterConfig.pooling`, on by default, with d >= 4 cells): the chosen
filter's cell estimates, which share one posterior variance V, are shrunk toward their mean by the
positive-part James-Stein factor  max(0, 1 - (d - 3) V / sum_i (x_i - mean)^2): cells that differ
from each other by much more than V keep their own estimates; cells whose differences the noise
explains (a sparse stream: most cells near zero, V far above the counts) take the pooled mean,
which is estimated from all d cells at once (variance V / d). That mean is shrunk toward zero in
turn, by max(0, 1 - 9 (V / d) / mean^2): it is kept only in part unless it lies more than three of
its standard deviations above zero, the least count, and a mean within its noise of zero is taken
for zero (on a sparse stream the first slots' mean is mostly noise). It is a function of the slot's
filter output only (no state), so it reads only public values too.
The output is clipped to [0, population] (counts are non-negative and no cell can exceed the number
of registered users). With it comes the chosen filter's posterior variance of the slot's count
(`interval`): after a publication (P + B) R_t / (P + B + R_t), between publications the predicted
P + B; a 95% interval is the output +- 1.96 of its root, clipped likewise. With pooling, the
variance is that of the pooled estimate, s V + (1 - s) V / d for the shrink factor s, and each
cell's interval is widened by the distance pooling moved that cell, so that it also holds the
filter's own estimate. It is as good as the chosen model is for the stream
(docs/formats.md, Release: `interval`).
Everything is per slot and causal; `snapshot`/`restore` carry the state for a streaming host. All
cells share R and the model, so each filter keeps one 2 x 2 covariance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pwevent.operators.noise import discrete_laplace_variance
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.spend import Kind

DEFAULT_LEVELS = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
DEFAULT_TRENDS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4)
#: z of a two-sided 95% normal interval.
Z95 = 1.959963984540054


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
            raise ValueError(
                f"a publication needs a positive error variance, got {self.variance!r} at slot {self.slot}"
            )

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

    levels: process variances of the local-level filters, as fractions of the publication variance.
    trends: slope variances of the local-linear-trend filters, as fractions of the publication variance.
    forgetting: weight of the past in the predictive score (0.999 ~ the last 1,000 publications).
    default: index (levels first, then trends) of the filter output before the first scored publication.
    sampling: each model runs without (False) and/or with (True) the slot's own sampling deviation B
    around the level (module docstring). Default: without only; (False, True) lets the likelihood
    pick, which helps rare accurate publications on long streams but not everywhere
    (docs/results/README.md, "The Log gap"), so it is opt-in.
    pooling: shrink the cells toward their mean by the James-Stein factor (module docstring); it
    applies from d = 4 cells on.
    """

    levels: tuple[float, ...] = DEFAULT_LEVELS
    trends: tuple[float, ...] = DEFAULT_TRENDS
    forgetting: float = 0.999
    default: int = 4
    sampling: tuple[bool, ...] = (False,)
    pooling: bool = True

    def __post_init__(self) -> None:
        if not self.levels + self.trends or any(not f > 0 for f in self.levels + self.trends):
            raise ValueError(f"levels and trends must be positive fractions, got {self.levels!r}, {self.trends!r}")
        if not 0 < self.forgetting <= 1:
            raise ValueError(f"forgetting must be in (0, 1], got {self.forgetting!r}")
        if not self.sampling or len(set(self.sampling)) != len(self.sampling):
            raise ValueError(f"sampling must be distinct booleans, got {self.sampling!r}")
        if not 0 <= self.default < (len(self.levels) + len(self.trends)) * len(self.sampling):
            raise ValueError(f"default must index a filter, got {self.default!r}")

    def models(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """Transition matrices (k, 2, 2), process covariances per unit R (k, 2, 2), whether each filter
        models B (k,) and names: levels, then trends, once per `sampling` value."""
        transitions, processes, own, names = [], [], [], []
        for with_b in self.sampling:
            suffix = " +B" if with_b else ""
            for f in self.levels:
                transitions.append([[1.0, 0.0], [0.0, 0.0]])
                processes.append([[f, 0.0], [0.0, 0.0]])
                names.append(f"level {f:g}{suffix}")
            for g in self.trends:
                transitions.append([[1.0, 1.0], [0.0, 1.0]])
                processes.append([[0.0, 0.0], [0.0, g]])
                names.append(f"trend {g:g}{suffix}")
            own += [with_b] * (len(self.levels) + len(self.trends))
        return np.array(transitions), np.array(processes), np.array(own), names


@dataclass
class _BankState:
    estimate: np.ndarray  # (filters, d, 2): level and slope per cell
    covariance: np.ndarray  # (filters, 2, 2), the same for every cell
    score: np.ndarray  # (filters,) exponentially weighted predictive negative log-likelihood
    noise: float | None = None  # R of the latest publication
    scored: int = 0


class KalmanSmoother:
    """Per-slot, causal smoothing of released histograms: `step(release) -> smoothed counts`."""

    def __init__(self, d: int, config: FilterConfig | None = None) -> None:
        self.d = d
        self.config = config or FilterConfig()
        self._transition, self._process, self._own, self._names = self.config.models()
        k = len(self._names)
        self._state = _BankState(np.zeros((k, d, 2)), np.full((k, 2, 2), np.nan), np.zeros(k))
        self._variance = np.full(k, np.nan)  # each filter's posterior variance of the last output
        self._pooled: tuple[float, np.ndarray] | None = None  # the last output's (variance, widening per cell)

    @property
    def chosen(self) -> str:
        """The filter currently output, e.g. 'level 0.01' or 'trend 1e-06'."""
        return self._names[self._choice()]

    def _choice(self) -> int:
        s = self._state
        return self.config.default if s.scored == 0 else int(np.argmin(s.score))

    def step(self, release: PublicRelease) -> np.ndarray:
        """Fold one slot's release in and return the smoothed histogram of that slot."""
        s = self._state
        counts = np.asarray(release.counts, dtype=float)
        if counts.shape != (self.d,):
            raise ValueError(f"release at slot {release.slot} has {counts.shape} counts, expected ({self.d},)")
        if np.isnan(s.covariance).all():
            # Prior (public scale only): level 0 with sd one cell's share of the population; slope 0
            # with sd 1% of that share per slot.
            scale = max(release.population / self.d, 1.0) ** 2
            s.covariance[:] = np.diag([scale, scale * 1e-4])
        if s.noise is not None:
            f = self._transition
            s.estimate = np.einsum("kij,kcj->kci", f, s.estimate)
            s.covariance = f @ s.covariance @ f.transpose(0, 2, 1) + self._process * s.noise
        upper = max(float(release.population), 0.0)
        output = s.estimate[:, :, 0]  # (k, d): the predicted level, what a slot without publication gets
        own = self._sampling_variance(output, upper)  # (k,) B of each filter
        self._variance = s.covariance[:, 0, 0] + own  # of c_t = level + sampling deviation, predicted
        if release.kind is Kind.PUBLISH:
            assert release.variance is not None
            predicted = output
            spread = s.covariance[:, 0, 0] + own + release.variance  # predictive variance of the release
            self._variance = self._variance * release.variance / spread  # after observing r_t
            if s.noise is not None:
                error = np.mean((counts[None, :] - predicted) ** 2, axis=1)
                usable = np.isfinite(spread) & (spread > 0)  # else the filter drops out of the choice
                safe = np.where(usable, spread, 1.0)
                s.score = self.config.forgetting * s.score + np.where(usable, np.log(safe) + error / safe, np.inf)
                s.scored += 1
            innovation = counts[None, :] - predicted
            output = predicted + ((s.covariance[:, 0, 0] + own) / spread)[:, None] * innovation  # E[c_t | r_1..t]
            gain = s.covariance[:, :, 0] / spread[:, None]  # (k, 2)
            s.estimate = s.estimate + gain[:, None, :] * innovation[:, :, None]
            # Joseph form, (I - K H) P (I - K H)' + K R K' (H = [1, 0], R = B + R_t): it keeps P
            # symmetric and positive where P - K H P, after long runs without publications, did not.
            keep = np.eye(2)[None] - gain[:, :, None] * np.array([1.0, 0.0])[None, None, :]
            s.covariance = (keep @ s.covariance @ keep.transpose(0, 2, 1)
                            + (own + release.variance)[:, None, None] * gain[:, :, None] * gain[:, None, :])
            s.noise = release.variance
        chosen = self._choice()
        return np.clip(self._pool(output[chosen], float(self._variance[chosen])), 0.0, upper)

    def _pool(self, level: np.ndarray, variance: float) -> np.ndarray:
        """The cells shrunk toward their mean by the positive-part James-Stein factor (module
        docstring); sets the pooled variance and each cell's widening for `interval`."""
        self._pooled = None
        if not self.config.pooling or self.d < 4 or not variance > 0:
            return level
        mean = float(np.mean(level))
        spread = float(np.sum((level - mean) ** 2))
        shrink = max(0.0, 1.0 - (self.d - 3) * variance / spread) if spread > 0 else 0.0
        toward_zero = max(0.0, 1.0 - 9.0 * variance / self.d / mean**2) if mean > 0 else 0.0
        pooled = toward_zero * mean + shrink * (level - mean)
        self._pooled = (shrink * variance + (1.0 - shrink) * variance / self.d, np.abs(level - pooled))
        return pooled

    def interval(self, smoothed: np.ndarray, population: int, z: float = Z95) -> np.ndarray:
        """(d, 2): per cell, the last output `smoothed` +- z posterior standard deviations of the chosen
        filter, clipped to [0, population]: a nominal 95% interval by default (module docstring)."""
        if self._pooled is None:
            half: float | np.ndarray = z * float(np.sqrt(max(self._variance[self._choice()], 0.0)))
        else:
            variance, moved = self._pooled
            half = z * float(np.sqrt(variance)) + moved
        upper = max(float(population), 0.0)
        return np.clip(np.stack([smoothed - half, smoothed + half], axis=1), 0.0, upper)

    def _sampling_variance(self, level: np.ndarray, population: float) -> np.ndarray:
        """B per filter: mean over cells of x (1 - x / n), x the level clipped to [0, n]; 0 for the
        filters without B."""
        if population <= 0:
            return np.zeros(level.shape[0])
        x = np.clip(level, 0.0, population)
        return np.where(self._own, np.mean(x * (1.0 - x / population), axis=1), 0.0)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain JSON-able values."""
        s = self._state
        return {
            "estimate": s.estimate.tolist(),
            "covariance": None if np.isnan(s.covariance).all() else s.covariance.tolist(),
            "score": s.score.tolist(),
            "noise": s.noise,
            "scored": s.scored,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continue from a `snapshot` taken with the same d and configuration."""
        k = len(self._names)
        estimate = np.asarray(snapshot["estimate"], dtype=float)
        if estimate.shape != (k, self.d, 2):
            raise ValueError(f"snapshot estimate has shape {estimate.shape}, expected {(k, self.d, 2)}")
        covariance = (
            np.full((k, 2, 2), np.nan) if snapshot["covariance"] is None
            else np.asarray(snapshot["covariance"], dtype=float)
        )
        self._state = _BankState(
            estimate, covariance, np.asarray(snapshot["score"], dtype=float), snapshot["noise"], int(snapshot["scored"])
        )
