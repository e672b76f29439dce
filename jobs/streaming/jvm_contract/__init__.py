"""The contract between Python and the JVM: every value and row layout that the job's Java operators
(jobs/streaming/jvm) and its SQL share with Python, declared once. This is the list of the rules with
twins: each entry below names the Java (or SQL) place that uses it. The values come from their Python
owners (imported, never copied); `python -m pwevent.jobs.streaming.jvm_contract --write` renders them
as the Java package `pwevent.flink.contract` (jobs/streaming/jvm_contract/java.py), and
tests/streaming/test_jvm_contract.py fails when the checked-in Java differs from a fresh rendering.

Values (`Reasons`, `TimePaths`, `Routes`, `WholeRecords`, `Limits` in Java):
- `REASONS`: the dead letters' reasons the JVM writes (jobs/common/reasons.py `Reason`):
  `late` (`SlotJudge`, `UserMembership.receive`), `too_far_ahead` (`SlotJudge`, `Membership`),
  `invalid_requirement` and `requirement_change_under_fixed_mechanism` (`MembershipRule`),
  `superseded_before_origin` (`UserMembership.close`).
- `DETAILS`: the dead letters' details the JVM writes: `TOO_FAR_AHEAD_DETAIL` (`Membership`),
  `LATE_REQUIREMENT_DETAIL` (`UserMembership.receive`, a method of the slot in Java),
  `SUPERSEDED_BEFORE_ORIGIN_DETAIL` (`UserMembership.close`).
- `TIME_PATHS`: `TimePath`, the `path` of a `PARSED` row (`ValidTime`, `FastPathSplit`,
  `RequirementSplit`, `RequirementOrder`; Python: the reference parsers of jobs/streaming/hosts.py).
- `ROUTES`: `Route`, the `route` of a `POPULATION_OUT` row (`ReleaseWriter`; Python:
  `hosts.PopulationHost`, graph.py's dead-letter query).
- `WHOLE_RECORD_MEMBERS`: the members of a whole-records line, in their canonical order
  (jobs/common/kafka_record.py; `PositionedRecords` renders each record of an input read as whole
  Kafka records as that line).
- `LIMITS`: `FIRST_SLOT` (jobs/common/slots.py; `SlotRules`), `CONFLUENT_FRAME_BYTES`
  (jobs/common/avro_format.py; `EventTime.FRAME_BYTES`, `RecordGroups`, `AvroFields`),
  `PSEUDONYM_HEX_CHARS` (jobs/common/pseudonyms.py; `Pseudonyms`, the fast paths' user ids under
  `pseudonymise`).

Rows (a class per layout in Java: named field indices, `ARITY`, `TYPE` its RowTypeInfo, `SQL` its SQL
type; Python: jobs/streaming/rows.py's PyFlink types and the SQL of jobs/streaming/graph.py derive from
`ROWS`):
- `RECORD`: a Kafka record with its position (`PositionedRecords`; SQL: views `raw_events`,
  `raw_requirements`).
- `RECORD_GROUPS`: the row of the SQL table function `RecordGroups` (its output type hint,
  `RecordGroupsRow.SQL`; Python: jobs/streaming/event_sql.py's columns of it).
- `EVENT_VERDICT`, `REQUIREMENT_VERDICT`: the SQL fast paths' verdicts (graph.py's queries; input of
  `FastPathSplit`, `RequirementSplit`).
- `SLOW_RECORD`: a record for a reference parser (`FastPathSplit.SLOW`, `RequirementSplit.SLOW`;
  Python: `_ParseRecords`).
- `PARSED`: the two parsers' rows (`ValidTime.IN`, `RequirementOrder`; Python: `rows.PARSED_EVENT`,
  `rows.PARSED_REQUIREMENT`, written by the reference parsers).
- `TIMED`: the valid records, timed (`ValidTime.OUT`; read by `SlotJudge`, `Membership`).
- `PRESENT`: the events that count for their slot (`SlotJudge.PRESENT`; read by `FirstPresence`,
  `UserClassJoin`).
- `REJECTED_EVENT`: the events that count for no slot (`SlotJudge.REJECTED`; SQL: `reject_events`;
  Python: `rows.REJECTED_EVENT`, `rows.rejected_event`).
- `PRESENCE`: a user present at a slot (`FirstPresence.PRESENCE`, Membership's second input).
- `CHANGE`: a change of a user's class (`Membership.OUT`, `UserClassJoin`'s first input).
- `REFUSED_REQUIREMENT`: a requirement record that did not apply (`Membership.REJECTED`; Python:
  `hosts.RequirementRejections`).
- `CHANGE_BATCH`: a slot's changes in a batch (`ChangeBatches.OUT`; SQL: `population`).
- `CLASSED`: the latest event of a user in a slot with its class (`UserClassJoin.OUT`, `SlotCounts`;
  SQL: view `unknown_users`).
- `SLOT_COUNT`: a count per (slot, class, cell) (`SlotCounts.OUT`; SQL: view `slot_counts`).
- `POPULATION_PRESENT`, `POPULATION_IN`: the Population's input (SQL and Python only: no Java).
- `POPULATION_OUT`: the Population's output (`ReleaseWriter`; Python: `hosts.PopulationHost`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from functools import cached_property

from pwevent.jobs.common import kafka_record
from pwevent.jobs.common.avro_format import CONFLUENT_FRAME_BYTES
from pwevent.jobs.common.pseudonyms import PSEUDONYM_HEX_CHARS
from pwevent.jobs.common.reasons import (
    LATE_REQUIREMENT_DETAIL,
    SUPERSEDED_BEFORE_ORIGIN_DETAIL,
    TOO_FAR_AHEAD_DETAIL,
    Reason,
)
from pwevent.jobs.common.slots import FIRST_SLOT


class TimePath(IntEnum):
    """`path` of a `PARSED` row into `pwevent.flink.time.ValidTime`: what the row is, so that a
    partition's time follows its offsets across the two parsers (docs/streaming.md, "Time")."""

    FAST = 0  # a record accepted on the in-order channel: an event of the SQL fast path, a requirement
    PENDING = 1  # a record the fast path handed to the reference parser (on the fast path's channel)
    SLOW_ACCEPTED = 2  # the reference parser's event for such a record
    SLOW_REJECTED = 3  # its refusal
    REFUSED = 4  # a requirement record the reference parser refused (RequirementOrder's in-order rows)


