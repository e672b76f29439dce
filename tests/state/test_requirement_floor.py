"""Declared requirements that cannot reach the per-slot budget floor are refused (docs/mechanisms.md, Budget floor)."""

from __future__ import annotations

import pytest

from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import DEFAULT_MIN_SLOT_EPSILON, DynamicRequirement, Requirement, RequirementCaps


def test_fixed_requirement_under_the_floor_is_refused_with_the_reason():
    caps = RequirementCaps()
    with pytest.raises(InvalidRequirementError, match=r"epsilon/\(2 w\).*floor caps.min_slot_epsilon"):
        caps.check(Requirement(1, 1e-300))
    caps.check(Requirement(1000, 1e-6))  # 5e-10 a slot: noisy but within the sampler's range
    caps.check(Requirement(1, 2 * DEFAULT_MIN_SLOT_EPSILON))  # exactly at the floor


def test_dynamic_requirement_under_the_floor_names_its_side():
    caps = RequirementCaps(min_slot_epsilon=1e-3)
    with pytest.raises(InvalidRequirementError, match="backward epsilon/"):
        caps.check(DynamicRequirement(Requirement(100, 0.1), Requirement(1, 1.0)))
    with pytest.raises(InvalidRequirementError, match="forward epsilon/"):
        caps.check(DynamicRequirement(Requirement(1, 1.0), Requirement(100, 0.1)))
    caps.check(DynamicRequirement(Requirement(50, 0.1), Requirement(50, 0.1)))
