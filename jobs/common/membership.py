"""Which ledger class represents a user, decided from the user's requirement records alone.

`Membership.apply` is the one rule, used by the replay (through `Engine.declare`); the streaming job
applies its Java port (`pwevent.flink.membership.MembershipRule`, with the per-user state
`UserMembership`), tested equal to this rule and to its per-user reference, tests/user_membership.py,
on tests/streaming/data/membership-scenarios.jsonl (written by tests/streaming/vectors/membership.py):
a requirement record registers the user in the root class of its requirement, a dynamic change forks
the user's class, a repeat or a change to the requirement the class already runs at changes nothing,
and anything the requirement rules refuse is a reject (docs/architecture.md, "Ledger classes").

A requirement record from before the origin is in force from slot 1 (`SlotClock.in_force_from`); of a
user's such records that the rules can run, only the latest counts, the earlier ones are
`superseded_before_origin` (`Membership.superseded`; the Java `UserMembership.close` applies the same).

With a `default_requirement` configured, a user present in the events of a slot without a class
is registered at that slot with the default (`apply_default`), after the slot's own requirement
records (docs/streaming.md, "Users without a requirement record"). The replay does the same in
`Engine`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pwevent.jobs.common.requirement_rules import Action, RequirementAction, RequirementRules
from pwevent.state.population import ClassId, MembershipChange, UserRequirement


@dataclass(frozen=True)
class UserState:
    """A user's last declared requirement, and the class (and its requirement) that represents it."""

    declared: UserRequirement | None = None
    class_id: ClassId | None = None
    requirement: UserRequirement | None = None


@dataclass(frozen=True)
class Applied:
    """What one requirement record did: the new state, the class change if any, the rules' action."""

    state: UserState
    change: MembershipChange | None
    action: RequirementAction


@dataclass(frozen=True)
class Membership:
    """The membership rule over `RequirementRules` (one instance per mechanism), and the configured
    default requirement of users seen before any requirement record (None: such users are unknown)."""

    rules: RequirementRules
    default: UserRequirement | None = None

    def apply_default(self, user: str, state: UserState, slot: int) -> Applied | None:
        """Register a user present at `slot` without a class with the default requirement; None when
        there is no default or the user has a class. The configuration checked that the rules accept
        the default, so it always registers."""
        if self.default is None or state.class_id is not None:
            return None
        applied = self.apply(user, state, slot, self.default)
        assert applied.change is not None, applied.action
        return applied

    def superseded(self, records: Sequence[tuple[int, UserRequirement]], origin_ms: int) -> set[int]:
        """Of one user's requirement records in the order they apply (time ms, requirement), the
        positions of those superseded: each one from before the origin that the rules can run, but
        the last such (the latest preference declared before the origin is the one in force from
        slot 1, for every mechanism)."""
        early = [n for n, (time_ms, requested) in enumerate(records)
                 if time_ms < origin_ms and self.rules.runs(requested)]
        return set(early[:-1])

    def apply(self, user: str, state: UserState, slot: int, requested: UserRequirement) -> Applied:
        action = self.rules.requirement_action(state.declared, requested)
        if action.action in (Action.REJECT, Action.IGNORE):
            return Applied(state, None, action)
        checked = action.requirement
        assert checked is not None
        if action.action is Action.REDECLARE and checked == state.requirement:
            return Applied(UserState(requested, state.class_id, checked), None, action)
        previous = state.class_id if action.action is Action.REDECLARE else None
        change = MembershipChange.of(slot, user, previous, checked)
        return Applied(UserState(requested, change.target, checked), change, action)
