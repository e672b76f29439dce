"""The paper's synthetic streams and personalized requirement levels (docs/mechanisms.md section 12).

Every user holds a binary value each slot: 1 with probability p_t, else 0 (d = 2).
- TLNS: p_t = clip(p_{t-1} + N(0, Q), 0, 1), sqrt(Q) = 0.0025, p_0 = 0.05 (the paper's text;
  the authors' code starts at 0.5, `tlns_start=0.5`).
- Sin: p_t = 0.05 sin(0.01 t) + 0.075.
- Log: p_t = 0.25 / (1 + e^{-0.01 t}).
Personalized users draw E_i uniformly from {E, E+0.2, ..., 1.0} and w_i from {40, 80, ..., w}.
Dynamic users are grouped into `types` requirement types; each type redraws its forward requirement
(EF from {E_i.., 1.0}, wF from {40, .., w_i}) every `change_every` slots; the backward side is
(wB = 1, EB = 10) so it never binds (paper Table 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pwevent.state.requirements import DynamicRequirement, Requirement

STREAMS = ("TLNS", "Sin", "Log")


def probabilities(kind: str, slots: int, rng: np.random.Generator, tlns_start: float = 0.05) -> np.ndarray:
    """p_1 .. p_T of a synthetic stream."""
    t = np.arange(1, slots + 1, dtype=float)
    if kind == "Sin":
        return 0.05 * np.sin(0.01 * t) + 0.075
    if kind == "Log":
        return 0.25 / (1.0 + np.exp(-0.01 * t))
    if kind == "TLNS":
        p = np.empty(slots)
        current = tlns_start
        steps = rng.normal(0.0, 0.0025, slots)
        for i in range(slots):
            current = min(max(current + steps[i], 0.0), 1.0)
            p[i] = current
        return p
    raise ValueError(f"stream must be one of {', '.join(STREAMS)}, got {kind!r}")


def levels(low: float, high: float = 1.0, step: float = 0.2) -> np.ndarray:
    """{low, low+step, ..., high} (rounded so 0.6, 0.8, 1.0 are exact decimals)."""
    count = int(np.floor((high - low) / step + 1e-9)) + 1
    return np.round(low + step * np.arange(count), 10)


def window_levels(w: int, step: int = 40) -> np.ndarray:
    """{step, 2 step, ..., w} (just {w} when w < step)."""
    return np.arange(step, w + 1, step) if w >= step else np.array([w])


@dataclass(frozen=True)
class SyntheticStream:
    """A synthetic stream, generated slot by slot so memory stays O(users)."""

    kind: str
    users: int
    slots: int
    seed: int
    tlns_start: float = 0.05

    def probabilities(self) -> np.ndarray:
        return probabilities(self.kind, self.slots, np.random.default_rng([self.seed, 1]), self.tlns_start)

    def values(self) -> Iterator[np.ndarray]:
        """Each slot's values of users 0..n-1 (everybody present, binary)."""
        rng = np.random.default_rng([self.seed, 2])
        for p in self.probabilities():
            yield (rng.random(self.users) < p).astype(np.int64)


#: `RequirementDraw.dynamic_draw`'s choices: the types' redraws (the paper's) or each user's fixed draw.
DYNAMIC_DRAWS = ("types", "fixed")
#: The dynamic users' backward requirement: 10 over 1 slot, above any spend the forward one allows.
NEVER_BINDS = Requirement(1, 10.0)


def check_dynamic_draw(name: str) -> None:
    """ValueError unless `name` is one of `DYNAMIC_DRAWS`."""
    if name not in DYNAMIC_DRAWS:
        raise ValueError(f"dynamic requirements must be one of {', '.join(DYNAMIC_DRAWS)}, got {name!r}")


