"""Thin Flink hosts of the core (docs/streaming.md, "Topology").

The rules these hosts run live in the plain classes the replay uses too: parsing in
`jobs.common.records`, the Population operator (budgets, decision, spend log, its state) in
`jobs.common.population_operator` around `jobs.common.engine.Engine`, the message formats in
`jobs.common.release.release_record` (encoded by `jobs.streaming.release_format`),
`jobs.common.records.reject_record` and `state.spend_log`.
The job's other rules run in Java ports tested equal to their Python (docs/architecture.md, "The
JVM pieces"): the parsing fast paths, event time and the slot rules, membership, the latest event
per user and slot and the counts. These classes only move records, state and time. Python sits on four paths
only: records the fast paths do not take (`ParseEvents`, `ParseRequirements`), the dead letters of
requirement records Membership (Java) refused (`RequirementRejections`) and of valid events that
count for no slot (`EventRejections`, at the job's parallelism), and the Population, a few calls per
slot with its counts per (class, cell) and its membership changes in batches (`PopulationHost`).
The rows they take and give are declared in jobs/streaming/rows.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyflink.common import Row
from pyflink.common.typeinfo import Types
from pyflink.datastream.functions import KeyedProcessFunction, ProcessFunction
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from pwevent.jobs.common.config import Config
from pwevent.jobs.common.event_rejections import rejected_event_letter
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.kafka_record import KafkaRecord, kept_value
from pwevent.jobs.common.population_operator import (
    Emitted,
    PopulationOperator,
    PopulationRow,
    SlotChanges,
    row_to_json,
)
from pwevent.jobs.common.reasons import BEFORE_ORIGIN_DETAIL, Reason, Rejected
from pwevent.jobs.common.records import KafkaTimestamp, parse_requirement_update, reject_record
from pwevent.jobs.common.requirement_rejections import RefusedRequirement, refused_requirement_letter
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.restore_fingerprint import RestoreFingerprint
from pwevent.jobs.common.service_metrics import KINDS, SlotReport
from pwevent.jobs.common.statistic_cells import joint_cell, observe
from pwevent.jobs.streaming import jvm_contract
from pwevent.jobs.streaming.jvm_contract import TimePath
from pwevent.jobs.streaming.release_format import ReleaseEncoder
from pwevent.jobs.streaming.release_guard import StartGuard
from pwevent.jobs.streaming.requirement_payload import RequirementPayload
from pwevent.jobs.streaming.rows import (
    AUDIT_ROUTE,
    DEAD_LETTERS,
    DEAD_ROUTE,
    END_OF_TIME_MS,
    kept_row,
    parsed_row,
    population_row,
    rejected_event,
    release_route,
)
from pwevent.operators.noise import make_randomness


def kafka_timestamp(kafka_time: bool, kafka_ts_ms: int | None) -> KafkaTimestamp | None:
    """What `parse_event` takes the time from: with `kafka.event_time: kafka` the record's Kafka
    timestamp (its time field is then not read), else None (the time field; an event without it is
    `missing_field`, as the replay has it; docs/formats.md)."""
    return KafkaTimestamp(kafka_ts_ms) if kafka_time else None


def _json(record: dict[str, Any] | list[Any]) -> str:
    return dumps(record)


class HostMetrics:
    """A host's Flink metrics, group `pwevent` (docs/operations.md, "Metrics"): dead letters by
    reason (label `reason`, every reason registered at 0), late records, and settable integer
    gauges. Only counters, which Flink's Prometheus reporter exports as numbers in both execution
    modes: in process mode PyFlink turns a distribution into a `Gauge<DistributionResult>` that the
    reporter skips, and a Python gauge would be read by calling Python."""

    def __init__(self, runtime_context: Any) -> None:
        self.group = runtime_context.get_metrics_group().add_group("pwevent")
        self._unreported: list[Any] = []
        self._dead = {r.value: self.counter("dead_letters", ("reason", r.value)) for r in Reason}
        self._late = self.counter("late_records")
        self._gauges: dict[tuple[str, str | None], Any] = {}
        self._values: dict[tuple[str, str | None], int] = {}

    def counter(self, name: str, label: tuple[str, str] | None = None) -> Any:
        """A counter of the group (in a key/value subgroup when `label` is given), reported at 0 by
        the next `report_zeros()`."""
        counter = (self.group if label is None else self.group.add_group(*label)).counter(name)
        self._unreported.append(counter)
        return counter

    def report_zeros(self) -> None:
        """Report the counters not updated yet at 0, so that each has a series from the start. The
        hosts call it on every element: in process mode PyFlink reports a counter only once it has
        been updated inside a bundle (an update in `open()` is lost)."""
        if self._unreported:
            for counter in self._unreported:
                counter.inc(0)
            self._unreported.clear()

    def dead_letter(self, reason: str) -> None:
        self._dead[reason].inc()
        if reason == Reason.LATE:
            self._late.inc()

    def gauge(self, name: str, value: int, label: tuple[str, str] | None = None) -> None:
        """Set the gauge `name` to `value`: a counter moved by the difference to its last value."""
        key = (name, None if label is None else f"{label[0]}={label[1]}")
        if key not in self._gauges:
            self._gauges[key] = self.counter(name, label)
        self._gauges[key].inc(int(value) - self._values.get(key, 0))
        self._values[key] = int(value)


_SLOW, _REFUSED = jvm_contract.SLOW_RECORD, jvm_contract.REFUSED_REQUIREMENT


def _position(topic: str, row: Row) -> dict[str, Any]:
    """Where a `SLOW_RECORD` row was read."""
    return {"topic": topic, "partition": int(row[_SLOW.index("partition")]), "offset": int(row[_SLOW.index("offset")])}


class _ParseRecords(ProcessFunction):
    """A record for the reference parser (`jvm_contract.SLOW_RECORD`: the side outputs of
    `pwevent.flink.parsing.FastPathSplit` and `RequirementSplit`) -> a parsed record, or a dead letter
    (side output). Whether a time is `too_far_ahead` is decided after parsing, by `ValidTime`, over
    valid records only (docs/streaming.md, "Time")."""

    def __init__(self, config: Config, source: str, topic: str, kafka_time: bool) -> None:
        self.config = config
        self.source = source
        self.topic = topic
        self.kafka_time = kafka_time
        self.whole_records = (config.events if source == "events" else config.requirements).whole_records

    def open(self, runtime_context: Any) -> None:
        self.metrics = HostMetrics(runtime_context)

    def _reject(self, position: dict[str, Any], reason: Reason, detail: str, raw: bytes) -> str:
        self.metrics.dead_letter(reason)
        return _json(reject_record(self.source, position, reason, detail, raw))

    def _checked(self, row: Row, ctx: Any, parse: Any) -> tuple[Any, dict[str, Any], bytes] | str:
        """The parsed record, its position and what a dead letter keeps of it (the Kafka value), or
        its dead letter. An input read as whole Kafka records comes as the source renders them, a
        whole-records line (jobs/common/kafka_record.py), read as the replay reads its files' lines."""
        self.metrics.report_zeros()
        value = row[_SLOW.index("value")]
        raw: bytes = bytes(value) if value is not None else b""
        position = _position(self.topic, row)
        try:
            read = KafkaRecord.of_line(raw) if self.whole_records else raw
            raw = kept_value(read)
            record = parse(read, row[_SLOW.index("ts_ms")])
        except Rejected as err:
            return self._reject(position, err.reason, err.detail, raw)
        if self.source == "events" and self.config.clock.before_origin(record.time_ms):
            return self._reject(position, Reason.BEFORE_ORIGIN, BEFORE_ORIGIN_DETAIL, raw)
        return record, position, raw


