"""The JVM's FirstPresence filter against the membership rule (docs/streaming.md, "Users without a
requirement record"): for every scenario of tests/streaming/data/first-presence.tsv (written by
tests/streaming/vectors/first_presence.py, which states the filter's rule), `UserMembership`
fed only the presences FirstPresence passes on (the file's third column, which
jobs/streaming/jvm-test/pwevent/flink/membership/FirstPresenceTest.java checks against the Java operator) ends
exactly as when fed every presence: the same changes at the same slots, the same rejections, the same
state. Every dropped presence is one `seen` answers False to, with no effect."""

from __future__ import annotations

from typing import Any

import pytest

from pwevent.jobs.common.membership import Membership
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.slots import SlotClock
from pwevent.operators.registry import mechanism
from pwevent.state.requirements import DynamicRequirement, Requirement
from tests.streaming.vectors import first_presence
from tests.streaming.write_vectors import DATA
from tests.user_membership import PendingRequirement, Rejection, UserMembership

SCENARIOS = DATA / first_presence.NAME
CLOCK = SlotClock(origin_ms=0, length_ms=1000)
#: mechanism -> (the default requirement, the requirement the scenarios' rS records declare)
REQUIREMENTS = {
    "PBD": (Requirement(6, 1.0), Requirement(4, 2.0)),
    "DPBD": (DynamicRequirement(Requirement(1, 10.0), Requirement(6, 1.0)),
             DynamicRequirement(Requirement(1, 10.0), Requirement(3, 0.5))),
}


def scenarios() -> list[tuple[str, list[str], set[int]]]:
    rows = [line.split("\t") for line in SCENARIOS.read_text().splitlines() if line and not line.startswith("#")]
    return [(name, steps.split(" "), {int(i) for i in passed.split(",")}) for name, steps, passed in rows]


def run(name: str, steps: list[str], fed: set[int] | None) -> tuple[list[Any], dict[str, Any], list[bool]]:
    """One user through `steps` as the keyed Membership operator sees them (its timers: each cS closes
    every slot up to S): the outputs, the final state and `seen`'s answer to each fed presence.
    `fed`: the indices of the presences fed (None: all)."""
    default, other = REQUIREMENTS[name]
    with_default = Membership(RequirementRules(mechanism(name), 100), default)
    without = Membership(RequirementRules(mechanism(name), 100), None)
    current, user, watermark = with_default, UserMembership(), -1
    out: list[Any] = []
    answers: list[bool] = []
    for i, step in enumerate(steps):
        if step in ("off", "on"):
            current = with_default if step == "on" else without
        elif step[0] == "p":
            assert current is with_default, f"{step}: no presence reaches Membership with the default off"
            if fed is None or i in fed:
                answers.append(user.seen(int(step[1:])))
        elif step[0] in "rR":
            slot = int(step[1:])
            requested = other if step[0] == "r" else default
            rejected = user.receive(PendingRequirement(slot, (CLOCK.start_ms(slot), 0, i), requested, i, step),
                                    watermark, CLOCK)
            if rejected is not None:
                out.append(rejected)
        else:
            assert step[0] == "c", step
            slot = int(step[1:])
            out.extend(user.close(slot, "u", current, CLOCK))
            watermark = max(watermark, CLOCK.end_ms(slot) - 1)
    return out, user, answers


@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
@pytest.mark.parametrize(("scenario", "steps", "passed"), scenarios(), ids=[s[0] for s in scenarios()])
def test_membership_fed_only_what_first_presence_passes_on_ends_the_same(
        name: str, scenario: str, steps: list[str], passed: set[int]) -> None:
    everything = run(name, steps, None)
    filtered = run(name, steps, passed)
    assert filtered[0] == everything[0] and filtered[1] == everything[1], scenario
    # the dropped presences were answered False (no timer, no state written) when fed
    presences = [i for i, step in enumerate(steps) if step[0] == "p"]
    dropped = [answer for i, answer in zip(presences, everything[2], strict=True) if i not in passed]
    assert not any(dropped), scenario


def test_the_scenarios_register_users_by_the_default_and_by_records_and_reject() -> None:
    """The file covers what it says: registrations by the default (also after an epoch change), by a
    record, late records, and a change refused by a fixed mechanism."""
    outcomes = [run("PBD", steps, None)[0] for _, steps, _ in scenarios()]
    default, other = REQUIREMENTS["PBD"]
    changes = [o for out in outcomes for o in out if not isinstance(o, Rejection)]
    assert {c.requirement for c in changes} == {default, other}
    reasons = {o.reason.value for out in outcomes for o in out if isinstance(o, Rejection)}
    assert reasons == {"late", "requirement_change_under_fixed_mechanism"}
    by_name = {name: run("PBD", steps, None)[0] for name, steps, _ in scenarios()}
    assert [c.slot for c in by_name["off-closes-the-pending-presence"]] == [5]
    assert [c.slot for c in by_name["off-twice"]] == [4]
