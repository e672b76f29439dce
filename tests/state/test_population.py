"""Ledger classes: identical requirement histories share one ledger (state.population)."""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.state.ledger import DynamicLedger, FixedLedger
from pwevent.state.population import Population
from pwevent.state.requirements import DynamicRequirement, Requirement


def fixed_population():
    return Population(lambda req, slot: FixedLedger(req, slot))


def test_same_requirement_same_slot_share_a_class():
    pop = fixed_population()
    a = pop.register(0, Requirement(40, 0.6), 1)
    b = pop.register(1, Requirement(40, 0.6), 1)
    c = pop.register(2, Requirement(80, 0.6), 1)
    d = pop.register(3, Requirement(40, 0.6), 2)
    assert a is b and a is not c and a is not d
    assert a.members == 2
    assert pop.class_index(np.array([0, 1, 2, 3, 9])).tolist() == [a.id, a.id, c.id, d.id, -1]
    with pytest.raises(ValueError, match="already registered"):
        pop.register(0, Requirement(40, 0.6), 3)


def test_redeclare_forks_once_per_change_and_drops_empty_classes():
    pop = Population(lambda req, slot: DynamicLedger(req, slot, 100))
    first = DynamicRequirement(Requirement(1, 10.0), Requirement(40, 0.6))
    second = DynamicRequirement(Requirement(1, 10.0), Requirement(80, 0.8))
    root = pop.register(0, first, 1)
    pop.register(1, first, 1)
    pop.drain_created()
    fork_a = pop.redeclare(0, second, 5)
    fork_b = pop.redeclare(1, second, 5)
    assert fork_a is fork_b and fork_a.parent == root.id and fork_a.since == 5
    assert [c.id for c in pop.classes()] == [fork_a.id]
    assert pop.redeclare(0, second, 6) is fork_a  # the same requirement again changes nothing
    assert len(pop.drain_created()) == 1
