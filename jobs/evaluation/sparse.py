"""Sparse workloads: short streams over many categories of heavy-tailed popularity, with users present
on a minority of slots (docs/evaluation.md, "Sparse workloads").

Each workload is a `SparseShape`; `SparseStream(shape, seed)` draws one stream of it (the data seed is
the repetition index, as for the synthetic streams). The generator, per repetition:

- **Popularity.** Category j (rank j = 1..d after a random permutation) has base weight
  1 / (j + q)^s (Zipf-Mandelbrot: `zipf` = s, `zipf_offset` = q), a heavy tail.
- **Movement.** Each category's log weight moves by a Gaussian random walk (`drift` per slot), a
  weekly profile (daily slots: a per-category factor exp(`weekly` z_j) on weekends, z_j standard
  normal) or a daily one (hourly slots: per category a phase of a sine of amplitude `weekly` over 24
  slots), and short bursts (each slot starts one with probability `bursts`, in a random category
  of the upper half, multiplying its weight by 1 + 4 u (u uniform) for 1-7 slots).
- **Presence.** User i is present in a slot with probability r_i, drawn from Beta(1, b) with b
  chosen so that the median r_i is `presence` (a few regulars, many occasional users); hourly
  shapes multiply it by a day profile (night hours at 0.1, evenings at 1.6, mean 1).
- **Values.** Each user has a home category drawn by the base popularity; a present user reports it
  with probability `home`, otherwise a category drawn by the slot's popularity.

Every user is registered from slot 1 (the population is public, the presence is not), as for
Foursquare. The windows users declare are the shape's own (`windows`: daily slots 7, 14, 30;
hourly ones 24, 72, 168), the budgets E_i from {E, E + 0.2, ..., 1.0} as elsewhere
(jobs/common/synthetic.py, `RequirementDraw`).

`held_out` marks the workloads that no tuning of the default may read (docs/evaluation.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pwevent.jobs.evaluation.datasets import SlotValues

DAILY_WINDOWS = (7, 14, 30)
HOURLY_WINDOWS = (24, 72, 168)
#: Hourly shapes: presence multiplier by hour of day (mean 1): quiet nights, busy evenings.
DAY_PROFILE = np.array([0.1] * 7 + [0.6, 1.0, 1.0, 1.1, 1.3, 1.4, 1.2, 1.1, 1.1, 1.3, 1.5, 1.6, 1.6, 1.5, 1.3,
                                                                        1.0, 0.6])
DAY_PROFILE = DAY_PROFILE / DAY_PROFILE.mean()


@dataclass(frozen=True)
class SparseShape:
    """One sparse workload's parameters (module docstring)."""

    name: str
    slots: int
    cells: int
    users: int
    presence: float  # median share of slots a user is present in
    hourly: bool = False
    zipf: float = 1.6
    zipf_offset: float = 4.0
    drift: float = 0.02
    weekly: float = 0.3
    bursts: float = 0.02
    home: float = 0.5
    held_out: bool = False

    @property
    def windows(self) -> tuple[int, ...]:
        return HOURLY_WINDOWS if self.hourly else DAILY_WINDOWS

    @property
    def w(self) -> int:
        """The widest window users declare: the grid's w for this workload."""
        return max(self.windows)


#: The sparse workloads. Tuning reads only those with held_out False.
SHAPES = (
    SparseShape("Sparse-daily-200", slots=200, cells=60, users=2_000, presence=0.20),
    SparseShape("Sparse-daily-500", slots=500, cells=150, users=6_000, presence=0.08, zipf=1.3),
    SparseShape("Sparse-hourly-336", slots=336, cells=50, users=3_000, presence=0.05, hourly=True),
    SparseShape("Sparse-daily-365", slots=365, cells=104, users=4_000, presence=0.12, zipf=3.0, zipf_offset=22.0,
                held_out=True),
    SparseShape("Sparse-hourly-720", slots=720, cells=120, users=5_000, presence=0.03, hourly=True, zipf=1.4,
                held_out=True),
    SparseShape("Sparse-daily-250", slots=250, cells=80, users=1_500, presence=0.30, zipf=2.0, zipf_offset=2.0,
                drift=0.05, held_out=True),
)
SPARSE = {shape.name: shape for shape in SHAPES}
HELD_OUT = tuple(shape.name for shape in SHAPES if shape.held_out)


def beta_b(median: float) -> float:
    """b of Beta(1, b) whose median is `median`: 1 - 2^(-1/b) = median."""
    if not 0 < median < 1:
        raise ValueError(f"a median presence must be in (0, 1), got {median}")
    return -math.log(2.0) / math.log(1.0 - median)


@dataclass(frozen=True)
class SparseStream:
    """One stream of a `SparseShape`, drawn from `seed` (module docstring); a `Dataset`."""

    shape: SparseShape
    seed: int

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def d(self) -> int:
        return self.shape.cells

    @property
    def users(self) -> int:
        return self.shape.users

    @property
    def slots(self) -> int:
        return self.shape.slots

    def base_weights(self, rng: np.random.Generator) -> np.ndarray:
        s = self.shape
        ranks = rng.permutation(s.cells) + 1.0
        weights = 1.0 / (ranks + s.zipf_offset) ** s.zipf
        return weights / weights.sum()

    def popularity(self, rng: np.random.Generator, base: np.ndarray) -> np.ndarray:
        """(slots, cells): each slot's category probabilities."""
        s = self.shape
        log_w = np.log(base)[None, :] + np.cumsum(rng.normal(0.0, s.drift, (s.slots, s.cells)), axis=0)
        t = np.arange(s.slots)
        if s.hourly:
            phase = rng.uniform(0.0, 2 * math.pi, s.cells)
            log_w += s.weekly * np.sin(2 * math.pi * t[:, None] / 24 + phase[None, :])
        else:
            weekend = (t % 7 >= 5).astype(float)
            log_w += s.weekly * weekend[:, None] * rng.normal(0.0, 1.0, s.cells)[None, :]
        upper = np.argsort(base)[s.cells // 2:]
        for start in np.flatnonzero(rng.random(s.slots) < s.bursts):
            cell = rng.choice(upper)
            log_w[start:start + int(rng.integers(1, 8)), cell] += math.log1p(4.0 * rng.random())
        weights = np.exp(log_w - log_w.max(axis=1, keepdims=True))
        return weights / weights.sum(axis=1, keepdims=True)

    def slot_values(self) -> Iterator[SlotValues]:
        s = self.shape
        rng = np.random.default_rng([self.seed, 5, s.slots, s.cells, s.users])
        base = self.base_weights(rng)
        popularity = self.popularity(rng, base)
        rate = rng.beta(1.0, beta_b(s.presence), s.users)
        home = rng.choice(s.cells, s.users, p=base)
        for t in range(s.slots):
            factor = DAY_PROFILE[t % 24] if s.hourly else 1.0
            present = np.flatnonzero(rng.random(s.users) < np.minimum(rate * factor, 1.0))
            at_home = rng.random(len(present)) < s.home
            values = np.where(at_home, home[present], rng.choice(s.cells, len(present), p=popularity[t]))
            yield present, values.astype(np.int64)
