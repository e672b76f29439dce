"""Per-user spend ledgers for fixed and dynamic requirements (docs/mechanisms.md sections 6, 7 and 9).

A ledger records what one user (or one class of users with identical requirement histories,
see `state.population`) spent at each slot, answers the window sums the budget policies need, and
refuses any spend that would break the user's invariant. Spends are recorded in two steps:
`charge` books the candidate budgets as spent before the slot's decision is known, `settle` lowers
them to what the decision really cost. A policy always sees the pessimistic view of pending slots.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from pwevent.state.errors import BudgetExceededError
from pwevent.state.requirements import DynamicRequirement, Requirement, exceeds
from pwevent.state.spend import Kind, SpendEntry, actual_spend


class _SpendHistory:
    """The spends of the last `horizon` slots, oldest first; slots without an entry spent nothing."""

    def __init__(self, horizon: int, entries: Iterable[SpendEntry] = ()) -> None:
        self.horizon = horizon
        self.entries: deque[SpendEntry] = deque(entries)

    @property
    def last_slot(self) -> int | None:
        return self.entries[-1].slot if self.entries else None

    def between(self, start: int, end: int) -> Iterator[SpendEntry]:
        """The entries of slots start..end inclusive, newest first."""
        for entry in reversed(self.entries):
            if entry.slot < start:
                break
            if entry.slot <= end:
                yield entry

    def sums(self, start: int, end: int) -> tuple[float, float]:
        """(spend1, spend2) summed over slots start..end inclusive."""
        s1 = s2 = 0.0
        for entry in self.between(start, end):
            s1 += entry.spend1
            s2 += entry.spend2
        return s1, s2

    def amounts(self, start: int, end: int) -> list[float]:
        """Every spend1 and spend2 of slots start..end inclusive, for a sum that does not depend on
        their order (`math.fsum`, the budget in view: jobs/common/service_metrics.py)."""
        return [amount for entry in self.between(start, end) for amount in (entry.spend1, entry.spend2)]

    def sums_since(self, starts: list[int], end: int) -> list[tuple[float, float]]:
        """[(spend1, spend2) over start..end for each start], in one pass from the newest entry."""
        order = sorted(range(len(starts)), key=lambda i: -starts[i])
        out: list[tuple[float, float]] = [(0.0, 0.0)] * len(starts)
        entries = reversed(self.entries)
        entry = next(entries, None)
        s1 = s2 = 0.0
        for i in order:
            while entry is not None and entry.slot >= starts[i]:
                if entry.slot <= end:
                    s1 += entry.spend1
                    s2 += entry.spend2
                entry = next(entries, None)
            out[i] = (s1, s2)
        return out

    def append(self, entry: SpendEntry) -> None:
        last = self.last_slot
        if last is not None and entry.slot <= last:
            raise ValueError(f"slot {entry.slot} charged after slot {last}: slots must increase")
        self.entries.append(entry)
        while self.entries and self.entries[0].slot <= entry.slot - self.horizon:
            self.entries.popleft()

    def settle(self, slot: int, kind: Kind) -> SpendEntry:
        for index in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[index]
            if entry.slot == slot:
                if entry.kind is not None:
                    if entry.kind is kind:
                        return entry
                    raise ValueError(f"slot {slot} already settled as {entry.kind.value}, not {kind.value}")
                spend1, spend2 = actual_spend(kind, entry.spend1, entry.spend2)
                settled = SpendEntry(slot, spend1, spend2, kind)
                self.entries[index] = settled
                return settled
            if entry.slot < slot:
                break
        raise KeyError(f"slot {slot} was never charged or has left the ledger's horizon")

    def pending(self) -> list[int]:
        return [e.slot for e in self.entries if e.kind is None]

    def to_json(self) -> list[list[Any]]:
        return [[e.slot, e.spend1, e.spend2, e.kind.value if e.kind else None] for e in self.entries]

    @staticmethod
    def entries_from_json(rows: list[list[Any]]) -> list[SpendEntry]:
        return [SpendEntry(int(r[0]), float(r[1]), float(r[2]), Kind(r[3]) if r[3] else None) for r in rows]


@dataclass(frozen=True)
class Publication:
    """The last slot that published (or may still publish) and what it cost this user."""

    slot: int
    spend2: float


class FixedLedger:
    """Spend ledger for a fixed requirement (w, E): any w consecutive slots spend at most E."""

    def __init__(self, requirement: Requirement, since: int) -> None:
        self.requirement = requirement
        self.since = since
        self._history = _SpendHistory(requirement.w)
        self._settled_publication: Publication | None = None

    def open_slot(self, slot: int) -> None:
        """Nothing changes between slots for a fixed requirement."""

    def spent(self, start: int, end: int) -> tuple[float, float]:
        return self._history.sums(start, end)

    def spends(self, start: int, end: int) -> list[float]:
        """Every spend1 and spend2 of slots start..end (`_SpendHistory.amounts`)."""
        return self._history.amounts(start, end)

    def last_publication(self) -> Publication | None:
        """Last slot that published, counting a pending slot with a publication budget as one."""
        for entry in reversed(self._history.entries):
            if entry.may_publish:
                return Publication(entry.slot, entry.spend2)
        return self._settled_publication

    def charge(self, slot: int, eps1: float, eps2: float) -> None:
        """Book candidate budgets for `slot`; refuse them if the window sum would exceed E (section 9,
        with its relative precision: `exceeds`)."""
        _check_budgets(slot, eps1, eps2)
        w, bound = self.requirement.w, self.requirement.epsilon
        s1, s2 = self._history.sums(slot - w + 1, slot - 1)
        total = s1 + s2 + eps1 + eps2
        if exceeds(total, bound):
            raise BudgetExceededError(slot, f"w={w}", total, bound)
        self._history.append(SpendEntry(slot, float(eps1), float(eps2)))

    def settle(self, slot: int, kind: Kind) -> SpendEntry:
        entry = self._history.settle(slot, kind)
        if kind is Kind.PUBLISH and entry.spend2 > 0:
            latest = self._settled_publication
            if latest is None or latest.slot < slot:
                self._settled_publication = Publication(slot, entry.spend2)
        return entry

    def pending_slots(self) -> list[int]:
        return self._history.pending()

    def copy(self) -> FixedLedger:
        return FixedLedger.from_bytes(self.to_bytes())

    def to_bytes(self) -> bytes:
        pub = self._settled_publication
        return orjson.dumps(
            {
                "type": "fixed",
                "requirement": self.requirement.to_json(),
                "since": self.since,
                "entries": self._history.to_json(),
                "publication": [pub.slot, pub.spend2] if pub else None,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> FixedLedger:
        obj = orjson.loads(data)
        ledger = cls(Requirement.from_json(obj["requirement"]), int(obj["since"]))
        ledger._history = _SpendHistory(ledger.requirement.w, _SpendHistory.entries_from_json(obj["entries"]))
        pub = obj["publication"]
        ledger._settled_publication = Publication(int(pub[0]), float(pub[1])) if pub else None
        return ledger


@dataclass(frozen=True)
class ForwardWindow:
    """The forward requirement in force at slot `tau`; it bounds slots tau .. tau + w - 1."""

    tau: int
    requirement: Requirement

    @property
    def last_slot(self) -> int:
        return self.tau + self.requirement.w - 1


class DynamicLedger:
    """Spend ledger for dynamic backward/forward requirements (docs/mechanisms.md section 7).

    `horizon` is how many past slots are kept: it must be at least the largest backward or forward
    window any declaration may name (the configured cap), or a widened window would miss old spends.
    """

    def __init__(self, requirement: DynamicRequirement, since: int, horizon: int) -> None:
        if horizon < max(requirement.backward.w, requirement.forward.w):
            raise ValueError(f"horizon {horizon} is shorter than the requirement's windows")
        self.requirement = requirement
        self.since = since
        self.horizon = horizon
        self._history = _SpendHistory(horizon)
        self._forward: deque[ForwardWindow] = deque()
        self._open: int | None = None

    def declare(self, requirement: DynamicRequirement) -> None:
        """Replace the requirement in force from the next slot opened on."""
        if max(requirement.backward.w, requirement.forward.w) > self.horizon:
            raise ValueError(f"window over the ledger's horizon {self.horizon}")
        self.requirement = requirement

    def open_slot(self, slot: int) -> None:
        """Enter slot t: its forward requirement joins T_{i,t}; windows that ended before t leave."""
        if self._open is not None and slot <= self._open:
            raise ValueError(f"slot {slot} opened after slot {self._open}")
        self._open = slot
        self._forward.append(ForwardWindow(slot, self.requirement.forward))
        self._forward = deque(f for f in self._forward if f.last_slot >= slot)

    def forward_windows(self) -> tuple[ForwardWindow, ...]:
        """T_{i,t} for the open slot: the slots whose forward window covers it."""
        return tuple(self._forward)

    def spent(self, start: int, end: int) -> tuple[float, float]:
        return self._history.sums(start, end)

    def spends(self, start: int, end: int) -> list[float]:
        """Every spend1 and spend2 of slots start..end (`_SpendHistory.amounts`)."""
        return self._history.amounts(start, end)

    def spent_since_forward(self, slot: int) -> list[tuple[float, float]]:
        """For each window of T_{i,t}, in order: (spend1, spend2) over tau .. slot - 1."""
        return self._history.sums_since([f.tau for f in self._forward], slot - 1)

    def backward_projection(self, slot: int) -> float | None:
        """The backward bound raised to what the window already spent, when EB is below it (section 7)."""
        backward = self.requirement.backward
        prior = sum(self._history.sums(slot - backward.w + 1, slot - 1))
        return prior if exceeds(prior, backward.epsilon) else None

    def charge(self, slot: int, eps1: float, eps2: float) -> None:
        """Book candidate budgets for the open slot; refuse them if a backward or forward bound breaks."""
        if slot != self._open:
            raise ValueError(f"slot {slot} charged but slot {self._open} is open")
        _check_budgets(slot, eps1, eps2)
        spend = eps1 + eps2
        backward = self.requirement.backward
        prior = sum(self._history.sums(slot - backward.w + 1, slot - 1))
        bound = max(backward.epsilon, prior)
        if exceeds(prior + spend, bound):
            raise BudgetExceededError(slot, f"backward w={backward.w}", prior + spend, bound)
        for window, spent in zip(self._forward, self.spent_since_forward(slot), strict=True):
            used = sum(spent) + spend
            if exceeds(used, window.requirement.epsilon):
                raise BudgetExceededError(
                    slot, f"forward from slot {window.tau} (w={window.requirement.w})", used, window.requirement.epsilon
                )
        self._history.append(SpendEntry(slot, float(eps1), float(eps2)))

    def settle(self, slot: int, kind: Kind) -> SpendEntry:
        return self._history.settle(slot, kind)

    def pending_slots(self) -> list[int]:
        return self._history.pending()

    def copy(self) -> DynamicLedger:
        return DynamicLedger.from_bytes(self.to_bytes())

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "type": "dynamic",
                "requirement": self.requirement.to_json(),
                "since": self.since,
                "horizon": self.horizon,
                "open": self._open,
                "entries": self._history.to_json(),
                "forward": [[f.tau, f.requirement.w, f.requirement.epsilon] for f in self._forward],
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> DynamicLedger:
        obj = orjson.loads(data)
        ledger = cls(DynamicRequirement.from_json(obj["requirement"]), int(obj["since"]), int(obj["horizon"]))
        ledger._history = _SpendHistory(ledger.horizon, _SpendHistory.entries_from_json(obj["entries"]))
        ledger._forward = deque(ForwardWindow(int(t), Requirement(int(w), float(e))) for t, w, e in obj["forward"])
        ledger._open = obj["open"]
        return ledger


Ledger = FixedLedger | DynamicLedger


def ledger_from_bytes(data: bytes) -> Ledger:
    """Decode either ledger type from its checkpoint bytes."""
    kind = orjson.loads(data)["type"]
    return FixedLedger.from_bytes(data) if kind == "fixed" else DynamicLedger.from_bytes(data)


def _check_budgets(slot: int, eps1: float, eps2: float) -> None:
    for name, value in (("eps1", eps1), ("eps2", eps2)):
        if not (value >= 0.0) or value == float("inf"):
            raise ValueError(f"slot {slot}: {name} must be finite and >= 0, got {value!r}")
