"""The Python reference of what the streaming job's keyed Membership operator keeps per user (the JVM's
`pwevent.flink.membership.UserMembership`, tested equal to it on tests/streaming/data/membership-scenarios.jsonl,
written by tests/streaming/vectors/membership.py), over the one membership rule,
`jobs.common.membership.Membership`.

`UserMembership` holds the user's state plus the requirement records of slots that have not closed
yet. A record counts from its own slot if it arrives before that slot closes (the watermark passes
the slot's end); later it is `late`. Records of one slot are applied in (time, partition, offset)
order when the slot closes, so the outcome does not depend on the order in which Kafka delivered
them. With a `default_requirement` configured, a user present in the events of a slot without a
class is registered at that slot with the default, after the slot's own requirement records (a
record of the same slot wins; a later one is a change, rejected by a fixed mechanism like any
change; docs/streaming.md, "Users without a requirement record"). Pure Python, tested without Flink
with an injected watermark (tests/jobs/test_membership.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pwevent.jobs.common.membership import Membership, UserState
from pwevent.jobs.common.reasons import LATE_REQUIREMENT_DETAIL, SUPERSEDED_BEFORE_ORIGIN_DETAIL, Reason
from pwevent.jobs.common.requirement_rules import Action
from pwevent.jobs.common.slots import SlotClock
from pwevent.state.population import MembershipChange, UserRequirement


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

    def close(self, slot: int, user: str, membership: Membership, clock: SlotClock
              ) -> list[MembershipChange | Rejection]:
        """Apply the buffered records of slots up to `slot`, in slot and (time, partition, offset) order,
        but those superseded by a later one from before the origin (`Membership.superseded`); a
        pending presence applies the default after the records of its own slot."""
        due: list[tuple[int, PendingRequirement | None]] = [(p.slot, p) for p in self.pending if p.slot <= slot]
        self.pending = [p for p in self.pending if p.slot > slot]
        if self.seen_at is not None and self.seen_at <= slot:
            due.append((self.seen_at, None))
            self.seen_at = None
        due.sort(key=lambda item: (item[0], item[1] is None, item[1].order if item[1] is not None else ()))
        records = [record for _, record in due if record is not None]
        superseded = {id(records[n]) for n in membership.superseded([(r.order[0], r.requested) for r in records],
                                                                  clock.origin_ms)}
        out: list[MembershipChange | Rejection] = []
        for at, record in due:
            if record is not None and id(record) in superseded:
                out.append(Rejection(Reason.SUPERSEDED_BEFORE_ORIGIN, SUPERSEDED_BEFORE_ORIGIN_DETAIL, record.position,
                                     record.original))
                continue
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