@dataclass(frozen=True)
class RequirementDraw:
    """How personalized requirements are drawn (section 12).

    Budgets come from {epsilon, epsilon+0.2, ..., 1.0} and windows from {40, 80, ..., w}. With
    `strict_ratio` None every user draws both uniformly (the paper's default); with a ratio o, a
    fraction o of the users gets the strictest level (epsilon, w) and the others draw uniformly
    from the remaining budget levels and windows (the paper's "ratio of users at a level").
    Dynamic users form `types` groups that share one forward requirement sequence, redrawn every
    `change_every` slots: EF from {E_i, ..., 1.0}, wF from {40, ..., w_i}; backward (1, 10). With
    `dynamic_draw` "fixed" instead, every dynamic user declares once, as forward requirement, the
    requirement the fixed draw gives the same user (backward (1, 10)): the dynamic mechanisms then
    run at the fixed mechanisms' protection, user by user.
    """

    epsilon: float
    w: int
    strict_ratio: float | None = None
    types: int = 10
    change_every: int = 500
    #: The windows users may declare, when not {40, 80, ..., w} (a sparse workload's own, e.g. 7, 14,
    #: 30 for daily slots; jobs/evaluation/sparse.py); only those up to w are drawn.
    windows: tuple[int, ...] | None = None
    #: The dynamic users' requirements: "types" (the types' redraws above, the paper's setting: a
    #: type's forward window is at most, its budget at least, one fixed draw's, so looser in
    #: distribution) or "fixed" (each user's own fixed draw, declared once).
    dynamic_draw: str = "types"

    def __post_init__(self) -> None:
        check_dynamic_draw(self.dynamic_draw)
        if not 0 < self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in (0, 1], got {self.epsilon}")
        if self.w < 1:
            raise ValueError(f"w must be a positive window, got {self.w}")
        if self.strict_ratio is not None and not 0 <= self.strict_ratio <= 1:
            raise ValueError(f"strict_ratio must be in [0, 1], got {self.strict_ratio}")
        if self.windows is not None and not self.window_levels(self.w).size:
            raise ValueError(f"no window of {self.windows} is at most w = {self.w}")

    def window_levels(self, w: int) -> np.ndarray:
        """The windows a user whose widest is w may draw: {40, 80, ..., w}, or `windows` up to w."""
        if self.windows is None:
            return window_levels(w)
        return np.array(sorted(x for x in self.windows if x <= w))

    def fixed(self, users: int, seed: int) -> list[Requirement]:
        rng = np.random.default_rng([seed, 3])
        budgets, windows = levels(self.epsilon), self.window_levels(self.w)
        if self.strict_ratio is None:
            eps, win = rng.choice(budgets, users), rng.choice(windows, users)
        else:
            strict = rng.random(users) < self.strict_ratio
            loose_b = budgets[1:] if len(budgets) > 1 else budgets
            loose_w = windows[:-1] if len(windows) > 1 else windows
            eps = np.where(strict, budgets[0], rng.choice(loose_b, users))
            win = np.where(strict, windows[-1], rng.choice(loose_w, users))
        return [Requirement(int(wi), float(ei)) for wi, ei in zip(win, eps, strict=True)]

    def dynamic(self, users: int, slots: int, seed: int) -> tuple[np.ndarray, dict[int, list[DynamicRequirement]]]:
        """(type of each user, {slot: each type's requirement from that slot on}); with `dynamic_draw`
        "fixed", each user is a type of its own that declares its fixed draw at slot 1."""
        if self.dynamic_draw == "fixed":
            return np.arange(users), {1: [DynamicRequirement(NEVER_BINDS, r) for r in self.fixed(users, seed)]}
        rng = np.random.default_rng([seed, 4])
        user_type = rng.integers(0, self.types, users)
        base = self.fixed(users, seed)
        first = [np.flatnonzero(user_type == k) for k in range(self.types)]
        type_base = [base[int(f[0])] if len(f) else base[0] for f in first]
        schedule: dict[int, list[DynamicRequirement]] = {}
        for slot in range(1, slots + 1, self.change_every):
            schedule[slot] = [
                DynamicRequirement(
                    NEVER_BINDS,
                    Requirement(int(rng.choice(self.window_levels(b.w))), float(rng.choice(levels(b.epsilon)))),
                )
                for b in type_base
            ]
        return user_type, schedule
