"""Users' privacy requirements: fixed (w, E) and dynamic backward/forward pairs (docs/mechanisms.md sections 6-7).

Requirements are public parameters of the mechanism (docs/mechanisms.md section 1), so they may steer
budgets freely. They are validated once, here, with messages that name the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from pwevent.state.errors import InvalidRequirementError

#: The relative precision of every budget comparison (docs/mechanisms.md section 9): a sum of spends
#: breaks a bound E only when it is above E (1 + RELATIVE_TOLERANCE). Relative, so that it means the
#: same at every admitted budget, down to the floor (an absolute 1e-9 enforced nothing below ~1e-8).
RELATIVE_TOLERANCE = 1e-9

#: Counts of budget shares (spend / share) and nullification borders are dimensionless numbers of
#: slots: one within this of an integer is that integer (float residues of the share arithmetic).
SHARE_TOLERANCE = 1e-9

Amount = TypeVar("Amount", float, np.ndarray)


def exceeds(total: Amount, bound: Amount | float) -> Amount | bool:
    """True where `total` spends more than `bound` allows: total > bound (1 + RELATIVE_TOLERANCE).

    The one budget comparison (docs/mechanisms.md section 9) of the ledgers, Adaptive's caps and the
    auditor; elementwise on arrays. Float sums of at most max_w spends are off by ~1e-13 relative,
    far inside the margin, so a correct run never trips it and a window over E by a relative 1e-9
    always does.
    """
    return total > bound * (1.0 + RELATIVE_TOLERANCE)  # type: ignore[no-any-return]

#: Default per-slot budget floor (docs/mechanisms.md, Budget floor): a budget below it is 0. At least
#: the noise sampler's range limit 64 ln 2 / 2^52 ~ 9.85e-15 (operators.noise.SAMPLER_MIN_EPSILON),
#: rounded up; with it P(|noise| >= 2^52) ~ e^-45 ~ 2^-65 per draw.
DEFAULT_MIN_SLOT_EPSILON = 1e-14


@dataclass(frozen=True)
class Requirement:
    """A w-event requirement: at most `epsilon` spent in any `w` consecutive slots."""

    w: int
    epsilon: float

    def __post_init__(self) -> None:
        if isinstance(self.w, bool) or not isinstance(self.w, int):
            raise InvalidRequirementError(f"w must be an integer, got {self.w!r}")
        if self.w < 1:
            raise InvalidRequirementError(f"w must be >= 1, got {self.w}")
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)):
            raise InvalidRequirementError(f"epsilon must be a number, got {self.epsilon!r}")
        if not math.isfinite(self.epsilon) or self.epsilon <= 0:
            raise InvalidRequirementError(f"epsilon must be finite and > 0, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", float(self.epsilon))

    @property
    def share(self) -> float:
        """One budget share E / (2 w): the per-slot calculation budget of PBD/PBA (section 6)."""
        return self.epsilon / (2 * self.w)

    def to_json(self) -> dict[str, Any]:
        return {"w": self.w, "epsilon": self.epsilon}

    @classmethod
    def from_json(cls, obj: Any, field: str = "requirement") -> Requirement:
        if not isinstance(obj, dict):
            raise InvalidRequirementError(f"{field} must be an object with w and epsilon")
        missing = [k for k in ("w", "epsilon") if k not in obj]
        if missing:
            raise InvalidRequirementError(f"{field} lacks {', '.join(missing)}")
        try:
            return cls(obj["w"], obj["epsilon"])
        except InvalidRequirementError as err:
            raise InvalidRequirementError(f"{field}: {err}") from None

    def covers(self, other: Requirement) -> bool:
        """True when honouring `self` also honours `other`: a window at least as long and a budget at
        most as large, compared exactly (docs/mechanisms.md section 9: a margin here would add to the
        ledger's, and a user's windows could then exceed its E by more than the relative precision)."""
        return self.w >= other.w and self.epsilon <= other.epsilon

    def scaled(self, share: float) -> Requirement:
        """The same window at `share` of the budget: what one statistic of several may spend of it
        (docs/mechanisms.md, "Several statistics under one budget"); itself at share 1."""
        return self if share == 1.0 else Requirement(self.w, self.epsilon * share)


@dataclass(frozen=True)
class DynamicRequirement:
    """A backward and a forward requirement declared for a slot (docs/mechanisms.md section 7)."""

    backward: Requirement
    forward: Requirement

    def to_json(self) -> dict[str, Any]:
        return {"backward": self.backward.to_json(), "forward": self.forward.to_json()}

    def scaled(self, share: float) -> DynamicRequirement:
        """Both sides at `share` of their budgets (`Requirement.scaled`)."""
        return self if share == 1.0 else DynamicRequirement(self.backward.scaled(share), self.forward.scaled(share))

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> DynamicRequirement:
        missing = [k for k in ("backward", "forward") if k not in obj]
        if missing:
            raise InvalidRequirementError(f"dynamic requirement lacks {', '.join(missing)}")
        return cls(Requirement.from_json(obj["backward"], "backward"), Requirement.from_json(obj["forward"], "forward"))


@dataclass(frozen=True)
class RequirementCaps:
    """Operator-configured limits on what a user may declare (streaming.md, invalid requirement).

    `max_w` is also how many slots of history a dynamic ledger keeps (state.ledger.DynamicLedger),
    so it bounds per-user state: raise it deliberately. `min_slot_epsilon` is the per-slot budget
    floor (docs/mechanisms.md, Budget floor): budgets below it are 0, and a requirement whose share
    E / (2 w) is below it could never be served, so it is refused.
    """

    max_w: int = 1_000
    max_epsilon: float = 100.0
    min_slot_epsilon: float = DEFAULT_MIN_SLOT_EPSILON

    def check_floor(self, requirement: Requirement, name: str = "") -> None:
        """Refuse a requirement whose per-slot share E / (2 w) is below the floor (PBD/PBA's eps1,
        half of Uniform's E / w, the steady-state eps1 a dynamic backward or forward side allows)."""
        if requirement.share < self.min_slot_epsilon:
            raise InvalidRequirementError(
                f"{name}epsilon/(2 w) = {requirement.epsilon:.6g}/(2*{requirement.w}) = {requirement.share:.3g} is "
                f"below the per-slot budget floor caps.min_slot_epsilon = {self.min_slot_epsilon:g}: noise for a "
                "budget that small cannot be sampled safely, so the requirement could never be served"
            )

    def check(self, requirement: Requirement | DynamicRequirement) -> None:
        parts = (
            [("", requirement)]
            if isinstance(requirement, Requirement)
            else [("backward ", requirement.backward), ("forward ", requirement.forward)]
        )
        for name, part in parts:
            if part.w > self.max_w:
                raise InvalidRequirementError(f"{name}w {part.w} is over the configured cap {self.max_w}")
            if part.epsilon > self.max_epsilon:
                raise InvalidRequirementError(
                    f"{name}epsilon {part.epsilon} is over the configured cap {self.max_epsilon}"
                )
            self.check_floor(part, name)


def parse_requirement(obj: dict[str, Any]) -> Requirement | DynamicRequirement:
    """Parse the requirement part of a requirement record: `w`/`epsilon` or `backward`/`forward`."""
    if "backward" in obj or "forward" in obj:
        return DynamicRequirement.from_json(obj)
    return Requirement.from_json(obj)
