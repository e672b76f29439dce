"""Thin Flink hosts of the mechanism core (docs/streaming.md).

Every rule lives in the plain classes the replay uses too: parsing in `jobs.records`, requirement
checks and ledger construction in `jobs.engine.Engine`, budgets in `operators.policies.charge_slot`,
the release step in `operators.slot_release.SlotRelease`, the decision's cost in the ledger's
`settle` (`state.spend.actual_spend`), the message formats in `jobs.replay.release_record`,
`jobs.records.reject_record` and `state.spend_log`. These classes only move records, state and time.

Records between the operators. Every Python operator costs a Java-Python crossing per record in
thread mode (PyFlink chains Python operators only in process mode), so the records are shaped for
the Java operators between them: event time, keying and the split of UserLedger's output run in Java
(jobs/streaming/job.py).
- parsed input (`PARSED`): (Row(user, record), time_ms), record = ("e", user, time_ms, cell, order,
  position, original) or ("r", user, time_ms, requirement, order, position, original) pickled;
  `order` = (time_ms, partition, offset) decides which of several events of a user in one slot counts
  (the latest, ties by Kafka position).
- UserLedger output (`LEDGER_OUTPUT`): Row(route, text, slot, cell, eps1, eps2, border), route "slot"
  (a UserSlot: one per registered user per slot, cell -1 when absent, no text), "audit" (a spend log
  record as text) or "dead" (a dead letter as text).
- slot group (`SLOT_GROUP`, made in Java from the UserSlots of one slot, docs/streaming.md):
  Row(slot, cell, eps1, eps2, border, members), the users of the slot that share all five values.
- decision (read back from the release topic): (slot, kind).
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from typing import Any

import numpy as np
from pyflink.common import Row
from pyflink.common.typeinfo import Types
from pyflink.datastream import OutputTag
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, KeyedProcessFunction, ProcessFunction
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

from pwevent.jobs.common.config import Config
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.records import (
    Reason,
    Rejected,
    load_object,
    parse_event,
    parse_requirement_update,
    reject_record,
)
from pwevent.jobs.common.requirement_rules import Action, RequirementRules
from pwevent.jobs.offline.replay import release_record
from pwevent.operators.noise import NumpyRandomness, make_randomness
from pwevent.operators.policies import charge_slot
from pwevent.operators.slot_release import SlotGroups, SlotRelease
from pwevent.state.ledger import ledger_from_bytes
from pwevent.state.release_history import ReleaseHistory
from pwevent.state.spend import Kind
from pwevent.state.spend_log import ledger_record, member_record, spend_record

DEAD_LETTERS = OutputTag("dead-letters", Types.STRING())
PARSED = Types.TUPLE([Types.ROW([Types.STRING(), Types.PICKLED_BYTE_ARRAY()]), Types.LONG()])
LEDGER_OUTPUT = Types.ROW_NAMED(
    ["route", "v", "slot", "cell", "eps1", "eps2", "border"],
    [Types.STRING(), Types.STRING(), Types.LONG(), Types.INT(), Types.DOUBLE(), Types.DOUBLE(), Types.DOUBLE()],
)
SLOT_GROUP = Types.ROW_NAMED(
    ["slot", "cell", "eps1", "eps2", "border", "members"],
    [Types.LONG(), Types.INT(), Types.DOUBLE(), Types.DOUBLE(), Types.DOUBLE(), Types.LONG()],
)
SLOT_ROUTE, AUDIT_ROUTE, DEAD_ROUTE = "slot", "audit", "dead"
DECISIONS = MapStateDescriptor("decisions", Types.LONG(), Types.STRING())
#: A watermark at or above this is the end of a bounded input, not a slot end: no more slot timers.
END_OF_TIME_MS = 2**61
#: Largest release record read back (a release holds one count per cell, and `smoothed`).
MAX_RELEASE_BYTES = 64 << 20
#: Field name no record carries: `kafka.event_time: kafka` makes parse_event use the record timestamp.
_KAFKA_TIME_FIELD = "\0kafka-record-timestamp"


def _json(record: dict[str, Any] | list[Any]) -> str:
    return dumps(record)


def _text(route: str, text: str) -> Row:
    """A spend record or dead letter on UserLedger's output."""
    return Row(route, text, None, None, None, None, None)


