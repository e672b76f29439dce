"""The per-slot release step shared by every mechanism (docs/mechanisms.md sections 2-5).

`SlotRelease.decide` takes what every registered user (or class of identical users) contributes
to one slot and returns the slot's release. The caller then settles each ledger with the decision
(`state.spend.actual_spend`). It is the core that Flink's global operator and the replay both host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pwevent.operators.noise import Randomness, discrete_laplace_variance
from pwevent.operators.obs import BudgetChoice, cell_load, optimal_budget
from pwevent.operators.sampling import sample_levels
from pwevent.state.requirements import SHARE_TOLERANCE
from pwevent.state.spend import Kind


@dataclass(frozen=True)
class SlotGroups:
    """Contributions to one slot, one row per group of users that share their budgets.

    A group is one user in the streaming job and one ledger class in the replay. `present[g, j]`
    counts the group's members whose value at the slot is cell j; `members[g]` counts all of its
    registered members, present or not (every registered user's budget enters OBS, section 1).
    """

    eps1: np.ndarray
    eps2: np.ndarray
    border: np.ndarray
    members: np.ndarray
    present: np.ndarray

    def __post_init__(self) -> None:
        g = len(self.members)
        for name in ("eps1", "eps2", "border"):
            if getattr(self, name).shape != (g,):
                raise ValueError(f"{name} must have one entry per group ({g})")
        if self.present.ndim != 2 or self.present.shape[0] != g:
            raise ValueError("present must be a (groups, d) array")


@dataclass(frozen=True)
class SlotOutcome:
    """A slot's decision and release, with the public quantities that led to it; `family`: the
    budget rule in force for a mechanism that switches (Adaptive), else None."""

    slot: int
    kind: Kind
    counts: np.ndarray
    population: int
    calculation: BudgetChoice | None = None
    publication: BudgetChoice | None = None
    dissimilarity: float | None = None
    family: str | None = None

    @property
    def threshold(self) -> float | None:
        return math.sqrt(self.publication.error) if self.publication else None


def _levels(budgets: np.ndarray, members: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Aggregate groups by budget value: (levels, members per level, present counts per level and cell)."""
    levels, inverse = np.unique(budgets, return_inverse=True)
    counts = np.bincount(inverse, weights=members, minlength=len(levels))
    cells = np.zeros((len(levels), present.shape[1]), dtype=np.int64)
    np.add.at(cells, inverse, present)
    return levels, counts, cells


class SlotRelease:
    """Decide and release one slot: nullify, or OBS -> sampled counts -> dissimilarity -> publish/skip."""

    def __init__(self, d: int, rng: Randomness) -> None:
        self.d = d
        self.rng = rng

    def _choose(self, budgets: np.ndarray, groups: SlotGroups,
                load: float | None = None) -> tuple[BudgetChoice | None, np.ndarray, np.ndarray]:
        """OBS over the groups' budgets; `load`: for a rescaled release, the mean cell's share of the users."""
        levels, counts, cells = _levels(budgets, groups.members, groups.present)
        rescaled = load is not None
        return optimal_budget(levels, counts, discrete_laplace_variance, rescaled, load or 1.0), levels, cells

    def decide(self, slot: int, groups: SlotGroups, last: np.ndarray, scheduled: Kind | None,
               rescaled: bool = False) -> SlotOutcome:
        """One slot. `last` is the last released histogram (r_{t-1}, the last non-null publication).

        scheduled: a decision fixed by the mechanism (Uniform, Sample) or None for the adaptive rule.
        rescaled: publish at OBS's threshold for the rescaled error of the mean cell (its share of the
        users from `last`) and divide the noisy counts by the public kept share, rounded to integers
        (section 14, Adaptive's even spending and "The mean cell").
        """
        population = int(groups.members.sum())
        repeat = np.asarray(last, dtype=np.int64)
        if population == 0:
            return SlotOutcome(slot, Kind.SKIP, repeat, 0)
        if scheduled is None and groups.border.size and slot <= groups.border.max() + SHARE_TOLERANCE:
            return SlotOutcome(slot, Kind.NULLIFY, repeat, population)
        calculation = dissimilarity = None
        if scheduled is None:
            calculation, levels1, cells1 = self._choose(groups.eps1, groups)
            if calculation is not None:
                # Section 4: sum |c~ - r_l| is an integer of sensitivity 1, so it takes the integer noise.
                # Summed as Python ints: noisy releases near the noise bound must not wrap int64.
                sampled = sample_levels(cells1, levels1, calculation.epsilon, self.rng)
                distance = int(np.abs(sampled - repeat).sum(dtype=object))
                noisy = distance + int(self.rng.discrete_laplace(calculation.epsilon, 1)[0])
                dissimilarity = noisy / self.d
        if scheduled is Kind.SKIP or (scheduled is None and dissimilarity is None):
            return SlotOutcome(slot, Kind.SKIP, repeat, population, calculation)
        publication, levels2, cells2 = self._choose(groups.eps2, groups,
                                                    cell_load(repeat, population) if rescaled else None)
        if publication is None:
            return SlotOutcome(slot, Kind.SKIP, repeat, population, calculation, None, dissimilarity)
        if scheduled is None and not (dissimilarity is not None and dissimilarity > math.sqrt(publication.error)):
            return SlotOutcome(slot, Kind.SKIP, repeat, population, calculation, publication, dissimilarity)
        sampled = sample_levels(cells2, levels2, publication.epsilon, self.rng)
        counts = sampled + self.rng.discrete_laplace(publication.epsilon, self.d)
        if publication.kept_share is not None:  # |counts| < 2^52 + population, s >= 2^-10: within int64
            counts = np.rint(counts / publication.kept_share).astype(np.int64)
        return SlotOutcome(slot, Kind.PUBLISH, counts, population, calculation, publication, dissimilarity)
