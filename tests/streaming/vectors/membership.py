"""Shared scenarios of the membership rule (tests/streaming/data/membership-scenarios.jsonl): random
sequences of one user's requirement records, presences and slot closes, with what the Python
reference (`tests.user_membership.UserMembership` under `jobs.common.membership.Membership`) does with each.
Written by `python -m tests.streaming.write_vectors` (tests/streaming/test_vectors.py checks the file is
what it writes); jobs/streaming/jvm-test/pwevent/flink/membership/MembershipScenariosTest.java replays
every line on the Java `UserMembership` and `MembershipRule` that the job runs.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from pwevent.jobs.common.membership import Membership
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.slots import SlotClock
from pwevent.jobs.streaming.requirement_payload import RequirementPayload, canonical
from pwevent.operators.registry import mechanism
from pwevent.state.population import MembershipChange, UserRequirement
from pwevent.state.requirements import DynamicRequirement, Requirement
from tests.user_membership import PendingRequirement, Rejection, UserMembership

NAME = "membership-scenarios.jsonl"
CLOCK = SlotClock(origin_ms=1_000_000, length_ms=1000)
HORIZON = 50
#: mechanism -> (its spec's arguments, requirements the records declare, the default)
CASES: dict[str, tuple[tuple[Any, ...], list[UserRequirement], UserRequirement]] = {
    "PBD": ((), [Requirement(10, 1.0), Requirement(5, 0.5), Requirement(10, 1.0), Requirement(7, 2.0),
                 DynamicRequirement(Requirement(1, 10.0), Requirement(6, 1.0))], Requirement(6, 1.0)),
    "DPBD": ((), [DynamicRequirement(Requirement(1, 10.0), Requirement(6, 1.0)),
                  DynamicRequirement(Requirement(1, 10.0), Requirement(3, 0.5)),
                  DynamicRequirement(Requirement(2, 5.0), Requirement(6, 1.0)),
                  DynamicRequirement(Requirement(1, 10.0), Requirement(60, 1.0)),
                  Requirement(4, 1.0)], DynamicRequirement(Requirement(1, 10.0), Requirement(8, 0.8))),
    "Uniform": ((20, 1.0), [Requirement(10, 2.0), Requirement(20, 1.0), Requirement(30, 1.0),
                            Requirement(10, 0.5)], Requirement(10, 1.5)),
}
SCENARIOS_PER_CASE = 60


def _rejection(rejection: Rejection) -> dict[str, Any]:
    return {"reject": {"reason": rejection.reason.value, "detail": rejection.detail,
                       "partition": rejection.position["partition"], "offset": rejection.position["offset"],
                       "original": rejection.original}}


def _change(change: MembershipChange) -> dict[str, Any]:
    return {"change": {"slot": change.slot, "user": change.user, "target": change.target,
                       "previous": change.previous, "requirement": canonical(change.requirement)}}


def scenario(name: str, seed: int) -> dict[str, Any]:
    """One user's random scenario under mechanism `name`, with the Python reference's outputs."""
    args, pool, default = CASES[name]
    rng = random.Random(f"{name}-{seed}")
    rules = RequirementRules(mechanism(name, *args), HORIZON)
    with_default = seed % 2 == 0
    membership = Membership(rules, default if with_default else None)
    user, watermark, offset = UserMembership(), CLOCK.start_ms(1) - 1, 0
    steps: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    closed = 0
    for _ in range(rng.randint(1, 14)):
        kind = rng.choice(["receive", "receive", "receive", "seen", "close"] if with_default
                          else ["receive", "receive", "close"])
        if kind == "receive":
            slot = rng.randint(max(1, closed - 1), closed + 3)
            time_ms = rng.randint(CLOCK.start_ms(slot), CLOCK.end_ms(slot) - 1)
            if slot == 1 and rng.random() < 0.6:  # from before the origin: in force from slot 1
                time_ms = rng.randint(CLOCK.origin_ms - 5 * CLOCK.length_ms, CLOCK.origin_ms - 1)
            partition, offset = rng.randint(0, 2), offset + rng.randint(1, 3)
            requested = rng.choice(pool)
            original = f"record {offset} é"
            payload = RequirementPayload.of(requested, rules, original.encode())
            steps.append({"op": "receive", "slot": slot, "time": time_ms, "partition": partition, "offset": offset,
                          "requested": payload.requested, "ledger": payload.ledger, "detail": payload.detail,
                          "original": original, "watermark": watermark})
            pending = PendingRequirement(slot, (time_ms, partition, offset), requested,
                                         {"partition": partition, "offset": offset}, original)
            rejected = user.receive(pending, watermark, CLOCK)
            if rejected is not None:
                out.append(_rejection(rejected))
        elif kind == "seen":
            slot = rng.randint(max(1, closed), closed + 3)
            steps.append({"op": "seen", "slot": slot})
            out.append({"seen": user.seen(slot)})
        else:
            slot = rng.randint(closed + 1, closed + 3)
            steps.append({"op": "close", "slot": slot})
            for done in user.close(slot, "u\"1", membership, CLOCK):
                out.append(_rejection(done) if isinstance(done, Rejection) else _change(done))
            closed, watermark = slot, max(watermark, CLOCK.end_ms(slot) - 1)
    state = user.state
    return {"name": f"{name}-{seed}", "dynamic": rules.spec.dynamic,
            "fixed_change_detail": rules.fixed_change_detail,
            "default_requested": canonical(default) if with_default else None,
            "default_ledger": canonical(rules.ledger_requirement(default)) if with_default else None,
            "origin_ms": CLOCK.origin_ms, "slot_ms": CLOCK.length_ms, "user": "u\"1",
            "steps": steps, "out": out,
            "state": {"declared": state.declared and canonical(state.declared), "class": state.class_id,
                      "requirement": state.requirement and canonical(state.requirement),
                      "pending": len(user.pending), "seen_at": user.seen_at, "empty": user.empty}}


def scenarios() -> list[dict[str, Any]]:
    return [scenario(name, seed) for name in CASES for seed in range(SCENARIOS_PER_CASE)]


def text() -> str:
    """The file's text."""
    return "".join(orjson.dumps(s, option=orjson.OPT_SORT_KEYS).decode() + "\n" for s in scenarios())