class ParseEvents(_ParseRecords):
    """The reference parser for the events the SQL fast path does not take -> `PARSED_EVENT` for each
    (refusals too, so that `ValidTime` knows the record's result), and dead letters."""

    def __init__(self, config: Config, topic: str, kafka_time: bool) -> None:
        super().__init__(config, "events", topic, kafka_time)

    def process_element(self, row: Row, ctx: ProcessFunction.Context):  # type: ignore[override]
        config = self.config
        out = self._checked(row, ctx, lambda raw, ts: observe(raw, config, kafka_timestamp(self.kafka_time, ts),
                                                              config.max_record_bytes, config.pseudonyms))
        if isinstance(out, str):
            yield DEAD_LETTERS, out
            position = _position(self.topic, row)
            yield parsed_row(TimePath.SLOW_REJECTED, position["partition"], position["offset"])
            return
        event, position, raw = out
        yield parsed_row(TimePath.SLOW_ACCEPTED, position["partition"], position["offset"], user=event.user,
                         time_ms=event.time_ms, cell=joint_cell(event.cells, config.statistics), original=raw)


class ParseRequirements(_ParseRecords):
    """The reference parser for the requirement records the fast path does not vouch for
    (`pwevent.flink.parsing.RequirementSplit`'s side output) -> for each a `PARSED_REQUIREMENT` row into
    `pwevent.flink.parsing.RequirementOrder`: the record parsed (`TimePath.SLOW_ACCEPTED`, `original` its
    `RequirementPayload`) or refused (`TimePath.SLOW_REJECTED`, only partition and offset set), and
    the refusals' dead letters (side output)."""

    def __init__(self, config: Config, topic: str) -> None:
        super().__init__(config, "requirements", topic, False)

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.rules = RequirementRules(self.config.mechanism_spec(), self.config.caps.max_w)

    def process_element(self, row: Row, ctx: ProcessFunction.Context):  # type: ignore[override]
        config = self.config
        position = _position(self.topic, row)
        partition, offset = position["partition"], position["offset"]
        out = self._checked(row, ctx, lambda raw, ts: parse_requirement_update(raw, config.requirements, config.caps,
                                                                                 config.max_record_bytes,
                                                                                 config.pseudonyms))
        if isinstance(out, str):
            yield DEAD_LETTERS, out
            yield parsed_row(TimePath.SLOW_REJECTED, partition, offset)
            return
        update, _, raw = out
        payload = RequirementPayload.of(update.requirement, self.rules, raw)
        yield parsed_row(TimePath.SLOW_ACCEPTED, partition, offset, user=update.user, time_ms=update.time_ms,
                         original=payload.encode())


