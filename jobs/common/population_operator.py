"""The streaming job's Population operator as a plain class (docs/streaming.md, "Topology"): what it
does with a row, when event time closes a slot, and what its state is, without Flink.

The Flink host (`jobs.streaming.hosts.PopulationHost`) only moves rows into it and its output into
routes, keeps the rows of open slots in list state, arms the slot timers and updates the metrics;
unit tests drive this class directly with the rows and watermarks they choose
(tests/jobs/test_population_operator.py).

The rows (`PopulationRow`), each of one slot: the count of present users of a class in a cell
(`SlotCount`) or membership changes (`SlotChanges`, a batch of the streaming job's Membership).
Events that count for no slot never reach it (jobs/common/event_rejections.py).

State (`snapshot` / `restore`): one JSON document, `{"version": 2, "engine": .., "smoother": ..}`;
version 1 (a pickled pair of the engine's bytes, with a hex-pickled generator state, and the
smoother's snapshot) is still read. With several statistics (docs/mechanisms.md, "Several statistics
under one budget") the document holds one engine and one smoother per statistic, in the
configuration's order: `{"version": 2, "engines": [..], "smoothers": [..]}`, and a count's `cell` is
the joint cell of every statistic's (jobs/common/statistic_cells.py). The rows a host keeps until
their slot ends: `row_to_json` / `row_from_json`, `{"version": 1, "kind": "present" | "groups", ..}`,
the changes in groups (`change_groups`); kind "change", one change, written by earlier releases, is
still read.
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import orjson

from pwevent.jobs.common.config import Config
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.records import reject_record
from pwevent.jobs.common.release import release_record
from pwevent.jobs.common.service_metrics import SlotReport
from pwevent.jobs.common.shared_budget import SharedBudget
from pwevent.jobs.common.statistic_cells import joint_size, split_cells
from pwevent.operators.noise import Randomness, pcg64_state_to_json
from pwevent.state.population import MembershipChange
from pwevent.state.release_history import ReleaseHistory
from pwevent.state.requirements import parse_requirement

#: The version `snapshot` writes.
STATE_VERSION = 2


@dataclass(frozen=True)
class SlotCount:
    """`n` present users of class `cls` in `cell` at `slot`."""

    slot: int
    cls: str
    cell: int
    n: int


@dataclass(frozen=True)
class SlotChanges:
    """Membership changes, each in force from its own `slot`, arriving for slot `slot`."""

    slot: int
    changes: tuple[MembershipChange, ...]


PopulationRow = SlotCount | SlotChanges


def change_groups(changes: tuple[MembershipChange, ...]) -> list[dict[str, Any]]:
    """`changes` as JSON, grouped: one {"slot", "target", "previous", "requirement", "users"} per
    (slot, target, previous, requirement), in the order of their first change, users in order."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for change in changes:
        key = (change.slot, change.target, change.previous, change.requirement)
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"slot": change.slot, "target": change.target, "previous": change.previous,
                                   "requirement": change.requirement.to_json(), "users": []}
        group["users"].append(change.user)
    return list(groups.values())


def changes_of_groups(groups: list[dict[str, Any]], slot: int | None = None) -> tuple[MembershipChange, ...]:
    """The changes of `change_groups`' groups (each group's "slot", or `slot` for groups without one,
    as `pwevent.flink.membership.ChangeBatches` writes them); each checked against its class id."""
    out: list[MembershipChange] = []
    for group in groups:
        at = int(group["slot"]) if slot is None else slot
        requirement = parse_requirement(group["requirement"])
        target, previous = str(group["target"]), None if group["previous"] is None else str(group["previous"])
        out += [MembershipChange(at, str(user), target, previous, requirement) for user in group["users"]]
    return tuple(out)
#: The version `row_to_json` writes.
ROW_VERSION = 1


def row_to_json(row: PopulationRow) -> bytes:
    """A row `on_row` said to keep (a count or a change), as versioned JSON for the host's state until
    its slot ends."""
    if isinstance(row, SlotCount):
        obj: dict[str, Any] = {"kind": "present", "slot": row.slot, "cls": row.cls, "cell": row.cell, "n": row.n}
    else:
        obj = {"kind": "groups", "slot": row.slot, "groups": change_groups(row.changes)}
    return orjson.dumps({"version": ROW_VERSION, **obj})


