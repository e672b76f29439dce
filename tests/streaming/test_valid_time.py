"""The rules by which `pwevent.flink.time.ValidTime` lets an event move time (docs/streaming.md, "Time"),
against their Python definitions: a record of a slot is late once its slot has closed exactly as
Membership refuses a late requirement; a partition's time follows its offsets across the two
parsers (`OffsetOrder`), whatever the interleaving of the fast path's channel and the reference parser's.
The job's integration test (tests/integration/test_event_time.py,
`test_only_valid_records_move_event_time`) runs the operator end to end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.slots import SlotClock
from pwevent.state.requirements import Requirement
from tests.user_membership import PendingRequirement, UserMembership

ORIGINS = st.sampled_from([0, 1_704_067_200_000, -62_135_596_800_000, 7])
LENGTHS = st.sampled_from([1, 1000, 60_000, 86_400_000, 7])
TIMES = st.integers(-62_135_596_800_000, 253_402_300_799_999)


@dataclass(frozen=True)
class JavaRules:
    """`SlotRules.closed` and `OffsetOrder`."""

    closed: Callable[..., bool]  # (the Java names)
    offset_order: Callable[[], Any]  # a py4j object


@pytest.fixture(scope="module")
def valid_time() -> JavaRules:
    """The Java rules, through PyFlink's gateway JVM with the job's jar (no Flink job runs)."""
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    from pwevent.jobs.streaming.jars import jvm_jar

    gateway = get_gateway()
    add_jars_to_context_class_loader([jvm_jar().resolve().as_uri()])
    rules = gateway.jvm.pwevent.flink.time.SlotRules
    return JavaRules(rules.closed, gateway.jvm.pwevent.flink.time.OffsetOrder)


@pytest.mark.flink
@settings(max_examples=1500, deadline=None)
@given(origin=ORIGINS, length=LENGTHS, slot=st.integers(1, 10**6), offset=st.integers(-3, 3),
       far=st.none() | TIMES)
def test_a_closed_slots_registration_is_membership_late(valid_time: JavaRules, origin: int, length: int, slot: int,
                                                         offset: int, far: int | None) -> None:
    clock = SlotClock(origin, length)
    watermark = clock.end_ms(slot) - 1 + offset if far is None else far
    pending = PendingRequirement(slot, (clock.start_ms(slot), 0, 0), Requirement(10, 1.0), {}, "")
    rejection = UserMembership().receive(pending, watermark, clock)
    late = rejection is not None and rejection.reason is Reason.LATE
    assert valid_time.closed(slot, watermark, origin, length) == late


#: A partition's records in offset order: (on the fast path?, the time it moves or None: refused,
#: of an unknown user, not believed).
RECORDS = st.lists(st.tuples(st.booleans(), st.none() | st.integers(0, 10**6)), max_size=30)


@pytest.mark.flink
@settings(max_examples=300, deadline=None)
@given(records=RECORDS, order=st.lists(st.booleans(), max_size=60))
def test_a_partitions_time_follows_its_offsets_across_both_parsers(valid_time: JavaRules,
                                                                   records: list[tuple[bool, int | None]],
                                                                   order: list[bool]) -> None:
    """The fast path's channel carries each record in offset order (an event, or the mark of one the
    reference parser takes); the parser's channel its results, in offset order; the two interleave
    arbitrarily (`order`: which channel goes next). After every arrival the partition's time is the
    latest of the arrived times of the records the fast channel has passed that come before the
    first record whose mark came and whose result did not."""
    fast_channel = list(enumerate(records))
    slow_channel = [(offset, time) for offset, (fast, time) in enumerate(records) if not fast]
    offset_order = valid_time.offset_order()
    marked: set[int] = set()
    resolved: set[int] = set()
    arrived: dict[int, int] = {}
    frontier = -1
    picks = iter(order)
    while fast_channel or slow_channel:
        if fast_channel and (not slow_channel or next(picks, True)):
            offset, (fast, time) = fast_channel.pop(0)
            frontier = offset
            if not fast:
                offset_order.pending(offset)
                marked.add(offset)
                time = None  # the mark carries no time; its result does
            else:
                offset_order.fast(offset, time)
        else:
            offset, time = slow_channel.pop(0)
            offset_order.resolved(offset, time)
            resolved.add(offset)
        if time is not None:
            arrived[offset] = time
        first_pending = min(marked - resolved, default=len(records))
        settled = [time for offset, time in arrived.items() if offset < first_pending and offset <= frontier]
        assert offset_order.latest() == max(settled, default=-(2**63))
        assert offset_order.waiting() == (len(settled) < len(arrived) or bool(marked - resolved))
    assert offset_order.latest() == max(arrived.values(), default=-(2**63))
    assert not offset_order.waiting()
