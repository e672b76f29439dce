"""Ledger classes: users with identical requirement histories share one ledger.

Budgets depend only on requirements and on the global decisions, so two users who registered at
the same slot with the same requirement, and changed it identically since, spend identically. A
class is identified by (parent class, slot, requirement): a root class by (None, registration
slot, requirement), a class forked when some of its members change their requirement at a slot by
(old class, slot, new requirement). Members of one class who make the same change at the same
slot land in the same new class, which starts as a copy of the old ledger. A population of
millions with a handful of requirement levels therefore costs a handful of ledgers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np

from pwevent.state.ledger import DynamicLedger, Ledger
from pwevent.state.requirements import DynamicRequirement, Requirement

UserRequirement: TypeAlias = Requirement | DynamicRequirement
ClassKey: TypeAlias = tuple[int | None, int, UserRequirement]


@dataclass
class LedgerClass:
    """One ledger and how many users it currently stands for."""

    id: int
    ledger: Ledger
    requirement: UserRequirement
    parent: int | None
    since: int
    members: int = 0
    user_sample: list[int] = field(default_factory=list)


class Population:
    """Registered users (dense indices 0..n-1) mapped to ledger classes."""

    def __init__(self, new_ledger: Callable[[UserRequirement, int], Ledger]) -> None:
        self._new_ledger = new_ledger
        self._class_of = np.full(0, -1, dtype=np.int64)
        self._classes: dict[int, LedgerClass] = {}
        self._by_key: dict[ClassKey, int] = {}
        self._next_id = 0
        self.created: list[LedgerClass] = []  # classes created since the caller last drained it

    def _grow(self, user: int) -> None:
        if user >= len(self._class_of):
            grown = np.full(max(user + 1, 2 * len(self._class_of), 1024), -1, dtype=np.int64)
            grown[: len(self._class_of)] = self._class_of
            self._class_of = grown

    def class_of(self, user: int) -> LedgerClass | None:
        if user >= len(self._class_of) or self._class_of[user] < 0:
            return None
        return self._classes[int(self._class_of[user])]

    def requirement_of(self, user: int) -> UserRequirement | None:
        cls = self.class_of(user)
        return cls.requirement if cls else None

    def _class_for(self, key: ClassKey, ledger: Callable[[], Ledger]) -> LedgerClass:
        cid = self._by_key.get(key)
        if cid is None:
            parent, slot, requirement = key
            cid = self._next_id
            self._next_id += 1
            self._classes[cid] = LedgerClass(cid, ledger(), requirement, parent, slot)
            self._by_key[key] = cid
            self.created.append(self._classes[cid])
        return self._classes[cid]

    def _move(self, user: int, target: LedgerClass) -> None:
        old = self.class_of(user)
        if old is not None:
            old.members -= 1
            if old.members == 0:
                del self._classes[old.id]
                self._by_key = {k: v for k, v in self._by_key.items() if v != old.id}
        self._class_of[user] = target.id
        target.members += 1
        if len(target.user_sample) < 3:
            target.user_sample.append(user)

    def register(self, user: int, requirement: UserRequirement, slot: int) -> LedgerClass:
        """A new user, whose requirement holds from `slot` on."""
        self._grow(user)
        if self._class_of[user] >= 0:
            raise ValueError(f"user {user} is already registered")
        target = self._class_for((None, slot, requirement), lambda: self._new_ledger(requirement, slot))
        self._move(user, target)
        return target

    def redeclare(self, user: int, requirement: DynamicRequirement, slot: int) -> LedgerClass:
        """A registered user's new dynamic requirement, in force from `slot` on (section 7)."""
        old = self.class_of(user)
        if old is None:
            raise ValueError(f"user {user} is not registered")
        if old.requirement == requirement:
            return old
        ledger = old.ledger
        if not isinstance(ledger, DynamicLedger):
            raise ValueError("only dynamic ledgers take a new requirement")

        def fork() -> Ledger:
            copy = ledger.copy()
            copy.declare(requirement)
            return copy

        target = self._class_for((old.id, slot, requirement), fork)
        self._move(user, target)
        return target

    def classes(self) -> Iterator[LedgerClass]:
        """The classes that currently have members, in creation order."""
        return iter(list(self._classes.values()))

    def class_index(self, users: np.ndarray) -> np.ndarray:
        """Class id of each given registered user (vectorised; -1 for unregistered)."""
        users = np.asarray(users, dtype=np.int64)
        out = np.full(len(users), -1, dtype=np.int64)
        inside = users < len(self._class_of)
        out[inside] = self._class_of[users[inside]]
        return out

    def drain_created(self) -> list[LedgerClass]:
        created, self.created = self.created, []
        return created
