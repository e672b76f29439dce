"""`default_requirement`: a user seen in the events before any requirement record of theirs is
registered with the default at that slot, after the slot's own records (docs/streaming.md, "Users
without a requirement record"). One rule, three places: the replay's Engine, the job's keyed
Membership (`UserMembership`, here without Flink) and the auditor, which recomputes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.files import DEMO_ORIGIN
from pwevent.jobs.common.membership import Membership
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.release import release_record
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.slots import SlotClock
from pwevent.jobs.offline.audit import AuditInputs, audit_file, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.registry import REGISTRY, mechanism
from pwevent.state.population import MembershipChange, class_id
from pwevent.state.requirements import DynamicRequirement, Requirement
from tests.user_membership import PendingRequirement, Rejection, UserMembership

CLOCK = SlotClock(origin_ms=0, length_ms=1000)
FIXED_DEFAULT = Requirement(6, 1.0)
OTHER = Requirement(4, 2.0)
DYN_DEFAULT = DynamicRequirement(Requirement(1, 10.0), Requirement(6, 1.0))
DYN_OTHER = DynamicRequirement(Requirement(1, 10.0), Requirement(3, 0.5))


def membership(name: str, default) -> Membership:
    return Membership(RequirementRules(mechanism(name), 100), default)


def record(slot: int, offset: int, requested) -> PendingRequirement:
    return PendingRequirement(slot, (CLOCK.start_ms(slot) + offset, 0, offset), requested, {"offset": offset},
                              f"r{offset}")


def test_a_user_seen_without_a_record_joins_the_default_root_class_at_that_slot():
    user, m = UserMembership(), membership("PBD", FIXED_DEFAULT)
    assert user.seen(3) and not user.seen(4)  # one pending presence is enough
    assert user.close(2, "u", m, CLOCK) == []
    assert user.close(3, "u", m, CLOCK) == [MembershipChange.of(3, "u", None, FIXED_DEFAULT)]
    assert user.state.class_id == class_id(None, None, FIXED_DEFAULT)
    assert not user.seen(5) and user.close(5, "u", m, CLOCK) == []  # a user with a class needs nothing


def test_a_record_of_the_same_slot_wins_over_the_default():
    user, m = UserMembership(), membership("PBD", FIXED_DEFAULT)
    user.seen(3)
    user.receive(record(3, 7, OTHER), -1, CLOCK)
    assert user.close(3, "u", m, CLOCK) == [MembershipChange.of(3, "u", None, OTHER)]


def test_a_later_record_is_a_change_refused_by_a_fixed_mechanism_and_forked_by_a_dynamic_one():
    fixed, m = UserMembership(), membership("PBA", FIXED_DEFAULT)
    fixed.seen(2)
    fixed.receive(record(4, 1, OTHER), -1, CLOCK)
    out = fixed.close(4, "u", m, CLOCK)
    assert out[0] == MembershipChange.of(2, "u", None, FIXED_DEFAULT)
    assert isinstance(out[1], Rejection) and out[1].reason is Reason.REQUIREMENT_CHANGE_UNDER_FIXED
    dynamic, m = UserMembership(), membership("DPBD", DYN_DEFAULT)
    dynamic.seen(2)
    dynamic.receive(record(4, 1, DYN_OTHER), -1, CLOCK)
    root = class_id(None, None, DYN_DEFAULT)
    assert dynamic.close(4, "u", m, CLOCK) == [MembershipChange.of(2, "u", None, DYN_DEFAULT),
                                        MembershipChange.of(4, "u", root, DYN_OTHER)]


def test_an_earlier_presence_arriving_later_moves_the_registration_earlier():
    user = UserMembership()
    assert user.seen(5) and user.seen(3)
    assert user.seen_at == 3 and not user.empty
    assert user.close(3, "u", membership("PBD", FIXED_DEFAULT), CLOCK) == [MembershipChange.of(3, "u", None,
                                                                                             FIXED_DEFAULT)]


def test_without_a_default_a_presence_registers_nobody():
    user = UserMembership()
    user.seen(1)
    assert user.close(1, "u", membership("PBD", None), CLOCK) == [] and user.state.class_id is None


BASE = {"slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "cells", "d": 3}, "caps": {"max_w": 50},
        "noise": "numpy-fast"}  # seeded replays: test runs


@pytest.mark.parametrize(("extra", "message"), [
    ({"mechanism": "PBD", "default_requirement": {"w": 5}}, "default_requirement: requirement lacks epsilon"),
    ({"mechanism": "PBD", "default_requirement": {"w": 5, "epsilon": 1, "wx": 1}},
     "unknown key default_requirement.wx"),
    ({"mechanism": "PBD", "default_requirement": {"w": 500, "epsilon": 1}},
     "default_requirement: w 500 is over the configured cap 50"),
    ({"mechanism": "PBD", "default_requirement": [5, 1]}, "default_requirement must be a mapping"),
    ({"mechanism": "DPBA", "default_requirement": {"w": 5, "epsilon": 1}},
     "default_requirement: mechanism DPBA takes backward/forward requirements"),
    ({"mechanism": "Uniform", "window": 10, "epsilon": 1, "default_requirement": {"w": 20, "epsilon": 1}},
     "default_requirement: requirement (w=20, epsilon=1.0) is stricter than Uniform's global"),
    ({"mechanism": "PBD", "default_requirement": {"w": 5, "epsilon": 1e-300}}, "default_requirement: epsilon/(2 w)"),
])
def test_a_default_the_rules_would_refuse_is_a_configuration_error_naming_it(extra, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_config({**BASE, **extra})


# -- one rule in the replay and in the job's Membership, and the auditor agrees -------------------

def _requirement(dynamic: bool, level: int):
    if dynamic:
        return DynamicRequirement(Requirement(1, 10.0), Requirement(3 + level, 0.5 + 0.5 * level))
    return Requirement(3 + level, 0.5 + 0.5 * level)


slots_of_users = st.lists(  # per slot: which of 5 users send a record (and which level), which are present
    st.tuples(st.dictionaries(st.integers(0, 4), st.integers(0, 2), max_size=3),
              st.sets(st.integers(0, 4), max_size=5)),
    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["PBD", "PBA", "DPBD", "DPBA", "Adaptive", "Uniform"]), slots=slots_of_users)
def test_replay_and_keyed_membership_register_alike_and_the_audit_passes(name, slots):
    spec = mechanism(name, 8, 1.0) if REGISTRY.get(name).config_keys else mechanism(name)
    dynamic = spec.dynamic
    default = _requirement(dynamic, 1)
    config = parse_config({"mechanism": name, "slot": "1s", "origin": 0, "domain": {"type": "cells", "d": 3},
                           **REGISTRY.get(name).global_keys(8, 1.0), "caps": {"max_w": 20},
                           "default_requirement": default.to_json(), "noise": "numpy-fast"})
    lines: list[tuple[str, str]] = []
    releases: list[dict] = []
    replay_log: list[dict] = []
    job_log: list[dict] = []
    replay = Engine(spec, 3, NumpyRandomness(1), 20, replay_log.append, default_requirement=default)
    job = Engine(mechanism(name, 8, 1.0) if REGISTRY.get(name).config_keys else mechanism(name), 3,
                 NumpyRandomness(1), 20, job_log.append)
    rules = Membership(RequirementRules(spec, 20), default)
    keyed = {u: UserMembership() for u in range(5)}
    smoother = config.smoother()  # the releases' post-processing, as the job's
    for slot, (records, present) in enumerate(slots, 1):
        for user, level in sorted(records.items()):
            replay.declare(f"u{user}", slot, _requirement(dynamic, level))
            lines.append((f"record {len(lines)}", json.dumps({"user": f"u{user}", "time": CLOCK.start_ms(slot) + user,
                                                              **_requirement(dynamic, level).to_json()})))
            keyed[user].receive(record(slot, user, _requirement(dynamic, level)), -1, CLOCK)
        for user in sorted(present):
            if replay.index_of(f"u{user}") is None:
                replay.declare_default(f"u{user}", slot)
            keyed[user].seen(slot)
        changes = [c for u in range(5) for c in keyed[u].close(slot, f"u{u}", rules, CLOCK)
                   if isinstance(c, MembershipChange)]
        for change in sorted(changes, key=lambda c: c.user):
            job.apply(change)
        for user in range(5):
            assert keyed[user].state.class_id == replay.class_of(replay.index_of(f"u{user}")) \
                if replay.index_of(f"u{user}") is not None else keyed[user].state.class_id is None
        users = np.array(sorted(replay.index_of(f"u{u}") for u in present), dtype=np.int64)
        cells = users % 3
        outcome, _ = replay.step(slot, users, cells)
        counts: dict[str, np.ndarray] = {}
        for index, cell in zip(users, cells, strict=True):
            counts.setdefault(replay.class_of(int(index)), np.zeros(3, dtype=np.int64))[cell] += 1
        got, _ = job.decide(slot, counts)
        assert (got.kind, got.counts.tolist()) == (outcome.kind, outcome.counts.tolist())
        releases.append(release_record(outcome, config, NumpyRandomness(0).label, smoother))
    assert sorted(map(str, job_log)) == sorted(map(str, replay_log))
    report = audit_records(replay_log, AuditInputs.build(lines, releases, config))
    assert report.ok and report.skipped is None, report.render()


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_an_events_only_stream_replays_and_the_full_audit_checks_the_default(tmp_path):
    """Users a..f send only events, g sends a record (its own requirement) in slot 2 and events from
    slot 1: the default registers it at 1 and its record is refused (PBD keeps the first)."""
    config = parse_config({**BASE, "mechanism": "PBD", "default_requirement": {"w": 6, "epsilon": 1.0}})
    origin = config.origin_ms
    events = [{"user": u, "time": origin + (slot - 1) * 60_000 + i, "value": (i + slot) % 3}
              for slot in range(1, 31) for i, u in enumerate("abcdefg") if (i + slot) % 4]
    requirements = [{"user": "g", "time": origin + 60_000 + 5, "w": 3, "epsilon": 2.0}]
    ev, req = _write(tmp_path / "events.jsonl", events), _write(tmp_path / "requirements.jsonl", requirements)
    out = {k: str(tmp_path / f"{k}.jsonl") for k in ("releases", "spend", "rejects")}
    summary = run_replay(config, ev, req, out["releases"], out["spend"], rejects_out=out["rejects"], seed=3)
    assert summary.users == 7 and dict(summary.rejects) == {"requirement_change_under_fixed_mechanism": 1}
    report = audit_file(out["spend"], req, out["releases"], config)
    assert report.ok, report.render()
    spend = [json.loads(line) for line in Path(out["spend"]).read_text().splitlines()]
    assert {r["ledger"] for r in spend if r.get("record") == "member"} == {class_id(None, None, FIXED_DEFAULT)}
    # the same log audited as if no default were configured: every member is unregistered
    bare = parse_config({**BASE, "mechanism": "PBD"})
    lines = [(f"{req}:1", json.dumps(requirements[0]))]
    releases = [json.loads(line) for line in Path(out["releases"]).read_text().splitlines()]
    without = audit_records(spend, AuditInputs.build(lines, releases, bare))
    assert {v.rule for v in without.violations} >= {"unregistered_member"}
    # a stricter default in the audit than in the run: the users' windows are over their declared E
    strict = parse_config({**BASE, "mechanism": "PBD", "default_requirement": {"w": 6, "epsilon": 0.2}})
    over = audit_records(spend, AuditInputs.build(lines, releases, strict))
    assert {v.rule for v in over.violations} & {"requirement_mismatch", "user_fixed_window"}