def row_from_json(data: bytes) -> SlotCount | SlotChanges:
    """A row `row_to_json` wrote (ValueError for another version or kind)."""
    obj = orjson.loads(data)
    if obj.get("version") != ROW_VERSION:
        raise ValueError(f"kept population row of version {obj.get('version')!r}; this release reads {ROW_VERSION}")
    if obj["kind"] == "present":
        return SlotCount(int(obj["slot"]), str(obj["cls"]), int(obj["cell"]), int(obj["n"]))
    if obj["kind"] == "groups":
        return SlotChanges(int(obj["slot"]), changes_of_groups(obj["groups"]))
    if obj["kind"] == "change":
        return SlotChanges(int(obj["slot"]), (MembershipChange.from_json(obj["change"]),))
    raise ValueError(f"kept population row of kind {obj['kind']!r}")


@dataclass
class Emitted:
    """What the operator hands on: releases (slot, record), spend-log lines, dead letters (records
    of docs/schemas/dead-letter.schema.json) and one report per decided slot (the metrics)."""

    releases: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    reports: list[SlotReport] = field(default_factory=list)


@dataclass(frozen=True)
class Closed:
    """The outcome of a slot end: what was emitted, the rows of later slots still open, and the slot
    whose end to wait for next (None once a bounded input has ended)."""

    emitted: Emitted
    rest: list[PopulationRow]
    next_slot: int | None


