"""The membership rule's shared scenarios (tests/streaming/data/membership-scenarios.jsonl, what the
Python reference does: tests/streaming/vectors/membership.py; tests/streaming/test_vectors.py checks
the file) reach every outcome; the Java `UserMembership` and `MembershipRule` the job runs are
checked against the same lines by
jobs/streaming/jvm-test/pwevent/flink/membership/MembershipScenariosTest.java (deploy/local/test-jvm.sh)."""

from __future__ import annotations

import orjson

from tests.streaming.vectors import membership


def test_the_scenarios_reach_every_outcome() -> None:
    outcomes = set()
    for line in membership.text().splitlines():
        for out in orjson.loads(line)["out"]:
            kind = next(iter(out))
            if kind == "change":
                outcomes.add("register" if out[kind]["previous"] is None else "fork")
            else:
                outcomes.add(kind if kind == "seen" else f"{kind}:{out[kind]['reason']}")
    assert outcomes == {"seen", "register", "fork", "reject:late", "reject:invalid_requirement",
                        "reject:requirement_change_under_fixed_mechanism", "reject:superseded_before_origin"}