class Route(Enum):
    """`route` of a `POPULATION_OUT` row: where the Population's output goes."""

    RELEASE = "release"  # k: the slot, v: its release record (`ReleaseWriter`, to the release topic)
    AUDIT = "audit"  # v: spend-log lines joined by "\n" (`ReleaseWriter`, to the audit topic with the next release)
    DEAD = "dead"  # v: a dead letter (the dead letters' SQL sink)


class FieldType(Enum):
    """A field's type: (Java `Types` expression, SQL type)."""

    STRING = ("Types.STRING", "STRING")
    INT = ("Types.INT", "INT")
    LONG = ("Types.LONG", "BIGINT")
    BOOLEAN = ("Types.BOOLEAN", "BOOLEAN")
    BYTES = ("Types.PRIMITIVE_ARRAY(Types.BYTE)", "BYTES")

    @property
    def java(self) -> str:
        return self.value[0]

    @property
    def sql(self) -> str:
        return self.value[1]


@dataclass(frozen=True)
class RowLayout:
    """A row type that crosses between Python (or SQL) and Java: its fields' names and types in order;
    `java`: the name of its generated Java class (None: SQL and Python only)."""

    java: str | None
    doc: str
    fields: tuple[tuple[str, FieldType | RowLayout], ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.fields]

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {name: i for i, (name, _) in enumerate(self.fields)}

    def index(self, name: str) -> int:
        """The position of field `name`."""
        return self._positions[name]

    def values(self, **values: object) -> tuple[object, ...]:
        """A row's values in field order, from values by field name (the others null)."""
        unknown = set(values) - set(self.names)
        if unknown:
            raise KeyError(f"no fields {sorted(unknown)} in {self.names}")
        return tuple(values.get(name) for name in self.names)

    def sql_type(self) -> str:
        """The SQL type of the row, as CAST(ROW(...) AS ...) takes it."""
        return "ROW<" + ", ".join(f"`{name}` {_sql(kind)}" for name, kind in self.fields) + ">"

    def sql_columns(self, **expressions: str) -> str:
        """A SELECT list of the row's fields in order: each field by its name, or `expressions[name]`
        under it."""
        return ", ".join(f"{expressions[name]} AS `{name}`" if name in expressions else f"`{name}`"
                         for name in self.names)