def _position(topic: str, row: Row) -> dict[str, Any]:
    return {"topic": topic, "partition": int(row[1]), "offset": int(row[2])}


class ParseRecords(ProcessFunction):
    """Kafka row (value bytes, partition, offset, record timestamp in epoch ms) -> parsed input keyed
    by user with its event time (`PARSED`), or a dead letter (side output)."""

    def __init__(self, config: Config, source: str, topic: str, kafka_time: bool, max_lead_ms: int = 0) -> None:
        self.config = config
        self.source = source
        self.topic = topic
        self.max_lead_ms = max_lead_ms
        self.fields = (
            dataclasses.replace(config.events, time=_KAFKA_TIME_FIELD) if kafka_time else config.events
        )

    def process_element(self, row: Row, ctx: ProcessFunction.Context):  # type: ignore[override]
        raw: bytes = row[0] if row[0] is not None else b""
        position = _position(self.topic, row)
        config = self.config
        payload: Any
        try:
            if self.source == "events":
                event = parse_event(raw, self.fields, config.domain, row[3], config.max_record_bytes)
                kind, user, time_ms, payload = "e", event.user, event.time_ms, event.cell
            else:
                update = parse_requirement_update(raw, config.requirements, config.caps, config.max_record_bytes)
                kind, user, time_ms, payload = "r", update.user, update.time_ms, update.requirement
        except Rejected as err:
            yield DEAD_LETTERS, _json(reject_record(self.source, position, err.reason, err.detail, raw))
            return
        if config.clock.slot_of(time_ms) < 1:
            yield DEAD_LETTERS, _json(
                reject_record(self.source, position, Reason.BEFORE_ORIGIN, "time is before the configured origin", raw)
            )
            return
        if self.max_lead_ms and time_ms > time.time() * 1000 + self.max_lead_ms:
            ahead = f"time is more than flink.max_lead ({self.max_lead_ms} ms) ahead of the wall clock"
            yield DEAD_LETTERS, _json(reject_record(self.source, position, Reason.TOO_FAR_AHEAD, ahead, raw))
            return
        order = (time_ms, position["partition"], position["offset"])
        yield Row(user, (kind, user, time_ms, payload, order, position, raw)), time_ms


