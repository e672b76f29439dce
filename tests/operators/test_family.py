"""Adaptive mechanism choices from releases only (operators/family.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.operators.family import FamilyRule, FamilySelector, SpendingRule
from pwevent.state.spend import Kind


def test_family_selector_uses_the_pilot_publication_rate():
    rare = FamilySelector(FamilyRule(pilot=10))
    for i in range(10):
        rare.observe(Kind.PUBLISH if i == 0 else Kind.SKIP)
    assert rare.done and rare.rate == pytest.approx(0.1) and rare.choice() == "PBA"
    busy = FamilySelector(FamilyRule(pilot=4))
    for _ in range(4):
        busy.observe(Kind.PUBLISH)
    assert busy.choice() == "PBD"


def test_spending_rule_drift_and_choice():
    rule = SpendingRule()
    first = np.array([1000.0, 0.0])
    assert rule.drift(first, first, 10.0, 100) == 0.0
    # uniform variance 80000, w 120: Uniform needs Q > 4 * 80000 / 120^2 ~ 22.2 per slot.
    moved = first + np.array([300.0, -300.0])  # mean square 90000 over 120 slots -> Q ~ 750
    assert rule.from_publications(first, moved, 5.0, 80_000.0, 120) == "Uniform"
    still = first + np.array([2.0, -1.0])
    assert rule.from_publications(first, still, 5.0, 80_000.0, 120) == "Sample"
    assert rule.choose(23.0, 80_000.0, 120) == "Uniform" and rule.choose(22.0, 80_000.0, 120) == "Sample"


def test_rules_are_validated():
    with pytest.raises(ValueError, match="pilot"):
        FamilyRule(pilot=0)
    with pytest.raises(ValueError, match="margin"):
        SpendingRule(margin=0)
