"""Typed errors raised by the state layer."""

from __future__ import annotations


class InvalidRequirementError(ValueError):
    """A privacy requirement that cannot be honoured as stated (docs/mechanisms.md sections 6-7)."""


class BudgetExceededError(RuntimeError):
    """A spend that would break a privacy invariant (docs/mechanisms.md section 9).

    Ledgers raise it instead of clipping: a refused spend is a bug in a budget policy, never
    something to paper over.
    """

    def __init__(self, slot: int, window: str, spent: float, bound: float) -> None:
        super().__init__(
            f"slot {slot}: spend would make the {window} window sum {spent:.12g} exceed its bound {bound:.12g}"
        )
        self.slot = slot
        self.window = window
        self.spent = spent
        self.bound = bound