class ParseDecision(ProcessFunction):
    """A committed release read back from the release topic -> (slot, kind)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def process_element(self, row: Row, ctx: ProcessFunction.Context):  # type: ignore[override]
        raw: bytes = row[0] if row[0] is not None else b""
        position = _position(self.topic, row)
        try:
            release = load_object(raw, MAX_RELEASE_BYTES)
            slot, kind = release["slot"], Kind(release["kind"]).value
            if isinstance(slot, bool) or not isinstance(slot, int):
                raise TypeError(f"slot {slot!r} is not an integer")
            yield slot, kind
        except Rejected as err:
            yield DEAD_LETTERS, _json(reject_record("releases", position, err.reason, err.detail, raw))
        except (ValueError, KeyError, TypeError) as err:
            detail = f"not a release: {err}"
            yield DEAD_LETTERS, _json(reject_record("releases", position, Reason.UNPARSABLE, detail, raw))


class UserLedger(KeyedBroadcastProcessFunction):
    """One user's ledger, keyed by user id (docs/streaming.md, UserLedger).

    At each slot end (event-time timer) it settles the slots whose decisions came back, applies the
    requirement updates of the slot, charges the slot through `charge_slot` and emits one UserSlot.
    Everything it emits is a `LEDGER_OUTPUT` row on the main output, split in Java: PyFlink 2.2's
    thread mode drops the side-output routing of a KeyedBroadcastProcessFunction's on_timer
    (embedded/operations.py), and a Python splitter would cost a crossing per record.
    """

    def __init__(self, config: Config, decisions_kept: int) -> None:
        self.config = config
        self.decisions_kept = decisions_kept

    def open(self, runtime_context: Any) -> None:
        # Two states: the small per-user bookkeeping every event touches, and the ledger (its spend
        # history, up to the window or the configured cap) that only the slot timer reads and writes.
        self.state = runtime_context.get_state(ValueStateDescriptor("user", Types.PICKLED_BYTE_ARRAY()))
        self.ledger_state = runtime_context.get_state(ValueStateDescriptor("ledger", Types.PICKLED_BYTE_ARRAY()))
        self.clock = self.config.clock
        self.spec = self.config.mechanism_spec()
        # The replay's requirement rules: checks, register/redeclare/reject, ledger construction.
        # Decoded ledgers of this instance's users, so a timer skips the decode (the state, written on
        # every timer, stays the source of truth: a restarted operator starts with an empty cache).
        self._ledgers: dict[str, Any] = {}
        # Decisions known to this instance. A decision never changes once known (the first one
        # stands), so a copy saves the calls into the broadcast state, which stays the source of
        # truth after a restore (looked up on a miss).
        self._decisions: dict[int, str] = {}
        self.rules = RequirementRules(self.spec, self.config.caps.max_w)

    def _load(self) -> dict[str, Any]:
        st = self.state.value()
        return st if st is not None else {"registered": False, "declared": None, "cells": {}, "orphans": [],
                                          "reqs": [], "charged": {}}

    def _decision(self, ctx: Any, slot: int) -> str | None:
        """The kind of the committed release of `slot`, or None while it has not been read back."""
        kind = self._decisions.get(slot)
        if kind is None:
            decisions = ctx.get_broadcast_state(DECISIONS)
            if decisions.contains(slot):
                kind = self._decisions[slot] = decisions.get(slot)
        return kind

    def _timer(self, ctx: Any, slot: int) -> None:
        ctx.timer_service().register_event_time_timer(self.clock.end_ms(slot) - 1)

    def process_element(self, value: Any, ctx: Any):  # type: ignore[override]
        kind, user, time_ms, payload, order, position, original = value
        slot = self.clock.slot_of(time_ms)
        if self.clock.end_ms(slot) - 1 <= ctx.timer_service().current_watermark():
            yield _text(DEAD_ROUTE, _json(reject_record(
                "events" if kind == "e" else "requirements", position, Reason.LATE,
                f"slot {slot} had closed when the record arrived", original,
            )))
            return
        st = self._load()
        if kind == "r":
            st["reqs"].append((slot, order, payload, position, original))
            self._timer(ctx, slot)
        elif st["registered"]:
            best = st["cells"].get(slot)
            if best is None or order > best[0]:
                st["cells"][slot] = (order, payload)
        else:  # not registered (yet): decided at the slot's end
            st["orphans"].append((slot, order, payload, position, original))
            self._timer(ctx, slot)
        self.state.update(st)

    def process_broadcast_element(self, value: Any, ctx: Any):  # type: ignore[override]
        slot, kind = value
        decisions = ctx.get_broadcast_state(DECISIONS)
        if decisions.contains(slot):
            # The job writes one release per slot; a second one can only be foreign. The first
            # committed decision stands, so a later record cannot lower an already-known spend.
            return
        decisions.put(slot, kind)
        self._decisions[slot] = kind
        if slot > self.decisions_kept:
            decisions.remove(slot - self.decisions_kept)
            self._decisions.pop(slot - self.decisions_kept, None)
        return
        yield  # pragma: no cover - a generator that emits nothing

    def _apply_requirement(self, st: dict[str, Any], ledger: Any, user: str, slot: int, req: tuple[Any, ...]):
        """Register, redeclare, ignore or reject: `RequirementRules.requirement_action`, as the replay does."""
        _, _, requirement, position, original = req
        decision = self.rules.requirement_action(st["declared"], requirement)
        checked = decision.requirement
        if decision.action is Action.REJECT:
            assert decision.reason is not None
            rejected = reject_record("requirements", position, decision.reason, decision.detail, original)
            yield _text(DEAD_ROUTE, _json(rejected))
            return ledger
        if decision.action is Action.REGISTER:
            assert checked is not None
            ledger = self.rules.new_ledger(checked, slot)
            yield _text(AUDIT_ROUTE, _json(ledger_record(user, checked, slot, None)))
            yield _text(AUDIT_ROUTE, _json(member_record(user, user, slot)))
        elif decision.action is Action.REDECLARE and checked != ledger.requirement:
            ledger.declare(checked)
        st["declared"] = requirement
        return ledger

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        slot = self.clock.slot_of(timestamp)
        user = ctx.get_current_key()
        st = self._load()
        ledger = None
        if st["registered"]:
            ledger = self._ledgers.get(user)
            if ledger is None:  # first timer of this user since the operator (re)started
                ledger = ledger_from_bytes(self.ledger_state.value())
        if ledger is not None and st["charged"]:
            for done in sorted(st["charged"]):
                decision = self._decision(ctx, done)
                if decision is not None:
                    entry = ledger.settle(done, Kind(decision))
                    requirement, projected = st["charged"].pop(done)
                    yield _text(AUDIT_ROUTE, _json(spend_record(user, entry, requirement, 1, projected)))
        due = sorted((r for r in st["reqs"] if r[0] <= slot), key=lambda r: r[1])
        st["reqs"] = [r for r in st["reqs"] if r[0] > slot]
        for req in due:
            ledger = yield from self._apply_requirement(st, ledger, user, slot, req)
        best = st["cells"].pop(slot, None)
        orphans = [o for o in st["orphans"] if o[0] <= slot]
        st["orphans"] = [o for o in st["orphans"] if o[0] > slot]
        for o_slot, order, cell, position, original in orphans:
            if ledger is not None and o_slot == slot:
                if best is None or order > best[0]:
                    best = (order, cell)
            else:
                yield _text(DEAD_ROUTE, _json(reject_record(
                    "events", position, Reason.UNKNOWN_USER,
                    f"user {user!r} has no requirement in force at slot {o_slot}", original,
                )))
        for stale in [s for s in st["cells"] if s < slot]:  # cannot happen: timers fire in slot order
            del st["cells"][stale]
        if ledger is not None and ledger.since <= slot:
            budget = charge_slot(self.spec.policy, ledger, slot)
            st["charged"][slot] = (ledger.requirement, budget.projected_backward)
            if budget.projected_backward is not None:
                requested = ledger.requirement.backward.epsilon  # type: ignore[union-attr]
                yield _text(DEAD_ROUTE, _json(reject_record(
                    "requirements", f"slot {slot}", Reason.INFEASIBLE_BACKWARD,
                    f"user {user}: backward epsilon {requested} is below the {budget.projected_backward:.6g} "
                    "its window already spent; projected, the user spends 0 now",
                    _json({"ledger": user, "slot": slot}),
                )))
            cell = -1 if best is None else int(best[1])
            yield Row(SLOT_ROUTE, None, slot, cell, float(budget.eps1), float(budget.eps2), float(budget.border))
            if ctx.timer_service().current_watermark() < END_OF_TIME_MS:
                self._timer(ctx, slot + 1)
        if ledger is not None:
            self._ledgers[user] = ledger
            self.ledger_state.update(ledger.to_bytes())
            st["registered"] = True
        elif not st["reqs"] and not st["orphans"]:
            self.state.clear()  # an unknown user with nothing pending leaves no state behind
            return
        self.state.update(st)


def slot_groups(rows: list[tuple[int, int, float, float, float, int]], d: int) -> SlotGroups:
    """One slot's groups, (slot, cell or -1, eps1, eps2, border, members) each, as `SlotGroups`.

    A group holds users with the same budgets and cell; `SlotRelease.decide` aggregates by budget
    level anyway, so grouping changes nothing in the release (tests/jobs/test_flink_functions.py)."""
    cells = np.array([r[1] for r in rows], dtype=np.int64)
    members = np.array([r[5] for r in rows], dtype=np.int64)
    present = np.zeros((len(rows), d), dtype=np.int64)
    seen = np.flatnonzero(cells >= 0)
    present[seen, cells[seen]] = members[seen]
    return SlotGroups(
        eps1=np.array([r[2] for r in rows], dtype=float),
        eps2=np.array([r[3] for r in rows], dtype=float),
        border=np.array([r[4] for r in rows], dtype=float),
        members=members,
        present=present,
    )


class SlotReleaseHost(KeyedProcessFunction):
    """The global release step (one key, parallelism 1): decides every slot once, in slot order.

    Input: the slot groups (`SLOT_GROUP`) the Java window aggregation makes of UserLedger's UserSlots,
    keyed by a constant; all groups of a slot arrive before the watermark that passes its end."""

    def __init__(self, config: Config, seed: int | None) -> None:
        self.config = config
        self.seed = seed

    def open(self, runtime_context: Any) -> None:
        self.rows = runtime_context.get_list_state(ListStateDescriptor("slot-groups", Types.PICKLED_BYTE_ARRAY()))
        self.meta = runtime_context.get_state(ValueStateDescriptor("release", Types.PICKLED_BYTE_ARRAY()))
        self.rng = make_randomness(self.config.noise, self.seed)
        self.core = SlotRelease(self.config.domain.d, self.rng)
        self.spec = self.config.mechanism_spec()
        self.clock = self.config.clock
        self.smoother = self.config.smoother()
        self._restored = False
        self._timer_slot = 0  # the slot whose timer was registered last (timers are deduplicated anyway)

    def process_element(self, value: Row, ctx: Any):  # type: ignore[override]
        group = tuple(value)
        self.rows.add(group)
        if group[0] != self._timer_slot:
            ctx.timer_service().register_event_time_timer(self.clock.end_ms(group[0]) - 1)
            self._timer_slot = group[0]
        return
        yield  # pragma: no cover

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        slot = self.clock.slot_of(timestamp)
        d = self.config.domain.d
        meta = self.meta.value() or {"history": None, "rng": None, "smoother": None}
        history = ReleaseHistory.from_bytes(meta["history"]) if meta["history"] else ReleaseHistory.start(d)
        if not self._restored:
            self._restored = True
            if meta["rng"] is not None and isinstance(self.rng, NumpyRandomness):
                self.rng.rng.bit_generator.state = pickle.loads(meta["rng"])  # seeded test runs only
            if self.smoother is not None and meta.get("smoother") is not None:
                self.smoother.restore(meta["smoother"])
        due: dict[int, list[Any]] = {}
        rest = []
        for row in self.rows.get() or []:
            if row[0] <= slot:
                due.setdefault(row[0], []).append(row)
            else:
                rest.append(row)
        for t in range(history.decided + 1, slot + 1):
            outcome = self.core.decide(
                t, slot_groups(due.pop(t, []), d), history.last, self.spec.policy.scheduled_kind(t),
            )
            history.record(t, outcome.kind, outcome.counts)
            yield Row(str(t), _json(release_record(outcome, self.config, self.rng.label, self.smoother)))
        meta["history"] = history.to_bytes()
        meta["smoother"] = self.smoother.snapshot() if self.smoother is not None else None
        if isinstance(self.rng, NumpyRandomness) and self.seed is not None:
            meta["rng"] = pickle.dumps(self.rng.rng.bit_generator.state)
        self.meta.update(meta)
        # Groups of an already decided slot cannot arrive (timers fire before watermarks). Were one to,
        # it would be left out of `due` here: its users' ledgers charged the slot, so nothing spent
        # goes unrecorded (they are counted as spending, not as present).
        self.rows.update(rest)
