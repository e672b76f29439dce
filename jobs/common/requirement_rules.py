"""Which requirement a user's ledger runs at, and what a requirement record does (formats.md).

One place for the rules that the membership rule (`jobs.common.membership`, used by the replay's
Engine; the streaming job's keyed Membership operator runs its Java port, tested equal) applies: a
first requirement registers the user, a repeat is ignored, a change is taken by a dynamic mechanism
and rejected by a fixed one, and an invalid or too strict requirement is rejected with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pwevent.jobs.common.reasons import Reason
from pwevent.operators.policies import MechanismSpec
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.ledger import DynamicLedger, FixedLedger, Ledger
from pwevent.state.population import UserRequirement
from pwevent.state.requirements import DynamicRequirement, Requirement


class Action(StrEnum):
    """What a requirement record does to its user."""

    REGISTER = "register"
    REDECLARE = "redeclare"
    IGNORE = "ignore"
    REJECT = "reject"


@dataclass(frozen=True)
class RequirementAction:
    """What to do with a requirement record, decided the same way by the replay and the job.

    `requirement` is the one the ledger runs at (the global one for a baseline); a rejection carries
    its reason and detail for the rejects file / dead-letter topic.
    """

    action: Action
    requirement: UserRequirement | None = None
    reason: Reason | None = None
    detail: str = ""


@dataclass(frozen=True)
class RequirementRules:
    """The requirement rules of one mechanism; `horizon` is the largest window a user may declare."""

    spec: MechanismSpec
    horizon: int

    def new_ledger(self, requirement: UserRequirement, slot: int) -> Ledger:
        """A fresh ledger for a (checked) requirement from `slot` on."""
        if isinstance(requirement, DynamicRequirement):
            return DynamicLedger(requirement, slot, self.horizon)
        return FixedLedger(requirement, slot)

    def ledger_requirement(self, requirement: UserRequirement) -> UserRequirement:
        """The requirement a user's ledger runs at; raises InvalidRequirementError if it cannot serve it."""
        if self.spec.dynamic != isinstance(requirement, DynamicRequirement):
            want = "backward/forward" if self.spec.dynamic else "w/epsilon"
            raise InvalidRequirementError(f"mechanism {self.spec.name} takes {want} requirements")
        if isinstance(requirement, DynamicRequirement):
            longest = max(requirement.backward.w, requirement.forward.w)
            if longest > self.horizon:
                raise InvalidRequirementError(f"window {longest} is over the configured cap {self.horizon}")
            return requirement
        if self.spec.global_requirement is None:
            return requirement
        assert isinstance(requirement, Requirement)
        if not self.spec.global_requirement.covers(requirement):
            raise InvalidRequirementError(
                f"requirement (w={requirement.w}, epsilon={requirement.epsilon}) is stricter than "
                f"{self.spec.name}'s global (w={self.spec.global_requirement.w}, "
                f"epsilon={self.spec.global_requirement.epsilon})"
            )
        return self.spec.global_requirement

    def runs(self, requirement: UserRequirement) -> bool:
        """Whether some ledger can run `requirement` (`ledger_requirement` accepts it)."""
        try:
            self.ledger_requirement(requirement)
        except InvalidRequirementError:
            return False
        return True

    @property
    def fixed_change_detail(self) -> str:
        """The detail of a change a fixed mechanism refuses."""
        return f"{self.spec.name} keeps each user's first requirement for ever"

    def requirement_action(self, declared: UserRequirement | None, requested: UserRequirement) -> RequirementAction:
        """Reject a requirement no ledger can run (`invalid_requirement`, whatever the user declared
        before, so that the streaming job refuses it as soon as it arrives); else register a new user,
        ignore a repeat, take a dynamic change, or reject a change under a fixed mechanism (formats.md).

        `declared` is what the user declared last (None for a user not registered yet).
        """
        try:
            ledger = self.ledger_requirement(requested)
        except InvalidRequirementError as err:
            return RequirementAction(Action.REJECT, None, Reason.INVALID_REQUIREMENT, str(err))
        if declared is None:
            return RequirementAction(Action.REGISTER, ledger)
        if requested == declared:
            return RequirementAction(Action.IGNORE)
        if not self.spec.dynamic:
            return RequirementAction(Action.REJECT, None, Reason.REQUIREMENT_CHANGE_UNDER_FIXED,
                                     self.fixed_change_detail)
        return RequirementAction(Action.REDECLARE, ledger)
