"""Evaluation datasets in memory: slotted event tables, synthetic streams, personalized requirements.

The evaluator (jobs/evaluation/evaluate.py) drives the Engine from a `Dataset`: for each slot the registered
users present in it and one value each (docs/mechanisms.md section 1: several events of one user in one
slot collapse to the last). Real data comes in as an `EventTable` (jobs/evaluation/csv_loader.py,
jobs/evaluation/foursquare.py); synthetic streams are the paper's (section 12, jobs/common/synthetic.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.slots import FIRST_SLOT, SlotClock, iso
from pwevent.jobs.common.synthetic import SyntheticStream

SlotValues = tuple[np.ndarray, np.ndarray]


class Dataset(Protocol):
    """What the evaluator needs: domain size, population, horizon and each slot's (users, values)."""

    @property
    def name(self) -> str: ...

    @property
    def d(self) -> int: ...

    @property
    def users(self) -> int: ...

    @property
    def slots(self) -> int: ...

    def slot_values(self) -> Iterator[SlotValues]:
        """For t = 1..slots: (dense indices of the users present, their values), one value per user."""
        ...


@dataclass(frozen=True)
class EventTable:
    """Events of real data: dense user index, event time (epoch ms) and value (cell) per row.

    user_names[i] is the source's id of user i; labels[j] names cell j (a grid cell or category).
    """

    name: str
    user: np.ndarray
    time_ms: np.ndarray
    value: np.ndarray
    user_names: tuple[str, ...]
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.user)
        for field in ("time_ms", "value"):
            if len(getattr(self, field)) != n:
                raise ValueError(f"{field} has {len(getattr(self, field))} rows, user has {n}")
        if n and (self.value.min() < 0 or self.value.max() >= len(self.labels)):
            raise ValueError(f"values must be cells in [0, {len(self.labels)})")
        if n and (self.user.min() < 0 or self.user.max() >= len(self.user_names)):
            raise ValueError(f"user indices must be in [0, {len(self.user_names)})")

    @property
    def d(self) -> int:
        return len(self.labels)

    def slotted(self, slot_ms: int, origin_ms: int | None = None) -> SlottedEvents:
        """Cut time into slots of `slot_ms` from `origin_ms` (default: the first event, floored to the
        slot length) and keep each user's last event per slot (section 1)."""
        if slot_ms <= 0:
            raise ValueError(f"slot length must be positive, got {slot_ms} ms")
        if not len(self.user):
            raise ValueError(f"{self.name}: no events")
        origin = int(self.time_ms.min()) // slot_ms * slot_ms if origin_ms is None else origin_ms
        slot = SlotClock(origin, slot_ms).slot_of(self.time_ms)
        keep = slot >= FIRST_SLOT
        slot, user, value, time = slot[keep], self.user[keep], self.value[keep], self.time_ms[keep]
        order = np.lexsort((time, user, slot))
        slot, user, value = slot[order], user[order], value[order]
        last = np.ones(len(slot), dtype=bool)
        last[:-1] = (slot[1:] != slot[:-1]) | (user[1:] != user[:-1])
        return SlottedEvents(
            self.name, self.d, len(self.user_names), int(slot.max()), slot[last], user[last], value[last],
            origin, slot_ms,
        )

    def write_jsonl(self, path: str | Path) -> int:
        """The project's event format (docs/formats.md): one {user, time, value} per line; returns rows."""
        with Path(path).open("w", encoding="utf-8") as handle:
            for u, t, v in zip(self.user, self.time_ms, self.value, strict=True):
                handle.write(dumps({"user": self.user_names[u], "time": iso(int(t)), "value": int(v)}) + "\n")
        return len(self.user)


@dataclass(frozen=True)
class SlottedEvents:
    """An event table cut into slots, at most one value per user and slot; every user is registered."""

    name: str
    d: int
    users: int
    slots: int
    slot: np.ndarray
    user: np.ndarray
    value: np.ndarray
    origin_ms: int
    slot_ms: int

    def slot_values(self) -> Iterator[SlotValues]:
        bounds = np.searchsorted(self.slot, np.arange(1, self.slots + 2))
        for t in range(self.slots):
            rows = slice(bounds[t], bounds[t + 1])
            yield self.user[rows], self.value[rows]


@dataclass(frozen=True)
class SyntheticDataset:
    """A synthetic stream (section 12) with every user present in every slot, binary values."""

    stream: SyntheticStream

    @property
    def name(self) -> str:
        return self.stream.kind

    @property
    def d(self) -> int:
        return 2

    @property
    def users(self) -> int:
        return self.stream.users

    @property
    def slots(self) -> int:
        return self.stream.slots

    def slot_values(self) -> Iterator[SlotValues]:
        everybody = np.arange(self.stream.users)
        for values in self.stream.values():
            yield everybody, values