class RequirementRejections(ProcessFunction):
    """`pwevent.flink.membership.Membership`'s refusals (`jvm_contract.REFUSED_REQUIREMENT`) -> their
    dead letters (`refused_requirement_letter`, as the replay writes them), counted in the metrics."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def open(self, runtime_context: Any) -> None:
        self.metrics = HostMetrics(runtime_context)

    def process_element(self, row: Row, ctx: ProcessFunction.Context):  # type: ignore[override]
        self.metrics.report_zeros()
        refused = RefusedRequirement(Reason(row[_REFUSED.index("reason")]), str(row[_REFUSED.index("detail")]),
                                     int(row[_REFUSED.index("partition")]), int(row[_REFUSED.index("offset")]),
                                     bytes(row[_REFUSED.index("original")]))
        self.metrics.dead_letter(refused.reason)
        yield _json(refused_requirement_letter(refused, self.topic))


class EventRejections(ProcessFunction):
    """Valid events that count for no slot (`rows.REJECTED_EVENT`) -> their dead letters
    (`rejected_event_letter`, as the replay writes them), counted in the metrics; at the job's
    parallelism. `resumed_after`: the slot a job without state resumed after (0: none)."""

    def __init__(self, events_topic: str, resumed_after: int) -> None:
        self.events_topic = events_topic
        self.resumed_after = resumed_after

    def open(self, runtime_context: Any) -> None:
        self.metrics = HostMetrics(runtime_context)

    def process_element(self, row: Row, ctx: ProcessFunction.Context):  # type: ignore[override]
        self.metrics.report_zeros()
        event = rejected_event(row)
        self.metrics.dead_letter(event.reason)
        yield _json(rejected_event_letter(event, self.events_topic, self.resumed_after))


def _out(route: str, **fields: str | bytes) -> Row:
    """A `rows.POPULATION_OUT` row of `route`."""
    return Row(*jvm_contract.POPULATION_OUT.values(route=route, **fields))


#: The most audit lines the Population hands on in one row (joined by "\n"; a JSON line holds none).
AUDIT_LINES_PER_ROW = 4096


class PopulationHost(KeyedProcessFunction):
    """The Flink host of `jobs.common.population_operator.PopulationOperator` (one key, parallelism
    1): it keeps the rows of open slots in list state, arms one event-time timer per slot end, saves
    the operator's snapshot after every change, routes its output and updates the metrics.

    Without restored state it first checks the release topic (`StartGuard.check`, docs/streaming.md,
    "Starting twice"): it refuses, failing the job, or resumes after the last audited release. Its
    releases leave in the release format, the bytes of their statistic's encoder (`encoders`, by
    statistic name, None for the one statistic of a configuration without `statistics:`;
    jobs/streaming/release_format.py)."""

    def __init__(self, config: Config, seed: int | None, guard: StartGuard,
                 encoders: Mapping[str | None, ReleaseEncoder]) -> None:
        self.config = config
        self.seed = seed
        self.guard = guard
        self.encoders = dict(encoders)

    def open(self, runtime_context: Any) -> None:
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending", Types.PICKLED_BYTE_ARRAY()))
        self.saved = runtime_context.get_state(ValueStateDescriptor("engine", Types.PICKLED_BYTE_ARRAY()))
        self.fingerprint = runtime_context.get_state(ValueStateDescriptor("fingerprint", Types.STRING()))
        self.operator = PopulationOperator(self.config, make_randomness(self.config.noise, self.seed))
        self.clock = self.config.clock
        self._loaded = False
        self._timer_slot = 0
        self.metrics = HostMetrics(runtime_context)
        self.releases = {kind: self.metrics.counter("releases", ("kind", kind)) for kind in KINDS}

    def _report(self, report: SlotReport, watermark: int) -> None:
        """The slot's numbers (jobs.common.service_metrics) into the Flink metrics."""
        self.releases[report.kind].inc()
        for name, value in report.gauges().items():
            self.metrics.gauge(name, value)
        self.metrics.gauge("watermark_ms", min(watermark, END_OF_TIME_MS))
        for bucket, share in report.utilisation_ppm().items():  # every bucket, 0 where no class is
            self.metrics.gauge("budget_utilisation_ppm", share, ("window", bucket))

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        self._check_fingerprint()
        stored = self.saved.value()
        if stored is not None:
            self.operator.restore(stored)
        else:
            point = self.guard.check()  # first: a refused start writes nothing
            if point is not None:
                self.operator.resume_after(point.slot, point.counts, point.publication)

    def _check_fingerprint(self) -> None:
        """Refuse state written under another state version (StateVersionError) or configuration
        (RestoreMismatchError names the field); state without a fingerprint (a first start, or state of
        an earlier version) gets this one."""
        current = RestoreFingerprint.of(self.config)
        stored = self.fingerprint.value()
        if stored is None:
            self.fingerprint.update(current.to_json())
        else:
            current.check_restore(RestoreFingerprint.from_json(stored))

    def _routed(self, emitted: Emitted, watermark: int):  # type: ignore[no-untyped-def]
        audit = emitted.audit
        for at in range(0, len(audit), AUDIT_LINES_PER_ROW):  # split into messages by ReleaseWriter
            yield _out(AUDIT_ROUTE, v="\n".join(_json(line) for line in audit[at:at + AUDIT_LINES_PER_ROW]))
        for letter in emitted.dead_letters:
            self.metrics.dead_letter(letter["reason"])
            yield _out(DEAD_ROUTE, v=_json(letter))
        for report in emitted.reports:
            self._report(report, watermark)
        for slot, record in emitted.releases:
            name = record.get("statistic")
            yield _out(release_route(name), k=str(slot), b=self.encoders[name].encode(record))

    def process_element(self, value: Row, ctx: Any):  # type: ignore[override]
        self._load()  # first: a refused restore writes nothing
        self.metrics.report_zeros()
        row = population_row(value)
        keep, emitted = self.operator.on_row(row)
        yield from self._routed(emitted, ctx.timer_service().current_watermark())
        if isinstance(row, SlotChanges) and not keep:  # applied at once: a change of a slot decided before a resume
            self.saved.update(self.operator.snapshot())
        if keep:
            self.pending.add(row_to_json(row))
            if row.slot != self._timer_slot:
                ctx.timer_service().register_event_time_timer(self.clock.last_ms(row.slot))
                self._timer_slot = row.slot
        elif not self._timer_slot:  # the schedule releases the next slot whether or not anything counts in it
            following = self.operator.decided + 1
            ctx.timer_service().register_event_time_timer(self.clock.last_ms(following))
            self._timer_slot = following

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        """Decide every slot the watermark has closed, not only the timer's: the next slot's timer,
        armed here, would otherwise be behind the watermark when a process-mode worker's registration
        reaches the JVM after the watermark passed it, and fire only at a later watermark (none comes
        once the input is over)."""
        self._load()
        watermark = ctx.timer_service().current_watermark()
        ended = watermark >= END_OF_TIME_MS
        through = self.clock.slot_of(timestamp) if ended else max(self.clock.slot_of(timestamp),
                                                                  self.clock.closed_by(watermark))
        kept: list[PopulationRow] = [kept_row(stored) for stored in self.pending.get() or []]
        closed = self.operator.on_slot_end(through, kept, ended=ended)
        yield from self._routed(closed.emitted, watermark)
        self.pending.update([row_to_json(row) for row in closed.rest])
        self.saved.update(self.operator.snapshot())
        if closed.next_slot is not None:
            ctx.timer_service().register_event_time_timer(self.clock.last_ms(closed.next_slot))
            self._timer_slot = closed.next_slot