class PopulationOperator:
    """The population, its ledger classes and the release step (`Engine`), over the rows of one key.

    A row arrives before the watermark that closes its slot (`on_row` says whether to keep it until
    then); `on_slot_end(slot, rows, ended)` applies the membership changes of every slot not yet
    decided up to `slot`, in user order, decides each slot from its counts per (class, cell), settles
    every class at once and emits the release, the spend-log lines (the slot's `utilisation` record
    last, as the replay writes it: `SharedBudget.budget_view`) and the projections' dead letters.
    Every slot from the first (or after a resume point) is decided, in order, whether or not any row
    arrived for it."""

    def __init__(self, config: Config, rng: Randomness) -> None:
        self.config = config
        self.rng = rng
        self._lines: list[dict[str, Any]] = []
        self.budget = SharedBudget(config, rng, self._lines.append)
        self.engine: Engine = self.budget.engines[0]
        self.smoothers = [config.smoother(statistic) for statistic in config.statistics]
        self.smoother = self.smoothers[0]

    @property
    def decided(self) -> int:
        """The last slot decided (0: none)."""
        return self.engine.history.decided

    def resume_after(self, slot: int, counts: tuple[int, ...], publication: int | None) -> None:
        """Continue after `slot`, whose release was `counts`, the last publication at `publication`
        (a job without state resuming after its release topic's last audited release)."""
        if len(self.budget.engines) > 1:
            raise ValueError("a job with several statistics does not resume after its last release")
        self.engine.history = ReleaseHistory(np.asarray(counts, dtype=np.int64), publication, slot)

    def on_row(self, row: PopulationRow) -> tuple[bool, Emitted]:
        """Take `row`: True to keep it until its slot's end; and what it emits now (the dead letter of
        a count whose slot was decided before it came; the spend-log lines
        of a change of a slot decided before a resume, which is in force from the next slot)."""
        emitted = Emitted()
        if row.slot <= self.decided:
            if isinstance(row, SlotChanges):
                for change in sorted(row.changes, key=lambda c: c.user):
                    for engine in self.budget.engines:
                        engine.apply(change)
                emitted.audit.extend(self._take_lines())
            elif isinstance(row, SlotCount):  # its slot was decided without it: never dropped silently
                emitted.dead_letters.append(reject_record(
                    "events", f"slot {row.slot}", Reason.LATE,
                    f"{row.n} events of class {row.cls} in cell {row.cell} were counted after slot {row.slot}"
                    " was decided", ""))
            return False, emitted
        return True, emitted

    def on_slot_end(self, slot: int, rows: list[PopulationRow], ended: bool) -> Closed:
        """Event time has passed the end of `slot`: decide every slot after the last decided one up to
        `slot` from the kept `rows`, or, when `ended` (a bounded input is over and every timer fires),
        up to the last slot of a row at or before `slot`; the rows of later slots are handed back."""
        changes: dict[int, list[MembershipChange]] = defaultdict(list)
        counts: dict[int, dict[str, np.ndarray]] = defaultdict(dict)
        rest: list[PopulationRow] = []
        joint = joint_size(self.config.statistics)
        for row in rows:
            if row.slot > slot:
                rest.append(row)
            elif isinstance(row, SlotChanges):
                changes[row.slot].extend(row.changes)
            elif isinstance(row, SlotCount):
                counts[row.slot].setdefault(row.cls, np.zeros(joint, dtype=np.int64))[row.cell] += row.n
        last = max([*changes, *counts, self.decided]) if ended else slot
        emitted = Emitted()
        for t in range(self.decided + 1, last + 1):
            for change in sorted(changes.pop(t, []), key=lambda c: c.user):
                for engine in self.budget.engines:
                    engine.apply(change)
            present = counts.pop(t, {})
            live = {c.id for c in self.engine.population.live()}
            for cls in [c for c in present if c not in live]:  # cannot happen: a change precedes its counts
                emitted.dead_letters.append(reject_record(
                    "events", f"slot {t}", Reason.UNKNOWN_USER,
                    f"{int(present.pop(cls).sum())} events counted for class {cls}, which has no member", ""))
            outcomes = []
            for k, (statistic, engine) in enumerate(zip(self.config.statistics, self.budget.engines, strict=True)):
                outcome, projections = engine.decide(t, self._marginals(present, k))
                outcomes.append(outcome)
                emitted.audit.extend(self._take_lines())
                emitted.dead_letters.extend(replace(p, statistic=statistic.name).reject() for p in projections)
                emitted.releases.append((t, release_record(outcome, self.config, self.rng.label, self.smoothers[k],
                                                           statistic)))
            shares = self.budget.budget_view(t)  # the slot's utilisation record, the metric's numbers
            emitted.audit.extend(self._take_lines())
            classes = self.engine.population.live()
            emitted.reports += [SlotReport.of(t, outcome.kind.value, outcome.threshold, classes, utilisation=shares)
                                for outcome in outcomes]
        return Closed(emitted, rest, None if ended else slot + 1)

    def _marginals(self, present: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
        """Statistic k's count per class and cell from the joint cells' counts (the joint counts
        themselves with one statistic)."""
        statistics = self.config.statistics
        if len(statistics) == 1:
            return present
        d = statistics[k].domain.d
        cells = np.array([split_cells(joint, statistics)[k] for joint in range(joint_size(statistics))])
        return {cls: np.bincount(cells, weights=row, minlength=d).astype(np.int64) for cls, row in present.items()}

    def _take_lines(self) -> list[dict[str, Any]]:
        lines, self._lines[:] = list(self._lines), []
        return lines

    # -- state ------------------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The operator's state, version `STATE_VERSION` (the module docstring)."""
        smoothers = [smoother.snapshot() if smoother is not None else None for smoother in self.smoothers]
        if len(self.smoothers) > 1:
            return orjson.dumps({"version": STATE_VERSION, "engines": [e.snapshot() for e in self.budget.engines],
                                 "smoothers": smoothers})
        return orjson.dumps({"version": STATE_VERSION, "engine": self.engine.snapshot(), "smoother": smoothers[0]})

    def restore(self, data: bytes) -> None:
        """Continue from a `snapshot` of this version or of version 1."""
        if data[:1] == b"{":
            obj = orjson.loads(data)
            if obj.get("version") != STATE_VERSION:
                raise ValueError(f"population state of version {obj.get('version')!r}; this release reads "
                                 f"versions 1 and {STATE_VERSION}")
            if "engines" in obj:
                self._restore_statistics(obj["engines"], obj["smoothers"])
                return
            engine, smoother = obj["engine"], obj["smoother"]
        else:  # version 1: pickle.dumps((engine bytes, smoother snapshot)), written by this job's own state
            engine_bytes, smoother = pickle.loads(data)  # noqa: S301 - the job's own checkpoint
            engine = orjson.loads(engine_bytes)
            if engine.get("rng") is not None:
                engine["rng"] = pcg64_state_to_json(pickle.loads(bytes.fromhex(engine["rng"])))  # noqa: S301
        self._restore_statistics([engine], [smoother])

    def _restore_statistics(self, engines: list[dict[str, Any]], smoothers: list[Any]) -> None:
        if len(engines) != len(self.budget.engines):
            raise ValueError(f"population state of {len(engines)} statistics; this configuration has "
                             f"{len(self.budget.engines)}")
        for engine, state in zip(self.budget.engines, engines, strict=True):
            engine.restore(state)
        for smoother, state in zip(self.smoothers, smoothers, strict=True):
            if smoother is not None and state is not None:
                smoother.restore(state)
