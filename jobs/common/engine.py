"""The population-level driver: ledger classes + a budget policy + the per-slot release.

Used by `pwevent replay` (from files) and by the evaluator (in memory). One slot at a time: every
class is charged through `operators.policies.charge_slot`, the release step decides, every class is
settled, and the spend log hears about it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.operators.noise import Randomness
from pwevent.operators.policies import MechanismSpec, charge_slot
from pwevent.operators.slot_release import SlotGroups, SlotOutcome, SlotRelease
from pwevent.state.population import Population, UserRequirement
from pwevent.state.release_history import ReleaseHistory
from pwevent.state.requirements import DEFAULT_MIN_SLOT_EPSILON, DynamicRequirement
from pwevent.state.spend_log import ledger_record, member_record, spend_record

SpendSink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Projection:
    """A backward requirement that was below what its window had already spent (section 7)."""

    slot: int
    ledger: int
    members: int
    requested: float
    projected: float


class Engine:
    """Runs one mechanism over a population of dense user indices, slot by slot."""

    def __init__(
        self,
        spec: MechanismSpec,
        d: int,
        rng: Randomness,
        horizon: int,
        spend_sink: SpendSink | None = None,
        last_release: np.ndarray | None = None,
        floor: float = DEFAULT_MIN_SLOT_EPSILON,
    ) -> None:
        """`last_release`: r_0, the histogram the first dissimilarity compares with (zeros by
        default; a public earlier release when a run continues another). `floor`: the per-slot
        budget floor, caps.min_slot_epsilon (docs/mechanisms.md, Budget floor)."""
        self.spec = spec
        self.d = d
        self.horizon = horizon
        self.floor = floor
        self.rules = RequirementRules(spec, horizon)
        self.population = Population(self.rules.new_ledger)
        self.release = SlotRelease(d, rng)
        self.history = ReleaseHistory.start(d, last_release)
        self._sink = spend_sink

    def register(self, user: int, requirement: UserRequirement, slot: int, name: str | None = None) -> None:
        """A new user (dense index `user`, external id `name` for the spend log) from `slot` on."""
        self._check_slot(slot)
        cls = self.population.register(user, self.rules.ledger_requirement(requirement), slot)
        self._log_new_classes()
        if self._sink:
            self._sink(member_record(name or str(user), str(cls.id), slot))

    def redeclare(self, user: int, requirement: UserRequirement, slot: int, name: str | None = None) -> None:
        """A registered user's new requirement from `slot` on (dynamic mechanisms only)."""
        self._check_slot(slot)
        checked = self.rules.ledger_requirement(requirement)
        assert isinstance(checked, DynamicRequirement)
        before = self.population.class_of(user)
        cls = self.population.redeclare(user, checked, slot)
        self._log_new_classes()
        if self._sink and (before is None or cls.id != before.id):
            self._sink(member_record(name or str(user), str(cls.id), slot))

    def _check_slot(self, slot: int) -> None:
        if slot != self.history.decided + 1:
            expected = self.history.decided + 1
            raise ValueError(f"slot {slot} given but the engine is at slot {expected}: slots run 1, 2, ...")

    def _log_new_classes(self) -> None:
        for cls in self.population.drain_created():
            if self._sink:
                parent = None if cls.parent is None else str(cls.parent)
                self._sink(ledger_record(str(cls.id), cls.requirement, cls.since, parent))

    def step(self, slot: int, users: np.ndarray, values: np.ndarray) -> tuple[SlotOutcome, list[Projection]]:
        """Decide `slot`: users/values are the registered users present in it, one value each."""
        self._check_slot(slot)
        classes = list(self.population.classes())
        budgets = [charge_slot(self.spec.policy, cls.ledger, slot, self.floor) for cls in classes]
        rows = np.full(max((c.id for c in classes), default=-1) + 1, -1, dtype=np.int64)
        rows[[c.id for c in classes]] = np.arange(len(classes))
        groups = len(classes)
        present = np.zeros((groups, self.d), dtype=np.int64)
        if len(users):
            classes_of = self.population.class_index(users)
            if (classes_of < 0).any():
                unknown = users[classes_of < 0][:5].tolist()
                raise ValueError(f"slot {slot}: values given for unregistered users {unknown}")
            row = rows[classes_of]
            present = np.bincount(row * self.d + np.asarray(values, dtype=np.int64), minlength=groups * self.d)
            present = present.reshape(groups, self.d)
        outcome = self.release.decide(
            slot,
            SlotGroups(
                eps1=np.array([b.eps1 for b in budgets], dtype=float),
                eps2=np.array([b.eps2 for b in budgets], dtype=float),
                border=np.array([b.border for b in budgets], dtype=float),
                members=np.array([c.members for c in classes], dtype=np.int64),
                present=present,
            ),
            self.history.last,
            self.spec.policy.scheduled_kind(slot),
        )
        projections = []
        for cls, budget in zip(classes, budgets, strict=True):
            entry = cls.ledger.settle(slot, outcome.kind)
            if budget.projected_backward is not None:
                assert isinstance(cls.requirement, DynamicRequirement)
                projections.append(
                    Projection(slot, cls.id, cls.members, cls.requirement.backward.epsilon, budget.projected_backward)
                )
            if self._sink:
                self._sink(spend_record(str(cls.id), entry, cls.requirement, cls.members, budget.projected_backward))
        self.history.record(slot, outcome.kind, outcome.counts)
        return outcome, projections
