"""The rows between the streaming job's operators as PyFlink types and their Python readers
(docs/streaming.md, "Topology"; the stages of jobs/streaming/graph.py hand them on, the hosts of
jobs/streaming/hosts.py read and write them). Their layouts are the contract's
(jobs/streaming/jvm_contract), which the Java operators share.

Records between the operators:
- `PARSED_EVENT`: the reference parser's result for a record, Row(user, time_ms, cell, partition,
  offset, original, path): an event it accepted (`TimePath.SLOW_ACCEPTED`), or a refusal
  (`TimePath.SLOW_REJECTED`, only partition and offset set; the dead letter is a side output); it
  joins the fast path's rows (`pwevent.flink.parsing.FastPathSplit`, the same shape) before
  `pwevent.flink.time.ValidTime`.
- `PARSED_REQUIREMENT`: the same shape, the requirements' reference parser's row for a record, into
  `pwevent.flink.parsing.RequirementOrder` beside the fast path's: a record it accepted
  (`TimePath.SLOW_ACCEPTED`, `original` its `RequirementPayload`, `cell` null) or a refusal
  (`TimePath.SLOW_REJECTED`).
- `REJECTED_EVENT`: Row(slot, reason, user, partition, offset, original): a valid event that counts
  for no slot (`pwevent.flink.time.SlotJudge` found it `late` or `too_far_ahead`, or the class join found
  no class for its user, `unknown_user`), into its dead letter at the job's parallelism
  (`rejected_event` reads it as `jobs.common.event_rejections.RejectedEvent`).
- `POPULATION_IN`: Row(slot, present, change), exactly one of the last two set:
  `present` (`jvm_contract.POPULATION_PRESENT`: the count `n` of present users of class `cls` in `cell` at
  `slot`) or `change` (a batch of membership changes, a JSON array of groups,
  `pwevent.flink.membership.ChangeBatches`); keyed by a constant in Java. One stream, so
  that the SQL behind it (the window that sums the counts) is planned, and run, once;
  `population_row` reads it by field name as the operator's typed row (`kept_row`: as the
  Population's host keeps it). `POPULATION_START` is one more such row, from a one-row source at
  the job's start: an empty batch of changes of slot 0, which arms the Population's first timer
  before any record is read (docs/streaming.md, "Time").
- `POPULATION_OUT`: Row(route, k, v): "release" (k = slot), "audit" (v: lines joined by "\n", each
  one message of the audit topic) or "dead".
"""

from __future__ import annotations

from typing import Any

import orjson
from pyflink.common import Row
from pyflink.common.typeinfo import Types
from pyflink.datastream import OutputTag

from pwevent.jobs.common.event_rejections import RejectedEvent
from pwevent.jobs.common.population_operator import (
    PopulationRow,
    SlotChanges,
    SlotCount,
    changes_of_groups,
    row_from_json,
)
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.streaming import jvm_contract
from pwevent.jobs.streaming.jvm_contract import FieldType, RowLayout, TimePath
from pwevent.state.population import MembershipChange

DEAD_LETTERS = OutputTag("dead-letters", Types.STRING())


def pyflink_type(layout: RowLayout) -> Any:
    """The PyFlink type of a row layout of the contract (jobs/streaming/jvm_contract)."""
    return Types.ROW_NAMED(layout.names, [_pyflink_field(kind) for _, kind in layout.fields])


def _pyflink_field(kind: FieldType | RowLayout) -> Any:
    if isinstance(kind, RowLayout):
        return pyflink_type(kind)
    return {FieldType.STRING: Types.STRING(), FieldType.INT: Types.INT(), FieldType.LONG: Types.LONG(),
            FieldType.BOOLEAN: Types.BOOLEAN(), FieldType.BYTES: Types.PRIMITIVE_ARRAY(Types.BYTE())}[kind]


def parsed_row(path: TimePath, partition: int, offset: int, **fields: Any) -> Row:
    """A `PARSED_EVENT` / `PARSED_REQUIREMENT` row of `path`, the other fields by name (the rest null)."""
    return Row(*jvm_contract.PARSED.values(path=int(path), partition=partition, offset=offset, **fields))


PARSED_EVENT = pyflink_type(jvm_contract.PARSED)
PARSED_REQUIREMENT = PARSED_EVENT
REJECTED_EVENT = pyflink_type(jvm_contract.REJECTED_EVENT)
POPULATION_IN = pyflink_type(jvm_contract.POPULATION_IN)
POPULATION_START = Row(slot=0, present=None, change="[]")
POPULATION_OUT = pyflink_type(jvm_contract.POPULATION_OUT)
RELEASE_ROUTE, AUDIT_ROUTE, DEAD_ROUTE = (route.value for route in jvm_contract.Route)
#: A watermark at or above this is the end of a bounded input, not a slot end.
END_OF_TIME_MS = 2**61


def population_row(row: Row) -> PopulationRow:
    """A `POPULATION_IN` row as the typed row of the Population operator, by its fields' names."""
    slot = int(row.slot)
    if row.change is not None:
        return SlotChanges(slot, changes_of_groups(orjson.loads(row.change), slot))
    present = row.present
    return SlotCount(slot, str(present.cls), int(present.cell), int(present.n))


def rejected_event(row: Row) -> RejectedEvent:
    """A `REJECTED_EVENT` row as its typed row, by its fields' names."""
    return RejectedEvent(int(row.slot), Reason(row.reason), str(row.user), int(row.partition), int(row.offset),
                         bytes(row.original or b""))


def kept_row(stored: bytes | tuple[Any, ...]) -> SlotCount | SlotChanges:
    """A row of the Population host's list state: `row_to_json`'s form, or the tuple of the ten
    positional values releases before it kept (slot, cls, cell, n, change, reason, user, partition,
    offset, original: a count or a change; restored from their savepoints and rewritten in the new
    form at the next slot end)."""
    if isinstance(stored, bytes):
        return row_from_json(stored)
    slot, cls, cell, n, change = stored[:5]
    if change is not None:
        return SlotChanges(int(slot), (MembershipChange.from_json(orjson.loads(change)),))
    return SlotCount(int(slot), str(cls), int(cell), int(n))
