"""The membership rule and the keyed operator's per-user logic, without Flink (injected watermark)."""

from __future__ import annotations

from pwevent.jobs.common.membership import Membership
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.slots import SlotClock
from pwevent.operators.registry import mechanism
from pwevent.state.population import MembershipChange, class_id
from pwevent.state.requirements import DynamicRequirement, Requirement
from tests.user_membership import PendingRequirement, Rejection, UserMembership

CLOCK = SlotClock(origin_ms=0, length_ms=1000)
A = DynamicRequirement(Requirement(1, 10.0), Requirement(4, 0.8))
B = DynamicRequirement(Requirement(1, 10.0), Requirement(2, 0.8))


def record(slot: int, offset: int, requested, time_ms: int | None = None) -> PendingRequirement:
    time_ms = CLOCK.start_ms(slot) + offset if time_ms is None else time_ms
    return PendingRequirement(slot, (time_ms, 0, offset), requested, {"offset": offset}, f"r{offset}")


def dynamic() -> Membership:
    return Membership(RequirementRules(mechanism("DPBD"), 100))


def test_registration_then_change_then_repeat():
    user = UserMembership()
    m = dynamic()
    assert user.receive(record(1, 1, A), -1, CLOCK) is None
    assert user.receive(record(3, 2, B), -1, CLOCK) is None
    assert user.receive(record(4, 3, B), -1, CLOCK) is None
    out = user.close(1, "u", m)
    assert out == [MembershipChange.of(1, "u", None, A)] and out[0].target == class_id(None, None, A)
    assert user.close(2, "u", m) == []
    out = user.close(3, "u", m)
    assert out == [MembershipChange.of(3, "u", class_id(None, None, A), B)]
    assert user.close(4, "u", m) == []  # the same requirement again
    assert user.pending == [] and user.state.declared == B


def test_records_of_one_slot_apply_in_time_then_kafka_order_whatever_the_arrival():
    m = dynamic()
    early, late = record(2, 1, A), record(2, 5, B)
    one, two = UserMembership(), UserMembership()
    one.receive(early, -1, CLOCK)
    one.receive(late, -1, CLOCK)
    two.receive(late, -1, CLOCK)
    two.receive(early, -1, CLOCK)
    assert one.close(2, "u", m) == two.close(2, "u", m)
    assert one.state == two.state and one.state.declared == B


def test_a_record_whose_slot_has_closed_is_late():
    user = UserMembership()
    rejected = user.receive(record(2, 1, A), CLOCK.end_ms(2) - 1, CLOCK)
    assert isinstance(rejected, Rejection) and rejected.reason is Reason.LATE and user.pending == []
    assert user.receive(record(2, 1, A), CLOCK.end_ms(2) - 2, CLOCK) is None


def test_fixed_mechanisms_reject_a_change_and_baselines_pin_the_global_requirement():
    user = UserMembership()
    m = Membership(RequirementRules(mechanism("PBD"), 100))
    user.receive(record(1, 1, Requirement(4, 1.0)), -1, CLOCK)
    user.receive(record(1, 2, Requirement(8, 1.0)), -1, CLOCK)
    change, rejection = user.close(1, "u", m)
    assert isinstance(change, MembershipChange) and isinstance(rejection, Rejection)
    assert rejection.reason is Reason.REQUIREMENT_CHANGE_UNDER_FIXED and rejection.original == "r2"
    baseline = Membership(RequirementRules(mechanism("BD", 10, 2.0), 100))
    pinned = UserMembership()
    pinned.receive(record(1, 1, Requirement(5, 3.0)), -1, CLOCK)
    (change,) = pinned.close(1, "u", baseline)
    assert change.requirement == Requirement(10, 2.0)
