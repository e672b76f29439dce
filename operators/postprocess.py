"""Post-processing of the releases: a causal Kalman filter bank (docs/evaluation.md, "Beyond the
paper"; privacy by docs/mechanisms.md section 1).

Post-processing reads only what is public: each slot's released counts, its kind, the error
variance the mechanism itself announced for the publication (the OBS error err2 = threshold^2,
sections 2-5, or the noise variance of epsilon_publication when no threshold is given), the
publication's epsilon and, for a rescaled release, its kept share s (section 14, the record's
`kept_share`), plus the registered population. It never sees true counts, so it costs no privacy
budget.

Observation variance per cell: OBS's error is population-wide, (sum over ALL users below the
threshold of p (1 - p) [+ their bias^2] + the noise variance) / s^2 (s = 1 when not rescaled),
but a cell's own sampling variance is only its users' share of that sum. So a publication's R_c,
per cell c, is the noise part N = discrete_laplace_variance(epsilon) / s^2 plus the rest of the
announced error split by the cells' shares w_c of the release's non-negative counts (uniform when
none is positive): R_c = N + max(0, err2 - N) w_c (`PublicRelease.cell_variances`; a release
without epsilon gives every cell err2). A rescaled publication of release version 4 on announces the
mean cell's error instead (docs/mechanisms.md section 14, "The mean cell"): its sampling part is a
d-th of the sum's, so R_c = N + d max(0, err2 - N) w_c. The job's outcome and the release record give the same R_c,
so anyone can recompute `smoothed` from the records alone.

Models, per cell, with R_c of the latest publication:
- local level: x_t = x_{t-1} + N(0, f R_c) (a random walk; `levels` holds the fractions f);
- local linear trend: x_t = x_{t-1} + b_{t-1}, b_t = b_{t-1} + N(0, g R_c) (a smooth trend whose
  slope drifts; `trends` holds the fractions g).
A PUBLISH slot observes r_t = x_t + N(0, R_c); SKIP and NULLIFY slots repeat an old release and carry
no new observation, so the filters only predict. Each filter keeps one 2 x 2 covariance per cell.
Opt-in (`FilterConfig.sampling`), variants "+B": a slot's true count is the level plus its own
sampling deviation, c_t = x_t + u_t, u_t white with variance B_c (each of the n registered users
falls in a cell independently, so B_c = x_c (1 - x_c / n) per cell, from the filter's own level and
the public population), and r_t = c_t + N(0, R_c). Without B an accurate but rare publication
(Sample, DPBA: R_c far below B) looks like a jump of the level and the filters follow it; with B they
average successive publications into the level (docs/evaluation.md, "Post-processing").
Which model and fraction fit is not known: the bank runs them all and outputs the one with the best
exponentially weighted predictive likelihood of the releases: each publication adds the mean over
cells of log S_c + e_c^2 / S_c to a filter's score, e_c = r_t - x_pred its one-step prediction error
and S_c = P_c + B_c + R_c its predictive variance (B = 0 without the opt-in). This is the Gaussian
negative log-likelihood of the releases, i.e. a discounted maximum-likelihood choice made from
releases alone.
Excess over the model: the true count also moves around any smooth level (the slot's own sampling,
~ x (1 - x / n) per cell), which the filters without B leave out. Each filter keeps per cell
U_c = max(0, discounted mean of e_c^2 - S_c), with the score's forgetting: what its squared
prediction errors show beyond its predictive variance. It widens the interval only; estimates and
scores are the model's.
Pooling across cells (`FilterConfig.pooling`, on by default, with d >= 4 cells): the chosen
filter's cell estimates are shrunk toward their mean by the positive-part James-Stein factor
s = max(0, 1 - (d - 3) V / sum_i (x_i - mean)^2), V the mean over cells of the filter's model
variance of its output (below, without U): cells that differ from each other by much more than V
keep their own estimates; cells whose differences the noise explains (a sparse stream: most cells
near zero, V far above the counts) take the pooled mean, which is estimated from all d cells at once
(variance V / d). That mean is shrunk toward zero in turn, by max(0, 1 - 9 (V / d) / mean^2): it is
kept only in part unless it lies more than three of its standard deviations above zero, the least
count, and a mean within its noise of zero is taken for zero (on a sparse stream the first slots'
mean is mostly noise). It is a function of the slot's filter output only (no state), so it reads
only public values too.
The output is clipped to [0, population] (counts are non-negative and no cell can exceed the number
of registered users). With it comes the chosen filter's variance of the slot's count per cell
(`interval`): after a publication, with g = (P_c + B_c) / S_c the innovation's share in the output,
(1 - g)^2 (P_c + B_c + U_c) + g^2 R_c (the model's part, (P_c + B_c) R_c / S_c, plus (1 - g)^2 U_c);
between publications the predicted P_c + B_c + U_c; a 95% interval is the output +- 1.96 of its
root, clipped likewise. With pooling, the model's part M_c of a cell's variance is replaced by that
of the pooled estimate, s M_c + (1 - s) mean(M) / d, while the cell's own excess part (the U_c term
above) stays whole: pooling estimates the level from all cells, not a slot's scatter around it; and
each cell's interval is widened by the distance pooling moved that cell, so that it also holds the
filter's own estimate. It is as good as the chosen model
and U are for the stream (docs/formats.md, Release: `interval`).
Everything is per slot and causal; `snapshot`/`restore` carry the state (a snapshot of the
shared-R bank, one 2 x 2 covariance per filter and no excess, restores too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pwevent.operators.noise import discrete_laplace_variance
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.spend import Kind

#: The release version from which a rescaled publication's threshold is the mean cell's error, not
#: the whole population's (docs/formats.md, Release); a test compares it with the release schema's.
MEAN_CELL_SINCE = 4
DEFAULT_LEVELS = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
DEFAULT_TRENDS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4)
#: z of a two-sided 95% normal interval.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class PublicRelease:
    """The public part of one slot's release that post-processing may read.

    variance: the error the mechanism announced for the publication (OBS's, on the counts' scale);
    epsilon and kept_share: the publication's budget and, for a rescaled release, the kept share its
    counts were divided by (None: not rescaled), from which `cell_variances` splits the variance
    into its noise and sampling parts (module docstring). Without epsilon every cell gets `variance`.
    mean_cell: the variance is the mean cell's (a rescaled publication from release version 4 on),
    not the whole population's.
    """

    slot: int
    kind: Kind
    counts: np.ndarray
    population: int
    variance: float | None
    epsilon: float | None = None
    kept_share: float | None = None
    mean_cell: bool = False

    def __post_init__(self) -> None:
        if self.kind is Kind.PUBLISH and not (self.variance is not None and self.variance > 0):
            raise ValueError(
                f"a publication needs a positive error variance, got {self.variance!r} at slot {self.slot}"
            )
        if self.kept_share is not None and not 0 < self.kept_share <= 1 + 1e-12:
            raise ValueError(f"a kept share must be in (0, 1], got {self.kept_share!r} at slot {self.slot}")

    @classmethod
    def from_outcome(cls, outcome: SlotOutcome) -> PublicRelease:
        """From the job's own outcome; the variance is its public threshold squared, as `from_record`
        reads it, so that both give the same per-cell variances."""
        pub = outcome.publication
        threshold = outcome.threshold
        share = pub.kept_share if pub else None
        return cls(outcome.slot, outcome.kind, np.asarray(outcome.counts), outcome.population,
                   threshold**2 if threshold is not None else None, pub.epsilon if pub else None,
                   share, share is not None)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PublicRelease:
        """From a release line/message (docs/schemas/release.schema.json); a record of version 1 or 2
        has no `kept_share` and reads as not rescaled; a rescaled one of version 3 announces the
        population's error, of version 4 on the mean cell's."""
        kind = Kind(record["kind"])
        variance: float | None = None
        epsilon = record.get("epsilon_publication")
        if record.get("threshold") is not None:
            variance = float(record["threshold"]) ** 2
        elif epsilon is not None:
            variance = float(discrete_laplace_variance(float(epsilon)))
        counts = np.asarray(record["counts"], dtype=float)
        share = record.get("kept_share")
        version = record.get("schema_version")
        mean_cell = share is not None and isinstance(version, int) and version >= MEAN_CELL_SINCE
        return cls(int(record["slot"]), kind, counts, int(record["population"]), variance,
                   float(epsilon) if epsilon is not None else None, float(share) if share is not None else None,
                   mean_cell)

    def cell_variances(self) -> np.ndarray:
        """R_c per cell of a publication: the noise part, discrete_laplace_variance(epsilon) / s^2 (s the
        kept share, 1 when not rescaled), in every cell, plus the rest of the announced variance (the
        sampling part, summed over all users) split by the cells' shares w_c of the non-negative
        released counts (uniform when none is positive): a cell's sampling variance is its users'
        share of the sum (module docstring); when the variance is the mean cell's (`mean_cell`), its
        sampling part is a d-th of that sum, which the cells hold d times."""
        assert self.variance is not None
        d = len(self.counts)
        if self.epsilon is None:
            return np.full(d, self.variance)
        share = 1.0 if self.kept_share is None else self.kept_share
        noise = float(discrete_laplace_variance(self.epsilon)) / share**2
        positive = np.maximum(np.asarray(self.counts, dtype=float), 0.0)
        total = float(positive.sum())
        weights = positive / total if total > 0 else np.full(d, 1.0 / d)
        sampling = max(self.variance - noise, 0.0) * (d if self.mean_cell else 1)
        return noise + sampling * weights


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
    covariance: np.ndarray  # (filters, d, 2, 2): per cell, as each cell has its own R
    score: np.ndarray  # (filters,) exponentially weighted predictive negative log-likelihood
    excess: np.ndarray  # (filters, d) discounted sum of e^2 - S per cell
    weight: float = 0.0  # the discounted number of scored publications, the excess's denominator
    noise: np.ndarray | None = None  # (d,) R_c of the latest publication
    scored: int = 0


class KalmanSmoother:
    """Per-slot, causal smoothing of released histograms: `step(release) -> smoothed counts`."""

    def __init__(self, d: int, config: FilterConfig | None = None) -> None:
        self.d = d
        self.config = config or FilterConfig()
        self._transition, self._process, self._own, self._names = self.config.models()
        k = len(self._names)
        self._state = _BankState(np.zeros((k, d, 2)), np.full((k, d, 2, 2), np.nan), np.zeros(k), np.zeros((k, d)))
        self._variance = np.full((k, d), np.nan)  # each filter's variance of the last output, per cell
        self._pooled: tuple[np.ndarray, np.ndarray] | None = None  # the last output's (variance, widening) per cell

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
            s.covariance = (f[:, None] @ s.covariance @ f.transpose(0, 2, 1)[:, None]
                            + self._process[:, None] * s.noise[None, :, None, None])
        upper = max(float(release.population), 0.0)
        output = s.estimate[:, :, 0]  # (k, d): the predicted level, what a slot without publication gets
        model = s.covariance[:, :, 0, 0] + self._sampling_variance(output, upper)  # P + B of c_t, predicted
        excess = np.maximum(s.excess / s.weight, 0.0) if s.weight > 0 else np.zeros_like(model)  # U_c
        posterior = model  # of the output under the model; between publications the prediction's
        self._variance = model + excess
        if release.kind is Kind.PUBLISH:
            noise = release.cell_variances()  # (d,) R_c
            predicted = output
            spread = model + noise[None, :]  # S: predictive variance of the release, per cell
            innovation = counts[None, :] - predicted
            if s.noise is not None:
                error = innovation**2
                usable = np.all(np.isfinite(spread) & (spread > 0), axis=1)  # else the filter drops out
                safe = np.where(usable[:, None], spread, 1.0)
                cells = np.mean(np.log(safe) + error / safe, axis=1)
                s.score = self.config.forgetting * s.score + np.where(usable, cells, np.inf)
                s.excess = self.config.forgetting * s.excess + np.where(usable[:, None], error - safe, 0.0)
                s.weight = self.config.forgetting * s.weight + 1.0
                s.scored += 1
            share = model / spread  # g: the innovation's share in the output, E[c_t | r_1..t]
            output = predicted + share * innovation
            posterior = (1.0 - share) ** 2 * model + share**2 * noise[None, :]
            self._variance = posterior + (1.0 - share) ** 2 * excess
            gain = s.covariance[:, :, :, 0] / spread[:, :, None]  # (k, d, 2)
            s.estimate = s.estimate + gain * innovation[:, :, None]
            # Joseph form, (I - K H) P (I - K H)' + K R K' (H = [1, 0], R = B + R_c): it keeps P
            # symmetric and positive where P - K H P, after long runs without publications, did not.
            keep = np.eye(2)[None, None] - gain[:, :, :, None] * np.array([1.0, 0.0])[None, None, None, :]
            observed = spread - s.covariance[:, :, 0, 0]  # B + R_c
            s.covariance = (keep @ s.covariance @ keep.transpose(0, 1, 3, 2)
                            + observed[:, :, None, None] * gain[:, :, :, None] * gain[:, :, None, :])
            s.noise = noise
        chosen = self._choice()
        return np.clip(self._pool(output[chosen], posterior[chosen], self._variance[chosen]), 0.0, upper)

    def _pool(self, level: np.ndarray, model: np.ndarray, variance: np.ndarray) -> np.ndarray:
        """The cells shrunk toward their mean by the positive-part James-Stein factor (module
        docstring), from the mean over cells of the chosen filter's model variance `model`; sets the
        pooled interval variance (from each cell's `variance`) and each cell's widening for `interval`."""
        self._pooled = None
        mean_model = float(np.mean(model))
        if not self.config.pooling or self.d < 4 or not mean_model > 0:
            return level
        mean = float(np.mean(level))
        spread = float(np.sum((level - mean) ** 2))
        shrink = max(0.0, 1.0 - (self.d - 3) * mean_model / spread) if spread > 0 else 0.0
        toward_zero = max(0.0, 1.0 - 9.0 * mean_model / self.d / mean**2) if mean > 0 else 0.0
        pooled = toward_zero * mean + shrink * (level - mean)
        # pooling estimates the level from all cells; the count's own excess around it (U) stays per cell
        pooled_model = shrink * model + (1.0 - shrink) * mean_model / self.d
        self._pooled = (pooled_model + (variance - model), np.abs(level - pooled))
        return pooled

    def interval(self, smoothed: np.ndarray, population: int, z: float = Z95) -> np.ndarray:
        """(d, 2): per cell, the last output `smoothed` +- z standard deviations of the chosen filter's
        interval variance, clipped to [0, population]: a nominal 95% interval by default (module
        docstring)."""
        if self._pooled is None:
            half = z * np.sqrt(np.maximum(self._variance[self._choice()], 0.0))
        else:
            variance, moved = self._pooled
            half = z * np.sqrt(np.maximum(variance, 0.0)) + moved
        upper = max(float(population), 0.0)
        return np.clip(np.stack([smoothed - half, smoothed + half], axis=1), 0.0, upper)

    def _sampling_variance(self, level: np.ndarray, population: float) -> np.ndarray:
        """B per filter and cell: x (1 - x / n), x the cell's level clipped to [0, n]; 0 for the
        filters without B."""
        if population <= 0:
            return np.zeros_like(level)
        x = np.clip(level, 0.0, population)
        return np.where(self._own[:, None], x * (1.0 - x / population), 0.0)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain JSON-able values."""
        s = self._state
        return {
            "estimate": s.estimate.tolist(),
            "covariance": None if np.isnan(s.covariance).all() else s.covariance.tolist(),
            "score": s.score.tolist(),
            "excess": s.excess.tolist(),
            "weight": s.weight,
            "noise": None if s.noise is None else s.noise.tolist(),
            "scored": s.scored,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continue from a `snapshot` taken with the same d and configuration. A snapshot of the shared-R
        bank (covariance (filters, 2, 2), one R, no excess) restores too: its covariance and R hold for
        every cell, and the excess starts afresh."""
        k = len(self._names)
        estimate = np.asarray(snapshot["estimate"], dtype=float)
        if estimate.shape != (k, self.d, 2):
            raise ValueError(f"snapshot estimate has shape {estimate.shape}, expected {(k, self.d, 2)}")
        covariance = np.full((k, self.d, 2, 2), np.nan)
        if snapshot["covariance"] is not None:
            stored = np.asarray(snapshot["covariance"], dtype=float)
            if stored.shape not in ((k, 2, 2), (k, self.d, 2, 2)):
                raise ValueError(f"snapshot covariance has shape {stored.shape}, expected {(k, self.d, 2, 2)} "
                                 f"or, shared by the cells, {(k, 2, 2)}")
            covariance[:] = stored[:, None] if stored.shape == (k, 2, 2) else stored
        noise = None if snapshot["noise"] is None else np.broadcast_to(
            np.asarray(snapshot["noise"], dtype=float), (self.d,)).copy()
        excess = np.asarray(snapshot.get("excess", np.zeros((k, self.d))), dtype=float)
        self._state = _BankState(estimate, covariance, np.asarray(snapshot["score"], dtype=float), excess,
                                 float(snapshot.get("weight", 0.0)), noise, int(snapshot["scored"]))