def _sql(kind: FieldType | RowLayout) -> str:
    return kind.sql_type() if isinstance(kind, RowLayout) else kind.sql


STR, INT, LONG, BOOL, BYTES = FieldType.STRING, FieldType.INT, FieldType.LONG, FieldType.BOOLEAN, FieldType.BYTES

RECORD = RowLayout(
    "RecordRow", "A Kafka record: its bytes (the value, or an input read as whole records its whole-records"
    " line), where it was read, its Kafka timestamp and the time read for watermarking (null: unreadable).",
    (("value", BYTES), ("partition", INT), ("offset", LONG), ("kafka_ts", LONG), ("jtime", LONG)))
EVENT_VERDICT = RowLayout(
    "EventVerdictRow", "The SQL fast path's verdict on an event record (user, time_ms and cell meaningful where"
    " fast holds).",
    (("user", STR), ("time_ms", LONG), ("cell", INT), ("partition", INT), ("offset", LONG), ("value", BYTES),
     ("fast", BOOL), ("ts_ms", LONG)))
REQUIREMENT_VERDICT = RowLayout(
    "RequirementVerdictRow", "The SQL fast path's verdict on a requirement record (user, time_ms, requested and"
    " ledger meaningful where fast holds).",
    (("user", STR), ("time_ms", LONG), ("requested", STR), ("ledger", STR), ("partition", INT), ("offset", LONG),
     ("value", BYTES), ("fast", BOOL), ("ts_ms", LONG)))
SLOW_RECORD = RowLayout(
    "SlowRecordRow", "A record the fast path hands to the reference parser.",
    (("value", BYTES), ("partition", INT), ("offset", LONG), ("ts_ms", LONG)))
PARSED = RowLayout(
    "ParsedRow", "A parser's row of a record; `path` (TimePaths) says what it is.",
    (("user", STR), ("time_ms", LONG), ("cell", INT), ("partition", INT), ("offset", LONG), ("original", BYTES),
     ("path", INT)))
TIMED = RowLayout(
    "TimedRow", "A valid record, timed at time_ms; `ahead`: the lead guard did not believe its time.",
    (("user", STR), ("time_ms", LONG), ("cell", INT), ("partition", INT), ("offset", LONG), ("original", BYTES),
     ("ahead", BOOL)))
PRESENT = RowLayout(
    "PresentRow", "An event that counts for its slot; slot_end_ms the slot's last millisecond.",
    (("user", STR), ("slot", LONG), ("cell", INT), ("partition", INT), ("offset", LONG), ("original", BYTES),
     ("time_ms", LONG), ("slot_end_ms", LONG)))
REJECTED_EVENT = RowLayout(
    "RejectedEventRow", "A valid event that counts for no slot, with its dead letter's reason.",
    (("slot", LONG), ("reason", STR), ("user", STR), ("partition", INT), ("offset", LONG), ("original", BYTES)))
PRESENCE = RowLayout(
    "PresenceRow", "User k present at slot v.",
    (("k", STR), ("v", LONG)))
CHANGE = RowLayout(
    "ChangeRow", "User `user` in class `cls` from millisecond `vms` (slot `slot`'s first) on; `previous` null"
    " for a registration; `requirement` the class's, canonical JSON.",
    (("user", STR), ("cls", STR), ("vms", LONG), ("slot", LONG), ("previous", STR), ("requirement", STR)))
