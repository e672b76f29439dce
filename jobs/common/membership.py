"""Which ledger class represents a user, decided from the user's requirement records alone.

`Membership.apply` is the one rule, used by the replay (through `Engine.declare`) and, through
`UserMembership`, the reference of the streaming job's keyed Membership operator (Java:
`pwevent.flink.membership.MembershipRule` and `UserMembership`, tested equal to these classes on
tests/streaming/data/membership-scenarios.jsonl, written by tests/streaming/membership_vectors.py):
a requirement record registers the user in the root class of its requirement, a dynamic change forks
the user's class, a repeat or a change to the requirement the class already runs at changes nothing,
and anything the requirement rules refuse is a reject (docs/architecture.md, "Ledger classes").

`UserMembership` is what the keyed operator keeps per user: the state above plus the requirement
records of slots that have not closed yet. A record counts from its own slot if it arrives before
that slot closes (the watermark passes the slot's end); later it is `late`. Records of one slot are
applied in (time, partition, offset) order when the slot closes, so the outcome does not depend on
the order in which Kafka delivered them. Pure Python, tested without Flink with an injected
watermark (tests/jobs/test_membership.py).

With a `default_requirement` configured, a user present in the events of a slot without a class
is registered at that slot with the default, after the slot's own requirement records (a record
of the same slot wins; a later one is a change, rejected by a fixed mechanism like any change;
docs/streaming.md, "Users without a requirement record"). The replay does the same in `Engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pwevent.jobs.common.reasons import LATE_REQUIREMENT_DETAIL, Reason
from pwevent.jobs.common.requirement_rules import Action, RequirementAction, RequirementRules
from pwevent.jobs.common.slots import SlotClock
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


@dataclass(frozen=True)
class PendingRequirement:
    """A requirement record waiting for its slot to close; `order` = (time ms, partition, offset)."""

    slot: int
    order: tuple[int, int, int]
    requested: UserRequirement
    position: Any
    original: str


@dataclass(frozen=True)
class Rejection:
    """A requirement record that did not apply: why, and what to put in the dead letter."""

    reason: Reason
    detail: str
    position: Any
    original: str


@dataclass
class UserMembership:
    """Everything the keyed Membership operator keeps for one user (the JVM's
    `pwevent.flink.membership.UserMembership`, tested equal to this class on shared scenarios)."""

    state: UserState = field(default_factory=UserState)
    pending: list[PendingRequirement] = field(default_factory=list)
    #: The first slot the user was present in without a class (only with a default requirement).
    seen_at: int | None = None

    def receive(self, record: PendingRequirement, watermark_ms: int, clock: SlotClock) -> Rejection | None:
        """Buffer a record until its slot closes, or reject it as late if the slot has closed."""
        if clock.closed(record.slot, watermark_ms):
            return Rejection(Reason.LATE, LATE_REQUIREMENT_DETAIL.format(slot=record.slot),
                             record.position, record.original)
        self.pending.append(record)
        return None

    def seen(self, slot: int) -> bool:
        """The user is present in the events of `slot` (fed only when a default requirement is
        configured); True when the default may register the user as `slot` closes (the caller sets
        a timer for it), False when the user has a class or an earlier presence is pending. The
        job's JVM filter `FirstPresence` passes on only presences this may answer True to
        (tests/jobs/test_first_presence.py)."""
        if self.state.class_id is not None or (self.seen_at is not None and self.seen_at <= slot):
            return False
        self.seen_at = slot
        return True

    def close(self, slot: int, user: str, membership: Membership) -> list[MembershipChange | Rejection]:
        """Apply the buffered records of slots up to `slot`, in slot and (time, partition, offset) order;
        a pending presence applies the default after the records of its own slot."""
        due: list[tuple[int, PendingRequirement | None]] = [(p.slot, p) for p in self.pending if p.slot <= slot]
        self.pending = [p for p in self.pending if p.slot > slot]
        if self.seen_at is not None and self.seen_at <= slot:
            due.append((self.seen_at, None))
            self.seen_at = None
        due.sort(key=lambda item: (item[0], item[1] is None, item[1].order if item[1] is not None else ()))
        out: list[MembershipChange | Rejection] = []
        for at, record in due:
            if record is None:
                registered = membership.apply_default(user, self.state, at)
                if registered is not None:
                    self.state = registered.state
                    assert registered.change is not None
                    out.append(registered.change)
                continue
            applied = membership.apply(user, self.state, record.slot, record.requested)
            self.state = applied.state
            if applied.change is not None:
                out.append(applied.change)
            if applied.action.action is Action.REJECT:
                assert applied.action.reason is not None
                out.append(Rejection(applied.action.reason, applied.action.detail, record.position, record.original))
        return out

    @property
    def empty(self) -> bool:
        return self.state.declared is None and not self.pending and self.seen_at is None
