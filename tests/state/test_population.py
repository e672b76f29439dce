"""Ledger classes: identical requirement histories share one ledger (state.population)."""

from __future__ import annotations

import pytest

from pwevent.state.ledger import DynamicLedger, FixedLedger
from pwevent.state.population import MembershipChange, Population, class_id
from pwevent.state.requirements import DynamicRequirement, Requirement
from pwevent.state.spend import Kind

FIRST = DynamicRequirement(Requirement(1, 10.0), Requirement(40, 0.6))
SECOND = DynamicRequirement(Requirement(1, 10.0), Requirement(80, 0.8))


def dynamic_population() -> Population:
    return Population(lambda req, slot: DynamicLedger(req, slot, 100))


def test_class_ids_are_deterministic_names_of_the_history():
    root = class_id(None, None, Requirement(40, 0.6))
    assert root == class_id(None, None, Requirement(40, 0.6))
    assert root != class_id(None, None, Requirement(40, 0.8))
    assert class_id(root, 5, FIRST) != class_id(root, 6, FIRST)
    with pytest.raises(ValueError, match="root class"):
        class_id(root, None, FIRST)


def test_registrations_join_the_root_class_of_their_requirement_whenever_they_come():
    pop = Population(lambda req, slot: FixedLedger(req, slot))
    a = MembershipChange.of(1, "a", None, Requirement(40, 0.6))
    late = MembershipChange.of(7, "b", None, Requirement(40, 0.6))
    other = MembershipChange.of(1, "c", None, Requirement(80, 0.6))
    assert pop.apply(a) is not None and pop.apply(other) is not None
    assert pop.apply(late) is None  # joins the existing root class, created at slot 1
    assert a.target == late.target and pop.get(a.target).members == 2 and pop.get(a.target).since == 1
    assert [c.id for c in pop.live()] == sorted([a.target, other.target])


def test_a_change_forks_once_per_slot_and_requirement_and_empty_forks_go():
    pop = dynamic_population()
    root = MembershipChange.of(1, "a", None, FIRST).target
    pop.apply(MembershipChange.of(1, "a", None, FIRST))
    pop.apply(MembershipChange.of(1, "b", None, FIRST))
    fork_a = MembershipChange.of(5, "a", root, SECOND)
    fork_b = MembershipChange.of(5, "b", root, SECOND)
    created = pop.apply(fork_a)
    assert created is not None and created.parent == root and created.since == 5
    assert pop.apply(fork_b) is None and fork_a.target == fork_b.target
    assert [c.id for c in pop.live()] == [fork_a.target]
    assert pop.get(root).members == 0  # the root sleeps, it is not dropped
    pop.apply(MembershipChange.of(9, "a", fork_a.target, FIRST))
    pop.apply(MembershipChange.of(9, "b", fork_a.target, FIRST))
    pop.drop_empty_forks()
    assert pop.get(fork_a.target) is None and pop.get(root) is not None


def test_a_fork_copies_the_parents_spend():
    pop = dynamic_population()
    first = MembershipChange.of(1, "a", None, FIRST)
    pop.apply(first)
    ledger = pop.get(first.target).ledger
    ledger.open_slot(1)
    ledger.charge(1, 0.1, 0.2)
    ledger.settle(1, Kind.PUBLISH)
    fork = pop.apply(MembershipChange.of(2, "a", first.target, SECOND))
    assert fork.ledger.spent(1, 1) == (0.1, 0.2) and fork.ledger.requirement == SECOND


def test_changes_that_do_not_add_up_are_refused():
    pop = dynamic_population()
    with pytest.raises(ValueError, match="fork of unknown class"):
        pop.apply(MembershipChange.of(2, "a", "nope", SECOND))
    with pytest.raises(ValueError, match="is not the class of this change"):
        MembershipChange(1, "a", "forged", None, FIRST)
    first = MembershipChange.of(1, "a", None, FIRST)
    pop.apply(first)
    pop.apply(MembershipChange.of(2, "a", first.target, SECOND))
    with pytest.raises(ValueError, match="has no member"):
        pop.apply(MembershipChange.of(3, "b", first.target, SECOND))


def test_snapshot_round_trip():
    pop = dynamic_population()
    pop.apply(MembershipChange.of(1, "a", None, FIRST))
    again = dynamic_population()
    again.restore(pop.to_json())
    assert again.to_json() == pop.to_json()


@pytest.mark.parametrize("requirement", [{"w": 5, "epsilon": 1.0, "forward": {"w": 5, "epsilon": 1.0}},
                                         {"forward": {"w": 5, "epsilon": 1.0}},
                                         {"backward": {"w": 5, "epsilon": 1.0}}])
def test_a_stored_requirement_is_read_by_the_records_rule_and_never_half(requirement):
    """A change read back from state goes through the requirement records' own dispatch
    (state.requirements.parse_requirement): half a dynamic requirement is refused, not read as
    something else."""
    from pwevent.state.requirements import InvalidRequirementError

    change = MembershipChange.of(3, "u1", None, Requirement(5, 1.0)).to_json()
    with pytest.raises(InvalidRequirementError):
        MembershipChange.from_json({**change, "requirement": requirement})