REFUSED_REQUIREMENT = RowLayout(
    "RefusedRequirementRow", "A requirement record that did not apply, for its dead letter.",
    (("reason", STR), ("detail", STR), ("partition", INT), ("offset", LONG), ("original", BYTES)))
CHANGE_BATCH = RowLayout(
    "ChangeBatchRow", "A slot's membership changes, a JSON array of groups.",
    (("slot", LONG), ("changes", STR)))
CLASSED = RowLayout(
    "ClassedRow", "The latest event of a user in a slot with the user's class at the slot (null: none); rt_ms"
    " the slot's last millisecond.",
    (("user", STR), ("slot", LONG), ("cell", INT), ("partition", INT), ("offset", LONG), ("original", BYTES),
     ("rt_ms", LONG), ("cls", STR)))
SLOT_COUNT = RowLayout(
    "SlotCountRow", "A subtask's count of a slot's users of class `cls` in `cell`; rt_ms the slot's last"
    " millisecond.",
    (("slot", LONG), ("cls", STR), ("cell", INT), ("n", LONG), ("rt_ms", LONG)))
RECORD_GROUPS = RowLayout(
    "RecordGroupsRow", "The SQL fast path's one look at a raw record: whether the pattern matched, then its"
    " capturing groups (g1 the first).",
    (("matched", BOOL), *((f"g{group}", STR) for group in range(1, 11))))
POPULATION_PRESENT = RowLayout(
    None, "The count `n` of present users of class `cls` in `cell`.",
    (("cls", STR), ("cell", INT), ("n", LONG)))
POPULATION_IN = RowLayout(
    None, "The Population's input: a count (`present`) or a batch of changes (`change`).",
    (("slot", LONG), ("present", POPULATION_PRESENT), ("change", STR)))
POPULATION_OUT = RowLayout(
    "PopulationOutRow", "The Population's output: route (Routes) \"release\" (k the slot, b the record's bytes in"
    " the release format), \"audit\" (v spend-log lines) or \"dead\" (v the dead letter).",
    (("route", STR), ("k", STR), ("v", STR), ("b", BYTES)))

ROWS = (RECORD, RECORD_GROUPS, EVENT_VERDICT, REQUIREMENT_VERDICT, SLOW_RECORD, PARSED, TIMED, PRESENT,
        REJECTED_EVENT, PRESENCE, CHANGE, REFUSED_REQUIREMENT, CHANGE_BATCH, CLASSED, SLOT_COUNT, POPULATION_PRESENT,
        POPULATION_IN, POPULATION_OUT)

#: The reasons the JVM writes, by their Java names.
REASONS: Mapping[str, Reason] = {reason.name: reason for reason in (
    Reason.LATE, Reason.TOO_FAR_AHEAD, Reason.INVALID_REQUIREMENT, Reason.REQUIREMENT_CHANGE_UNDER_FIXED,
    Reason.SUPERSEDED_BEFORE_ORIGIN)}
#: The details the JVM writes: a text, or a template of `str.format` fields (longs in Java).
DETAILS: Mapping[str, str] = {"TOO_FAR_AHEAD_DETAIL": TOO_FAR_AHEAD_DETAIL,
                              "LATE_REQUIREMENT_DETAIL": LATE_REQUIREMENT_DETAIL,
                              "SUPERSEDED_BEFORE_ORIGIN_DETAIL": SUPERSEDED_BEFORE_ORIGIN_DETAIL}
TIME_PATHS: Mapping[str, int] = {path.name: int(path) for path in TimePath}
ROUTES: Mapping[str, str] = {route.name: route.value for route in Route}
#: The members of a whole-records line, by their Java names, in their canonical order.
WHOLE_RECORD_MEMBERS: Mapping[str, str] = {name.upper(): name for name in kafka_record.MEMBERS}
LIMITS: Mapping[str, int] = {"FIRST_SLOT": FIRST_SLOT, "CONFLUENT_FRAME_BYTES": CONFLUENT_FRAME_BYTES,
                             "PSEUDONYM_HEX_CHARS": PSEUDONYM_HEX_CHARS}
