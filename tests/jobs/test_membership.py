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
    out = user.close(1, "u", m, CLOCK)
    assert out == [MembershipChange.of(1, "u", None, A)] and out[0].target == class_id(None, None, A)
    assert user.close(2, "u", m, CLOCK) == []
    out = user.close(3, "u", m, CLOCK)
    assert out == [MembershipChange.of(3, "u", class_id(None, None, A), B)]
    assert user.close(4, "u", m, CLOCK) == []  # the same requirement again
    assert user.pending == [] and user.state.declared == B


def test_records_of_one_slot_apply_in_time_then_kafka_order_whatever_the_arrival():
    m = dynamic()
    early, late = record(2, 1, A), record(2, 5, B)
    one, two = UserMembership(), UserMembership()
    one.receive(early, -1, CLOCK)
    one.receive(late, -1, CLOCK)
    two.receive(late, -1, CLOCK)
    two.receive(early, -1, CLOCK)
    assert one.close(2, "u", m, CLOCK) == two.close(2, "u", m, CLOCK)
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
    change, rejection = user.close(1, "u", m, CLOCK)
    assert isinstance(change, MembershipChange) and isinstance(rejection, Rejection)
    assert rejection.reason is Reason.REQUIREMENT_CHANGE_UNDER_FIXED and rejection.original == "r2"
    baseline = Membership(RequirementRules(mechanism("BD", 10, 2.0), 100))
    pinned = UserMembership()
    pinned.receive(record(1, 1, Requirement(5, 3.0)), -1, CLOCK)
    (change,) = pinned.close(1, "u", baseline, CLOCK)
    assert change.requirement == Requirement(10, 2.0)


def test_the_latest_runnable_record_from_before_the_origin_is_in_force_from_slot_1_for_every_mechanism():
    """Records dated before the origin apply at slot 1 (`SlotClock.in_force_from`); of those the rules
    can run, the latest by time is the one in force and the earlier ones are `superseded_before_origin`,
    under a fixed mechanism (which would otherwise refuse the later one as a change) as under a dynamic
    one; a record the rules refuse keeps its own reason and does not take the place of a good one."""
    origin = SlotClock(origin_ms=10_000, length_ms=1000)
    for name, old, new, refused in (("PBD", Requirement(4, 1.0), Requirement(8, 1.0), A),
                                    ("DPBD", A, B, Requirement(4, 1.0))):
        m = Membership(RequirementRules(mechanism(name), 100))
        user = UserMembership()
        for offset, time_ms, requested in ((1, 2_000, new), (2, 1_000, old), (3, 5_000, refused)):
            slot = origin.in_force_from(time_ms)
            assert slot == 1
            user.receive(PendingRequirement(slot, (time_ms, 0, offset), requested, {"offset": offset}, f"r{offset}"),
                         -1, origin)
        out = user.close(1, "u", m, origin)
        changes = [o for o in out if isinstance(o, MembershipChange)]
        rejections = {o.original: o.reason for o in out if isinstance(o, Rejection)}
        assert changes == [MembershipChange.of(1, "u", None, new)], name
        assert rejections == {"r2": Reason.SUPERSEDED_BEFORE_ORIGIN, "r3": Reason.INVALID_REQUIREMENT}, name
        assert user.state.declared == new


def test_a_record_of_slot_1_itself_still_follows_the_mechanisms_rule_after_the_ones_from_before_the_origin():
    origin = SlotClock(origin_ms=10_000, length_ms=1000)
    m = Membership(RequirementRules(mechanism("PBD"), 100))
    user = UserMembership()
    user.receive(PendingRequirement(1, (1_000, 0, 1), Requirement(4, 1.0), {"offset": 1}, "r1"), -1, origin)
    user.receive(PendingRequirement(1, (10_500, 0, 2), Requirement(8, 1.0), {"offset": 2}, "r2"), -1, origin)
    change, rejection = user.close(1, "u", m, origin)
    assert change == MembershipChange.of(1, "u", None, Requirement(4, 1.0))
    assert isinstance(rejection, Rejection) and rejection.reason is Reason.REQUIREMENT_CHANGE_UNDER_FIXED
