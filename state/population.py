"""Ledger classes: users with identical requirement histories share one ledger.

Budgets depend only on requirements and on the global decisions, so users whose requirement
histories agree spend identically and can share one ledger (docs/architecture.md, "Ledger classes").
A class is named deterministically, so whoever knows a user's history can name the user's class
without asking anyone (the streaming job's keyed Membership operator does exactly that):
- a **root** class per requirement, `class_id(None, None, requirement)`. A registration joins the
  root class of its requirement, even one created at an earlier slot: the user's windows then sum
  over a subset of the class's slots, each spend at most the class's, so every bound the class keeps
  holds for the user too (docs/architecture.md gives the whole argument);
- a **fork**, `class_id(parent, slot, requirement)`, when members of `parent` change their (dynamic)
  requirement at `slot`: it starts as a copy of the parent's ledger. Members making the same change
  at the same slot land in the same fork.

The class count is therefore bounded by the distinct requirement histories, not by users or by
registration times. A class without members is not charged: a fork without members is dropped (its
name, which holds its slot, can never be used again), a root without members sleeps until a user
joins it again (its ledger simply has no entries for the slots it slept through).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeAlias

import orjson

from pwevent.state.ledger import DynamicLedger, Ledger, ledger_from_bytes
from pwevent.state.requirements import DynamicRequirement, Requirement, parse_requirement

UserRequirement: TypeAlias = Requirement | DynamicRequirement
ClassId: TypeAlias = str


@lru_cache(maxsize=65_536)
def class_id(parent: ClassId | None, since: int | None, requirement: UserRequirement) -> ClassId:
    """The name of a root class (`parent` and `since` None) or of a fork of `parent` at `since`."""
    if (parent is None) != (since is None):
        raise ValueError("a root class has neither parent nor since; a fork has both")
    text = orjson.dumps([parent, since, requirement.to_json()], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(text).hexdigest()[:20]


@dataclass(frozen=True)
class MembershipChange:
    """User `user` is represented by class `target` from `slot` on.

    `previous` is the user's class before (None for a registration); a registration's target is the
    root class of `requirement`, a change's target the fork (`previous`, `slot`, `requirement`).
    """

    slot: int
    user: str
    target: ClassId
    previous: ClassId | None
    requirement: UserRequirement

    def __post_init__(self) -> None:
        expected = class_id(self.previous, None if self.previous is None else self.slot, self.requirement)
        if self.target != expected:
            raise ValueError(f"class {self.target!r} is not the class of this change ({expected!r})")

    @classmethod
    def of(cls, slot: int, user: str, previous: ClassId | None, requirement: UserRequirement) -> MembershipChange:
        target = class_id(previous, None if previous is None else slot, requirement)
        return cls(slot, user, target, previous, requirement)

    def to_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "user": self.user, "target": self.target, "previous": self.previous,
                "requirement": self.requirement.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> MembershipChange:
        return cls(int(obj["slot"]), str(obj["user"]), str(obj["target"]),
                   None if obj["previous"] is None else str(obj["previous"]), parse_requirement(obj["requirement"]))


@dataclass
class LedgerClass:
    """One ledger and how many users it currently stands for; `requirement` is its members', the
    ledger's own (`ledger.requirement`) is the population's share of it."""

    id: ClassId
    ledger: Ledger
    requirement: UserRequirement
    parent: ClassId | None
    since: int
    members: int = 0


class Population:
    """The ledger classes and their member counts; users themselves are tracked by the caller.

    `share`: the part of every requirement this population's ledgers may spend, when several
    statistics share each user's budget (docs/mechanisms.md, "Several statistics under one budget").
    A class is still named by its members' requirements (so every statistic's population has the
    same classes and takes the same membership changes); its ledger runs at `share` of them.
    """

    def __init__(self, new_ledger: Callable[[UserRequirement, int], Ledger], share: float = 1.0) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share {share!r} is not in (0, 1]")
        self._new_ledger = new_ledger
        self.share = share
        self._classes: dict[ClassId, LedgerClass] = {}

    def get(self, cid: ClassId) -> LedgerClass | None:
        return self._classes.get(cid)

    def apply(self, change: MembershipChange, since: int | None = None) -> LedgerClass | None:
        """Move one user; returns the class if this change created it (with `since`, default the
        change's slot, as its first slot)."""
        created = None
        target = self._classes.get(change.target)
        if target is None:
            target = created = self._create(change, change.slot if since is None else since)
        if change.previous is not None:
            old = self._classes.get(change.previous)
            if old is None or old.members < 1:
                raise ValueError(f"slot {change.slot}: user {change.user!r} leaves class {change.previous!r}, "
                                 "which has no member")
            old.members -= 1
        target.members += 1
        return created

    def _create(self, change: MembershipChange, since: int) -> LedgerClass:
        if change.previous is None:
            ledger = self._new_ledger(change.requirement.scaled(self.share), since)
            return self._add(LedgerClass(change.target, ledger, change.requirement, None, since))
        parent = self._classes.get(change.previous)
        if parent is None:
            raise ValueError(f"slot {change.slot}: fork of unknown class {change.previous!r}")
        ledger = parent.ledger.copy()
        if not isinstance(ledger, DynamicLedger) or not isinstance(change.requirement, DynamicRequirement):
            raise ValueError("only dynamic ledgers take a new requirement")
        ledger.declare(change.requirement.scaled(self.share))
        return self._add(LedgerClass(change.target, ledger, change.requirement, change.previous, since))

    def _add(self, cls: LedgerClass) -> LedgerClass:
        self._classes[cls.id] = cls
        return cls

    def drop_empty_forks(self) -> None:
        """Forget forks without members (root classes without members sleep instead)."""
        for cid in [c.id for c in self._classes.values() if c.members == 0 and c.parent is not None]:
            del self._classes[cid]

    def live(self) -> list[LedgerClass]:
        """Classes with members, by id (an order that does not depend on arrival order)."""
        return sorted((c for c in self._classes.values() if c.members > 0), key=lambda c: c.id)

    def __len__(self) -> int:
        return len(self._classes)

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {"id": c.id, "ledger": c.ledger.to_bytes().decode(), "requirement": c.requirement.to_json(),
             "parent": c.parent, "since": c.since, "members": c.members}
            for c in self._classes.values()
        ]

    def restore(self, rows: list[dict[str, Any]]) -> None:
        self._classes = {
            row["id"]: LedgerClass(row["id"], ledger_from_bytes(row["ledger"].encode()),
                                   parse_requirement(row["requirement"]), row["parent"], int(row["since"]),
                                   int(row["members"]))
            for row in rows
        }
