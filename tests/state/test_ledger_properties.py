"""Property-based: random requirements, decisions and presence never break an invariant.

The spend logs written here are checked by the independent auditor (jobs.audit), which recomputes
every window sum from the log alone; a deliberately broken ledger must be caught by it.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.offline.audit import AuditInputs, audit_records
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.policies import DPBA, DPBD, PBA, PBD, charge_slot, mechanism
from pwevent.state.ledger import DynamicLedger, FixedLedger
from pwevent.state.requirements import DynamicRequirement, Requirement
from pwevent.state.spend import Kind, SpendEntry, actual_spend
from pwevent.state.spend_log import spend_record

HORIZON = 12
budgets = st.sampled_from([0.1, 0.3, 0.6, 1.0, 1.7, 3.0])
windows = st.integers(1, 8)
fixed_req = st.builds(Requirement, windows, budgets)
dynamic_req = st.builds(
    DynamicRequirement, st.builds(Requirement, windows, budgets), st.builds(Requirement, windows, budgets)
)
decisions = st.lists(st.sampled_from([Kind.PUBLISH, Kind.SKIP]), min_size=1, max_size=40)


def run_ledgers(policy, ledgers, kinds, changes=None):
    """Drive ledgers slot by slot with given decisions (nullified when a border says so); log spends."""
    log = []
    for slot, wanted in enumerate(kinds, 1):
        if changes:
            for ledger, sequence in zip(ledgers, changes, strict=True):
                if sequence[slot - 1] is not None:
                    ledger.declare(sequence[slot - 1])
        budgets_ = [charge_slot(policy, ledger, slot) for ledger in ledgers]
        kind = Kind.NULLIFY if slot <= max(b.border for b in budgets_) + 1e-9 else wanted
        for user, ledger in enumerate(ledgers):
            entry = ledger.settle(slot, kind)
            log.append(spend_record(f"u{user}", entry, ledger.requirement))
    return log


@settings(max_examples=150, deadline=None)
@given(st.lists(fixed_req, min_size=1, max_size=5), decisions, st.sampled_from([PBD(), PBA()]))
def test_fixed_mechanisms_never_overspend(requirements, kinds, policy):
    ledgers = [FixedLedger(req, 1) for req in requirements]
    report = audit_records(run_ledgers(policy, ledgers, kinds))
    assert report.ok, report.render()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([DPBD(), DPBA()]))
def test_dynamic_mechanisms_never_overspend(data, policy):
    users = data.draw(st.integers(1, 4))
    kinds = data.draw(decisions)
    firsts = [data.draw(dynamic_req) for _ in range(users)]
    changes = [
        [None] + [data.draw(st.one_of(st.none(), dynamic_req)) for _ in range(len(kinds) - 1)] for _ in range(users)
    ]
    ledgers = [DynamicLedger(req, 1, HORIZON) for req in firsts]
    report = audit_records(run_ledgers(policy, ledgers, kinds, changes))
    assert report.ok, report.render()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["PBD", "PBA", "DPBD", "DPBA", "Uniform", "Sample", "BD", "BA"]))
def test_engine_with_random_presence_passes_the_audit(data, name):
    """Random joins, changes and presence: the quick audit and the full one (each user followed through
    its member lines against the requirements it declared, every line against its release) pass."""
    spec = mechanism(name, 8, 0.3)
    log, releases, declared = [], [], []
    engine = Engine(spec, 3, NumpyRandomness(data.draw(st.integers(0, 10_000))), HORIZON, log.append)

    def declare(user, requirement, slot):
        declared.append(json.dumps({"user": str(user), "time": (slot - 1) * 1000, **requirement.to_json()}))

    users = data.draw(st.integers(1, 12))
    slots = data.draw(st.integers(1, 30))
    joins = [data.draw(st.integers(1, slots)) for _ in range(users)]
    for slot in range(1, slots + 1):
        for user in (u for u in range(users) if joins[u] == slot):
            if spec.dynamic:
                requirement = data.draw(dynamic_req)
            else:
                requirement = data.draw(st.builds(Requirement, st.integers(1, 8), st.sampled_from([0.3, 1.0, 3.0])))
            engine.register(user, requirement, slot)
            declare(user, requirement, slot)
        registered = [u for u in range(users) if engine.class_of(u) is not None]
        if spec.dynamic and registered and data.draw(st.booleans()):
            requirement = data.draw(dynamic_req)
            engine.redeclare(registered[0], requirement, slot)
            declare(registered[0], requirement, slot)
        present = [u for u in registered if data.draw(st.booleans())]
        values = [data.draw(st.integers(0, 2)) for _ in present]
        outcome, _ = engine.step(slot, np.array(present, dtype=np.int64), np.array(values, dtype=np.int64))
        releases.append({"slot": slot, "kind": outcome.kind.value, "dissimilarity": outcome.dissimilarity})
    report = audit_records(log)
    assert report.ok, report.render()
    config = parse_config({"mechanism": name, "slot": "1s", "origin": 0, "domain": {"type": "cells", "d": 3},
                           "window": 8, "epsilon": 0.3, "caps": {"max_w": HORIZON}})
    lines = [(f"requirements:{n}", text) for n, text in enumerate(declared, 1)]
    full = audit_records(log, AuditInputs.build(lines, releases, config))
    assert full.ok and full.skipped is None, full.render()
    assert full.users == users


class ForgetfulLedger(FixedLedger):
    """A broken ledger: it forgets publications in its own sums (but the log shows the real spend)."""

    def settle(self, slot, kind):
        entry = super().settle(slot, kind)
        history = self._history.entries
        history[-1] = SpendEntry(slot, entry.spend1, 0.0, entry.kind)
        return entry


def test_the_auditor_catches_a_ledger_that_forgets_publications():
    ledger = ForgetfulLedger(Requirement(6, 1.2), 1)
    log = []
    for slot in range(1, 13):
        budget = charge_slot(PBD(), ledger, slot)
        entry = ledger.settle(slot, Kind.PUBLISH)
        spend1, spend2 = actual_spend(Kind.PUBLISH, budget.eps1, budget.eps2)
        log.append(spend_record("u0", SpendEntry(slot, spend1, spend2, entry.kind), ledger.requirement))
    report = audit_records(log)
    assert report.rules() == {"ledger_fixed_window"}
    assert "(w=6)" in report.render()
