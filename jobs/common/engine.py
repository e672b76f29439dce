"""The population-level driver: ledger classes + a budget policy + the per-slot release.

One class for every host: `pwevent replay` (from files), the evaluator (in memory) and the
streaming job's global Population operator (jobs/streaming/hosts.py). A slot is decided in one call:
every class with members is charged through `operators.policies.charge_slot`, the release step
decides, every class is settled at once, and the spend log hears about it. Membership changes
(`state.population.MembershipChange`) come either from the replay's own users (`declare`, the
`Membership` rule whose Java port the job's keyed operator applies) or from the job's Membership
operator (`apply`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson

from pwevent.jobs.common.membership import Applied, Membership, UserState
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.records import reject_record
from pwevent.jobs.common.requirement_rules import Action, RequirementAction, RequirementRules
from pwevent.operators.noise import NumpyRandomness, Randomness
from pwevent.operators.policies import MechanismSpec, charge_slot
from pwevent.operators.slot_release import SlotGroups, SlotOutcome, SlotRelease
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.population import ClassId, MembershipChange, Population, UserRequirement
from pwevent.state.release_history import ReleaseHistory
from pwevent.state.requirements import DEFAULT_MIN_SLOT_EPSILON, DynamicRequirement
from pwevent.state.spend_log import ledger_record, member_record, spend_record

SpendSink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Projection:
    """A backward requirement that was below what its window had already spent (section 7)."""

    slot: int
    ledger: str
    members: int
    requested: float
    projected: float
    statistic: str | None = None

    def reject(self) -> dict[str, Any]:
        """The reject / dead-letter record that reports the projection."""
        where = f"statistic {self.statistic}, " if self.statistic is not None else ""
        detail = (f"{where}ledger {self.ledger} ({self.members} users): backward epsilon {self.requested} is below "
                  f"the {self.projected:.6g} its window already spent; projected, the users spend 0 now")
        ledger = {"ledger": self.ledger, "slot": self.slot}
        original = orjson.dumps(ledger if self.statistic is None else {"statistic": self.statistic, **ledger}).decode()
        return reject_record("requirements", f"slot {self.slot}", Reason.INFEASIBLE_BACKWARD, detail, original)


class Engine:
    """Runs one mechanism over a population, slot by slot."""

    def __init__(
        self,
        spec: MechanismSpec,
        d: int,
        rng: Randomness,
        horizon: int,
        spend_sink: SpendSink | None = None,
        last_release: np.ndarray | None = None,
        floor: float = DEFAULT_MIN_SLOT_EPSILON,
        default_requirement: UserRequirement | None = None,
        share: float = 1.0,
    ) -> None:
        """`last_release`: r_0, the histogram the first dissimilarity compares with (zeros by
        default; a public earlier release when a run continues another). `floor`: the per-slot
        budget floor, caps.min_slot_epsilon (docs/mechanisms.md, Budget floor).
        `default_requirement`: the configured one, for `declare_default`. `share`: the part of each
        user's requirement this engine's ledgers spend (one statistic of several: SharedBudget)."""
        self.spec = spec
        self.d = d
        self.horizon = horizon
        self.rng = rng
        self.floor = floor
        self.rules = RequirementRules(spec, horizon)
        self.membership = Membership(self.rules, default_requirement)
        self.population = Population(self.rules.new_ledger, share)
        self.release = SlotRelease(d, rng)
        self.history = ReleaseHistory.start(d, last_release)
        self._sink = spend_sink
        # Users the engine tracks itself (replay, evaluation): dense index -> class code, name, declared.
        self._class_code = np.full(0, -1, dtype=np.int64)
        self._codes: dict[ClassId, int] = {}
        self._code_ids: list[ClassId] = []
        self._names: dict[int, str] = {}
        self._declared: dict[int, UserRequirement] = {}
        self._index: dict[str, int] = {}

    # -- membership -------------------------------------------------------------------------------

    def apply(self, change: MembershipChange) -> None:
        """A membership change for the next slot to decide. A change of a slot already decided (only
        after a job resumed without state, docs/streaming.md) is in force from the next slot."""
        since = self.history.decided + 1
        if change.slot > since:
            raise ValueError(f"change of slot {change.slot} given but the engine is at slot {since}")
        created = self.population.apply(change, since)
        if self._sink:
            if created is not None:
                self._sink(ledger_record(created.id, created.ledger.requirement, created.since, created.parent))
            self._sink(member_record(change.user, change.target, since))

    def declare(self, name: str, slot: int, requested: UserRequirement) -> RequirementAction:
        """A requirement record of user `name` in force from `slot` on: register, change, ignore or
        reject, by the same `Membership` rule as the streaming job."""
        index = self._index.get(name)
        applied = self.membership.apply(name, self._user_state(index), slot, requested)
        if applied.action.action not in (Action.REJECT, Action.IGNORE):
            self._take(name, index, applied, slot)
        return applied.action

    def _take(self, name: str, index: int | None, applied: Applied, slot: int) -> None:
        """Record what the membership rule decided for user `name`: its declaration and class."""
        if index is None:
            index = self._index[name] = len(self._index)
            self._names[index] = name
        assert applied.state.declared is not None
        self._declared[index] = applied.state.declared
        if applied.change is not None:
            self._check_slot(slot)
            self.apply(applied.change)
            self._set_class(index, applied.change.target)

    def declare_default(self, name: str, slot: int) -> bool:
        """User `name`, present at `slot` without a class, registered with the default requirement (by
        the same `Membership` rule as the job's keyed operator); False when there is no default."""
        index = self._index.get(name)
        applied = self.membership.apply_default(name, self._user_state(index), slot)
        if applied is None:
            return False
        self._take(name, index, applied, slot)
        return True

    def register(self, user: int, requirement: UserRequirement, slot: int, name: str | None = None) -> None:
        """A new user (dense index `user`) from `slot` on; raises on a requirement the rules refuse."""
        if user in self._declared:
            raise ValueError(f"user {user} is already registered")
        self._declare_index(user, requirement, slot, name)

    def redeclare(self, user: int, requirement: UserRequirement, slot: int, name: str | None = None) -> None:
        """A registered user's new requirement from `slot` on (dynamic mechanisms only)."""
        if user not in self._declared:
            raise ValueError(f"user {user} is not registered")
        self._declare_index(user, requirement, slot, name)

    def _declare_index(self, user: int, requirement: UserRequirement, slot: int, name: str | None) -> None:
        label = name or self._names.get(user) or str(user)
        if self._index.get(label, user) != user:
            raise ValueError(f"name {label!r} belongs to user {self._index[label]}")
        self._index[label] = user
        self._names[user] = label
        action = self.declare(label, slot, requirement)
        if action.action is Action.REJECT:
            raise InvalidRequirementError(action.detail)

    def _user_state(self, index: int | None) -> UserState:
        if index is None or index not in self._declared:
            return UserState()
        cid = self._code_ids[self._class_code[index]]
        cls = self.population.get(cid)
        assert cls is not None
        return UserState(self._declared[index], cid, cls.requirement)

    def _set_class(self, user: int, cid: ClassId) -> None:
        if user >= len(self._class_code):
            grown = np.full(max(user + 1, 2 * len(self._class_code), 1024), -1, dtype=np.int64)
            grown[: len(self._class_code)] = self._class_code
            self._class_code = grown
        code = self._codes.get(cid)
        if code is None:
            code = self._codes[cid] = len(self._code_ids)
            self._code_ids.append(cid)
        self._class_code[user] = code

    def class_of(self, user: int) -> ClassId | None:
        """The class of a user the engine tracks (None if not registered)."""
        if user >= len(self._class_code) or self._class_code[user] < 0:
            return None
        return self._code_ids[self._class_code[user]]

    def index_of(self, name: str) -> int | None:
        """The dense index of a registered user the engine tracks."""
        index = self._index.get(name)
        return index if index is not None and index in self._declared else None

    @property
    def users(self) -> int:
        return len(self._declared)

    def _check_slot(self, slot: int) -> None:
        if slot != self.history.decided + 1:
            expected = self.history.decided + 1
            raise ValueError(f"slot {slot} given but the engine is at slot {expected}: slots run 1, 2, ...")

    # -- slots ------------------------------------------------------------------------------------

    def step(self, slot: int, users: np.ndarray, values: np.ndarray) -> tuple[SlotOutcome, list[Projection]]:
        """Decide `slot`: users/values are the tracked users present in it (dense indices), one value each."""
        present: dict[ClassId, np.ndarray] = {}
        if len(users):
            users = np.asarray(users, dtype=np.int64)
            inside = users < len(self._class_code)
            codes = np.full(len(users), -1, dtype=np.int64)
            codes[inside] = self._class_code[users[inside]]
            if (codes < 0).any():
                unknown = users[codes < 0][:5].tolist()
                raise ValueError(f"slot {slot}: values given for unregistered users {unknown}")
            n = len(self._code_ids)
            counts = np.bincount(codes * self.d + np.asarray(values, dtype=np.int64), minlength=n * self.d)
            counts = counts.reshape(n, self.d)
            for code in np.flatnonzero(counts.any(axis=1)):
                present[self._code_ids[code]] = counts[code]
        return self.decide(slot, present)

    def decide(self, slot: int, present: Mapping[ClassId, np.ndarray]) -> tuple[SlotOutcome, list[Projection]]:
        """Decide `slot` from the count of present users per class and cell (classes with members)."""
        self._check_slot(slot)
        self.population.drop_empty_forks()
        classes = self.population.live()
        rows = {c.id: i for i, c in enumerate(classes)}
        counts = np.zeros((len(classes), self.d), dtype=np.int64)
        for cid, row in present.items():
            if cid not in rows:
                raise ValueError(f"slot {slot}: present users counted for class {cid!r}, which has no member")
            counts[rows[cid]] = row
        if (counts.sum(axis=1) > np.array([c.members for c in classes], dtype=np.int64)).any():
            raise ValueError(f"slot {slot}: more users present in a class than it has members")
        budgets = [charge_slot(self.spec.policy, cls.ledger, slot, self.floor) for cls in classes]
        outcome = self.release.decide(
            slot,
            SlotGroups(
                eps1=np.array([b.eps1 for b in budgets], dtype=float),
                eps2=np.array([b.eps2 for b in budgets], dtype=float),
                border=np.array([b.border for b in budgets], dtype=float),
                members=np.array([c.members for c in classes], dtype=np.int64),
                present=counts,
            ),
            self.history.last,
            self.spec.policy.scheduled_kind(slot),
            self.spec.policy.rescaled(slot),
        )
        outcome = replace(outcome, family=self.spec.policy.in_force())
        projections = []
        for cls, budget in zip(classes, budgets, strict=True):
            entry = cls.ledger.settle(slot, outcome.kind)
            requirement = cls.ledger.requirement
            if budget.projected_backward is not None:
                assert isinstance(requirement, DynamicRequirement)
                projections.append(
                    Projection(slot, cls.id, cls.members, requirement.backward.epsilon, budget.projected_backward)
                )
            if self._sink:
                self._sink(spend_record(cls.id, entry, requirement, self.rng.label, cls.members,
                                         budget.projected_backward))
        self.history.record(slot, outcome.kind, outcome.counts)
        self.spec.policy.observe(outcome)
        return outcome, projections

    # -- checkpoint -------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The engine's class-level state as JSON values (classes, release history, the policy's own
        state such as Adaptive's family, a seeded generator's state); users tracked by the engine
        itself are not included (the job tracks them in Membership)."""
        rng = self.rng
        return {
            "classes": self.population.to_json(),
            "history": self.history.to_bytes().decode(),
            "rng": rng.json_state() if isinstance(rng, NumpyRandomness) and rng.seeded else None,
            "policy": self.spec.policy.snapshot(),
        }

    def restore(self, obj: dict[str, Any]) -> None:
        """Continue from a `snapshot`."""
        self.population.restore(obj["classes"])
        self.history = ReleaseHistory.from_bytes(obj["history"].encode())
        self.spec.policy.restore(obj.get("policy"))
        if obj["rng"] is not None and isinstance(self.rng, NumpyRandomness):
            self.rng.set_json_state(obj["rng"])  # seeded test runs only
