"""Slot decisions and what they cost each user (docs/mechanisms.md section 5)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """What a slot released: a fresh noisy histogram, or a copy of the last one."""

    PUBLISH = "publish"
    SKIP = "skip"
    NULLIFY = "nullify"


@dataclass(frozen=True)
class SpendEntry:
    """One ledger's spend at one slot. `kind is None` means the slot is charged but not yet settled
    (between `charge` and `settle` within one decision): the candidate budgets count as spent."""

    slot: int
    spend1: float
    spend2: float
    kind: Kind | None = None

    @property
    def total(self) -> float:
        return self.spend1 + self.spend2

    @property
    def may_publish(self) -> bool:
        """True for a publication, or a pending slot that might still become one."""
        return self.spend2 > 0 and self.kind in (None, Kind.PUBLISH)


def actual_spend(kind: Kind, eps1: float, eps2: float) -> tuple[float, float]:
    """What a user really spends at a slot given its candidate budgets and the slot's decision.

    The dissimilarity runs (and spends eps1) on every slot that is not nullified; the publication
    budget is spent only by a publication. A nullified slot runs nothing and spends nothing: the
    paper still runs the dissimilarity there, which costs budget without changing any output.
    """
    if kind is Kind.PUBLISH:
        return eps1, eps2
    if kind is Kind.SKIP:
        return eps1, 0.0
    return 0.0, 0.0
