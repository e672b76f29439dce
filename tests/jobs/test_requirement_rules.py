"""Register, ignore, redeclare or reject: the rules the replay and the job share."""

from __future__ import annotations

from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.requirement_rules import Action, RequirementRules
from pwevent.operators.registry import mechanism
from pwevent.state.requirements import DynamicRequirement, Requirement

FIXED = Requirement(40, 0.6)
DYNAMIC = DynamicRequirement(Requirement(1, 10.0), Requirement(40, 0.8))


def test_fixed_mechanism_registers_once_and_rejects_changes():
    rules = RequirementRules(mechanism("PBD"), 100)
    assert rules.requirement_action(None, FIXED).action is Action.REGISTER
    assert rules.requirement_action(FIXED, FIXED).action is Action.IGNORE
    change = rules.requirement_action(FIXED, Requirement(80, 0.6))
    assert change.action is Action.REJECT and change.reason is Reason.REQUIREMENT_CHANGE_UNDER_FIXED
    wrong_kind = rules.requirement_action(None, DYNAMIC)
    assert wrong_kind.reason is Reason.INVALID_REQUIREMENT and "w/epsilon" in wrong_kind.detail


def test_dynamic_mechanism_takes_changes_within_the_horizon():
    rules = RequirementRules(mechanism("DPBA"), 100)
    later = DynamicRequirement(Requirement(2, 5.0), Requirement(80, 1.0))
    assert rules.requirement_action(DYNAMIC, later).action is Action.REDECLARE
    too_long = DynamicRequirement(Requirement(1, 10.0), Requirement(400, 1.0))
    assert rules.requirement_action(DYNAMIC, too_long).reason is Reason.INVALID_REQUIREMENT


def test_baseline_runs_the_global_requirement_and_refuses_stricter_users():
    rules = RequirementRules(mechanism("BD", 120, 0.6), 1000)
    loose = rules.requirement_action(None, Requirement(40, 1.0))
    assert loose.action is Action.REGISTER and loose.requirement == Requirement(120, 0.6)
    assert rules.requirement_action(None, Requirement(200, 0.6)).action is Action.REJECT

