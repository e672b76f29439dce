"""The streaming job's graph as named stages (docs/streaming.md, "Topology"; docs/architecture.md).

`build_pipeline` reads in one screen: each stage is a function that adds its operators to the
environment and hands the next stage its rows, as a DataStream or as a named SQL view whose columns
its docstring lists. Python runs only in the hosts of jobs/streaming/hosts.py (the reference
parsers, the dead letters of Membership's refusals and of the events that count for no slot, the
Population); the other stages are SQL or the
Java operators of jobs/streaming/jvm, reached through `pyflink_internals`. Views carry the rowtime
`rt` (a slot's window time after the windows). The planner plans each conversion of a query to a
DataStream on its own (a view read by two is run twice), so every view here has one reader, and the
population's input is one query (tests/integration/test_job_graph.py fails on a second copy of an
operator).

    read_topics -> parse_requirements ---------------------------------------> membership
                -> split_events -> parse_events -> time_events -> judge_events -> (membership's presences)
                   -> latest_with_class (with membership's changes) -> count_present
                   -> population (counts, changes) -> (ReleaseWriter: releases with their audit lines,
                      once their checkpoint completed)
                   judge_events' and count_present's rejects -> reject_events (their dead letters)
                   -> write_sinks (dead letters)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.config import Config, EventFields, RequirementFields
from pwevent.jobs.common.field_paths import field_path, record_field
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.streaming import jvm_contract, slot_sql
from pwevent.jobs.streaming.settings import KafkaSettings, StreamSettings
from pwevent.jobs.streaming.sink_tables import sink_ddl
from pwevent.jobs.streaming.startup import NOTHING_READ, StartReads


@dataclass(frozen=True)
class Stage:
    """What every stage reads: the environments, the configuration, the time settings of `ValidTime`
    (`strategy`) and the schema that gives a view its rowtime."""

    env: Any
    t_env: Any
    config: Config
    settings: StreamSettings
    strategy: dict[str, int]
    rowtime: Any

    def valid_time(self, rows: Any, role: str, name: str) -> Any:
        """`rows` of topic `role` (`ValidTime.IN`) -> `ValidTime` (docs/streaming.md, "Time")."""
        from pwevent.jobs.streaming import pyflink_internals as internals

        kafka, flink = self.settings.kafka, self.settings.flink
        properties = {"bootstrap.servers": kafka.require_bootstrap(), **kafka.jvm_properties(),
                      "group.id": kafka.source_group_id(role)}
        # a read events partition lags the clock by the release delay at most (the schedule); a read
        # requirements partition holds nothing back (its records count while their slot is open)
        lag_ms = flink.release_delay_ms if role == "events" else -flink.max_lead_ms
        return internals.valid_time(rows, self.strategy, lag_ms, properties, kafka.topics[role],
                                    start_of(kafka, role), name)

    @property
    def kafka_time(self) -> bool:
        """`kafka.event_time: kafka`: an event's time is its Kafka timestamp."""
        return self.settings.kafka.event_time == "kafka"


@dataclass(frozen=True)
class Requirements:
    """The requirement records: the reference parser's stream (dead letters as a side output) and
    every record's row in event time (`timed`, `ValidTime.OUT`, `original` the `RequirementPayload`)."""

    parsed: Any
    timed: Any


@dataclass(frozen=True)
class Members:
    """Membership's changes (`pwevent.flink.membership.Membership.OUT`) and the dead letters of the
    requirement records that did not apply (JSON text)."""

    changes: Any
    dead_letters: Any


def start_of(kafka: KafkaSettings, role: str) -> tuple[str, int | None]:
    """Where the source of topic `role` starts reading without restored state: `kafka.start` for the
    events; the earliest offset for the requirements (Membership needs every record ever declared)."""
    return (kafka.start, kafka.start_time_ms) if role == "events" else ("earliest", None)


def source_time_path(fields: EventFields | RequirementFields) -> tuple[str, ...] | None:
    """The keys of the time field the source reads in the JVM (`pwevent.flink.parsing.EventTime`), or None
    for its Kafka timestamp: the JVM reads JSON only, and never guesses a time out of Avro bytes; a
    time mapped to a part of the Kafka record (`$timestamp`, a header) is not in the value."""
    return field_path(fields.time) if fields.format == "json" and record_field(fields.time) is None else None


def write_sink_tables(stage: Stage) -> None:
    """The Kafka sink table of the dead letters (exactly once; docs/streaming.md, "Which releases
    count"; the releases and the audit lines have their own writer, `population`), in UTC: tumbling
    windows on TIMESTAMP_LTZ align to the session time zone."""
    topics, settings = stage.settings.kafka.topics, stage.settings
    stage.t_env.get_config().set("table.local-time-zone", "UTC")
    stage.t_env.execute_sql(sink_ddl("sink_dead_letters", topics["dead_letters"], "dead-letters", settings))


def register_functions(stage: Stage) -> None:
    """The Java functions the job's SQL calls: the fast paths' `RecordGroups`, `IsoMillis` and, for
    Avro events, `AvroFields` (which decodes with Flink's relocated Apache Avro, jars.avro_jar())."""
    from pwevent.jobs.common.avro_format import AVRO_FORMATS
    from pwevent.jobs.streaming.event_sql import register_record_groups
    from pwevent.jobs.streaming.jars import avro_jar
    from pwevent.jobs.streaming.requirement_sql import register_iso_millis

    if stage.config.events.format in AVRO_FORMATS:
        stage.env.add_jars(avro_jar().resolve().as_uri())
    register_record_groups(stage.t_env, stage.config.events)
    register_iso_millis(stage.t_env)


def read_topics(stage: Stage) -> None:
    """Views `raw_events` and `raw_requirements`: `value` (bytes: the Kafka value, or for an input read
    as whole Kafka records the record's whole-records line, jobs/common/kafka_record.py), `partition`,
    `offset`, `kafka_ts`, `jtime` (the source's time of the record: its time field read in the JVM
    for JSON, else its Kafka timestamp) and `rt`; no watermark (ValidTime makes it,
    docs/streaming.md, "Time"). `kafka.start` moves the events only: Membership needs every
    requirement record ever declared."""
    from pwevent.jobs.streaming import pyflink_internals as internals

    kafka, config = stage.settings.kafka, stage.config
    for role, fields, time_path in (
            ("events", config.events, None if stage.kafka_time else source_time_path(config.events)),
            ("requirements", config.requirements, source_time_path(config.requirements))):
        start = start_of(kafka, role)
        stream = internals.kafka_source(stage.env, f"kafka {role}", kafka.require_bootstrap(), kafka.topics[role],
                                        kafka.source_group_id(role), kafka.jvm_properties(), time_path,
                                        config.max_record_bytes, start, fields.whole_records).uid(f"source-{role}")
        stage.t_env.create_temporary_view(f"raw_{role}", stage.t_env.from_data_stream(stream, stage.rowtime))


def parse_requirements(stage: Stage) -> Requirements:
    """`raw_requirements` -> the SQL fast path's verdict on every record (jobs/streaming/requirement_sql.py),
    converted once -> `RequirementSplit` (Java, chained): the fast path's records and a mark for each
    of the others, which go to ParseRequirements (Python, the reference parser) -> `RequirementOrder`
    (Java): one row per record in each partition's offset order, and the registrations in the same
    order -> the valid records' event time (`ValidTime`, as for the events)."""
    from pwevent.jobs.streaming import hosts as fn
    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming import rows
    from pwevent.jobs.streaming.requirement_sql import parsed_requirements_sql

    t_env = stage.t_env
    t_env.create_temporary_view("raw_requirements_ts", t_env.sql_query(
        "SELECT `value`, `partition`, `offset`, kafka_ts AS ts_ms FROM raw_requirements"))
    verdicts = t_env.to_data_stream(t_env.sql_query(
        f"SELECT {jvm_contract.REQUIREMENT_VERDICT.sql_columns()}"
        f" FROM ({parsed_requirements_sql(stage.config, 'raw_requirements_ts')})"))
    split, slow = internals.requirement_split(verdicts, stage.config.pseudonyms)
    split.uid("requirement-split").name("split requirements by the fast path's verdict")
    parsed = slow.process(fn.ParseRequirements(stage.config, stage.settings.kafka.topics["requirements"]),
                          output_type=rows.PARSED_REQUIREMENT).uid("parse-requirements") \
        .name("parse requirements (reference parser)")
    ordered = internals.requirement_order(split, parsed).uid("requirement-order").name("requirements in offset order")
    timed = stage.valid_time(ordered, "requirements", "event time of valid requirements").uid("requirement-time")
    return Requirements(parsed, timed)


def split_events(stage: Stage) -> Any:
    """`raw_events` -> the SQL fast path's verdict on every record (jobs/streaming/event_sql.py), in
    one query converted once -> `FastPathSplit` (Java, chained): the fast path's events, and a mark
    (partition and offset only, `path` PENDING) for each record it hands to the reference parser, in
    offset order with the events (`rows.PARSED_EVENT`); those records on its side output (`value`,
    `partition`, `offset`, `ts_ms`). Returns the split's stream."""
    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming.event_sql import parsed_events_sql

    t_env = stage.t_env
    t_env.create_temporary_view("raw_events_ts", t_env.sql_query(
        "SELECT `value`, `partition`, `offset`, kafka_ts AS ts_ms FROM raw_events"))
    parsed_sql = parsed_events_sql(stage.config, "raw_events_ts", stage.kafka_time)
    verdicts = t_env.to_data_stream(t_env.sql_query(
        f"SELECT {jvm_contract.EVENT_VERDICT.sql_columns(fast='COALESCE(`fast`, FALSE)')} FROM ({parsed_sql})"))
    return internals.fast_path_split(verdicts, stage.config.pseudonyms).uid("fast-path-split") \
        .name("split by the fast path's verdict")


def parse_events(stage: Stage, split: Any) -> tuple[Any, Any]:
    """The records the fast path hands on (`split`'s side output) -> ParseEvents (Python, the reference
    parser: an event or a refusal for each, dead letters as a side output); returns (the parser's
    stream, every event of both paths and the marks, as `rows.PARSED_EVENT`). The two are joined as
    DataStreams, in the source's task: each keeps its order, and no task of its own re-encodes
    every event."""
    from pwevent.jobs.streaming import hosts as fn
    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming import rows

    slow = internals.fast_path_slow(split)
    parsed = slow.process(fn.ParseEvents(stage.config, stage.settings.kafka.topics["events"], stage.kafka_time),
                          output_type=rows.PARSED_EVENT).uid("parse-events").name("parse events (reference parser)")
    return parsed, split.union(parsed)


def time_events(stage: Stage, events: Any) -> Any:
    """Both paths' events -> `ValidTime` (event time from the valid events only, each partition's in
    offset order over the backlog a subtask finds at its (re)start, then the release schedule; at the job's
    parallelism, each partition's rows routed to the subtask that owns it; docs/streaming.md, "Time")
    -> the valid events (`ValidTime.OUT`), with `ahead` (past the lead guard)."""
    return stage.valid_time(events, "events", "event time of valid events").uid("valid-time")


def judge_events(stage: Stage, timed: Any, late_through: int) -> Any:
    """The valid events -> `SlotJudge` (Java, chained): the events that count for their slot, as a
    stream of Row(`user`, `slot`, `cell`, `partition`, `offset`, `original`, `time_ms`,
    `slot_end_ms`: the slot's last millisecond), read by Membership's presences and the latest event
    with its class; and view `events_rejected` (`slot`, `reason`, `user`, `partition`, `offset`,
    `original`): the events whose slot the watermark had closed or a resumed job's releases decided
    (at most `late_through`), `late`, and those past the lead guard, `too_far_ahead`."""
    from pwevent.jobs.streaming import pyflink_internals as internals

    clock = stage.config.clock
    present, rejected = internals.slot_judge(timed, clock.origin_ms, clock.length_ms, late_through)
    stage.t_env.create_temporary_view("events_rejected", stage.t_env.from_data_stream(rejected, stage.rowtime))
    return present.uid("slot-judge").name("judge each event's slot")


def membership(stage: Stage, requirements: Requirements, present: Any) -> Members:
    """Valid requirement records and the events' (user, slot) presences -> `Membership` (Java, keyed
    by user) -> its class changes, and `ChangeBatches` (Java, chained) -> view `membership_changes`
    (`slot`, `changes`: a JSON array of the slot's changes, `rt`); the records that did not apply ->
    RequirementRejections (Python) -> dead letters. Membership always gets the presences' watermark,
    and their rows only with a default requirement (the same graph either way, so a restore may
    switch the default), and of those only the ones it can still need (FirstPresence, in Java:
    about one per user, not per slot)."""
    from pyflink.common import Types

    from pwevent.jobs.common.requirement_rules import RequirementRules
    from pwevent.jobs.streaming import hosts as fn
    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming.requirement_payload import canonical

    config, clock = stage.config, stage.config.clock
    rules = RequirementRules(config.mechanism_spec(), config.caps.max_w)
    default = config.default_requirement
    carrier = internals.first_presence(present, default is not None) \
        .uid("first-presence").name("presences Membership can still need")
    changes, rejected = internals.membership(
        requirements.timed, carrier, rules.spec.dynamic, rules.fixed_change_detail,
        None if default is None else (canonical(default), canonical(rules.ledger_requirement(default))),
        clock.origin_ms, clock.length_ms)
    changes.uid("membership").name("Membership")
    batches = internals.change_batches(changes).uid("membership-batches").name("membership changes in batches")
    stage.t_env.create_temporary_view("membership_changes", stage.t_env.from_data_stream(batches, stage.rowtime))
    dead = rejected.process(fn.RequirementRejections(stage.settings.kafka.topics["requirements"]),
                            output_type=Types.STRING()).uid("membership-rejections") \
        .name("dead letters of requirement records that did not apply")
    return Members(changes, dead)


def latest_with_class(stage: Stage, present: Any, members: Members) -> Any:
    """Membership's changes and the present events -> the latest event of each user in each slot,
    with the user's class at the slot (`UserClassJoin.OUT`: `cls` NULL for a user without one), timed
    at the slot's last millisecond (`UserClassJoin`, Java: the latest by (time, partition, offset),
    then an event-time join on Membership's versions; no timer per event or version)."""
    from pwevent.jobs.streaming import pyflink_internals as internals

    return internals.user_class_join(members.changes, present).uid("user-class") \
        .name("latest event and class of each user")


def count_present(stage: Stage, joined: Any) -> None:
    """The class join's rows -> `SlotCounts` (Java, chained) -> view `slot_counts` (`slot`, `cls`,
    `cell`, `n`, `rt`: this subtask's count of the slot's users of that class in that cell, timed at
    the slot's last millisecond) and view `unknown_users` (the join's rows without a class)."""
    from pyflink.table import Schema

    from pwevent.jobs.streaming import pyflink_internals as internals

    t_env = stage.t_env
    counts, unknown = internals.slot_counts(joined)
    timed_at_slot_end = Schema.new_builder().column_by_expression("rt", "TO_TIMESTAMP_LTZ(rt_ms, 3)") \
        .watermark("rt", "SOURCE_WATERMARK()").build()
    t_env.create_temporary_view("slot_counts", t_env.from_data_stream(
        counts.uid("slot-counts").name("count per slot, class and cell"), timed_at_slot_end))
    t_env.create_temporary_view("unknown_users", t_env.from_data_stream(unknown, timed_at_slot_end))


def reject_events(stage: Stage, late_through: int) -> Any:
    """Views `events_rejected` and `unknown_users` -> `rows.REJECTED_EVENT` -> EventRejections
    (Python, at the job's parallelism: no event reaches a single task) -> their dead letters (JSON
    text); `late_through`: a resumed job's decided slots, whose events say so."""
    from pyflink.common import Types

    from pwevent.jobs.streaming import hosts as fn
    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming import rows
    from pwevent.jobs.streaming.event_sql import sql_literal

    layout = jvm_contract.REJECTED_EVENT
    rejected = stage.t_env.to_data_stream(stage.t_env.sql_query(
        f"SELECT {layout.sql_columns()} FROM events_rejected"
        " UNION ALL"
        f" SELECT {layout.sql_columns(reason=sql_literal(Reason.UNKNOWN_USER.value))} FROM unknown_users"))
    internals.set_output_type(rejected, rows.REJECTED_EVENT)
    return rejected.process(fn.EventRejections(stage.settings.kafka.topics["events"], late_through),
                            output_type=Types.STRING()).uid("event-rejections") \
        .name("dead letters of events that count for no slot")


def population(stage: Stage, seed: int | None, late_through: int) -> None:
    """Views `slot_counts` and `membership_changes` -> the Population (Python, one key: the replay's
    Engine) -> its releases, in the release format, and its audit lines to `ReleaseWriter` (Java), which
    writes each release to the release topic, with the audit lines before it to the audit topic in the
    same transaction, once the checkpoint holding it has completed (docs/streaming.md, "A slot's
    outcome is drawn once"), and view `population_out` (`rows.POPULATION_OUT`: its dead letters). Its input,
    `rows.POPULATION_IN`, is one row kind per source, in one query so that the planner runs the window
    once: the count of present users per (slot, class, cell), the subtasks' counts summed in a window
    of the slot; Membership's changes, in batches. `rows.population_row` reads each as its typed row."""
    from pyflink.common import Row, Types

    from pwevent.jobs.streaming import hosts as fn
    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming import rows
    from pwevent.jobs.streaming.release_format import release_encoder
    from pwevent.jobs.streaming.release_guard import StartGuard

    t_env, config, kafka, clock = stage.t_env, stage.config, stage.settings.kafka, stage.config.clock
    present = jvm_contract.POPULATION_PRESENT.sql_type()
    population_in = t_env.to_data_stream(t_env.sql_query(
        "SELECT 0 AS k, ROW(slot, present, change) AS g FROM ("
        f" SELECT slot, CAST(ROW(cls, cell, SUM(n)) AS {present}), CAST(NULL AS STRING)"
        f" FROM {slot_sql.tumble('slot_counts', 'rt', clock)}"
        " GROUP BY window_start, window_end, slot, cls, cell"
        " UNION ALL"
        f" SELECT slot, CAST(NULL AS {present}), changes FROM membership_changes"
        ") AS t(slot, present, change)"))
    keyed_row = Types.ROW_NAMED(["k", "g"], [Types.INT(), rows.POPULATION_IN])
    internals.set_output_type(population_in, keyed_row)
    # a job that reads no record still releases on the schedule: the start row arms the first timer
    start = stage.env.from_collection([Row(0, rows.POPULATION_START)], type_info=keyed_row) \
        .uid("population-start").name("start row of the release schedule")
    several = tuple((kafka.release_topic(s.name), s.domain.d) for s in config.statistics if s.name is not None)
    release = stage.settings.release  # a registered format registers the release's schema now, at the build
    encoders = {s.name: release_encoder(release, kafka.release_topic(s.name)) for s in config.statistics}
    host = fn.PopulationHost(config, seed, StartGuard(kafka, config.domain.d, release, late_through, several),
                             encoders)
    hosted = internals.keyed_by_first_field(population_in.union(start), Types.INT(), rows.POPULATION_IN) \
        .process(host, output_type=rows.POPULATION_OUT) \
        .uid("population").name("Population").set_parallelism(1).set_max_parallelism(1)
    for i, statistic in enumerate(config.statistics):  # one writer and topic per statistic (docs/streaming.md)
        name = statistic.name
        uid = "release-writer" if name is None else f"release-writer-{name}"
        audit = kafka.topics["audit"] if i == 0 else None  # the spend lines of every statistic go with the first's
        internals.release_writer(hosted, kafka.release_writer_properties(),
                                 internals.ReleaseTarget(rows.release_route(name), kafka.release_topic(name), audit,
                                                         kafka.release_writer_id(name)),
                                 f"{uid}-end").uid(uid)
    t_env.create_temporary_view("population_out", t_env.from_data_stream(hosted))


def write_sinks(stage: Stage, parsed_events: Any, requirements: Requirements, members: Members,
                rejected_events: Any) -> None:
    """Dead letters from the parsers' side outputs, Membership's refusals, the events that count for
    no slot (`rejected_events`) and the Population (counts of a slot decided before they came,
    projections), in one statement set. (The audit lines go with the releases, `population`.)"""
    from pyflink.table.expressions import col

    from pwevent.jobs.streaming import pyflink_internals as internals
    from pwevent.jobs.streaming import rows

    t_env = stage.t_env
    dead_text = internals.side_output(parsed_events, rows.DEAD_LETTERS) \
        .union(internals.side_output(requirements.parsed, rows.DEAD_LETTERS), members.dead_letters, rejected_events)
    dead = t_env.from_data_stream(dead_text).select(col("f0").alias("v")) \
        .union_all(t_env.sql_query(f"SELECT v FROM population_out WHERE route = '{rows.DEAD_ROUTE}'"))
    statements = t_env.create_statement_set()
    statements.add_insert("sink_dead_letters", dead)
    statements.attach_as_datastream()


def build_pipeline(env: Any, t_env: Any, config: Config, settings: StreamSettings, seed: int | None,
                   start: StartReads = NOTHING_READ) -> None:
    """Sources, operators and sinks of the job, added to `env` (executed by the caller), stage by
    stage; `start`: what the start read from the topics (jobs/streaming/startup.py)."""
    from pyflink.table import Schema

    flink = settings.flink
    strategy = {"out_of_orderness_ms": flink.out_of_orderness_ms, "max_lead_ms": flink.max_lead_ms,
                "origin_ms": config.origin_ms}
    rowtime = Schema.new_builder().column_by_metadata("rt", "TIMESTAMP_LTZ(3)", "rowtime") \
        .watermark("rt", "SOURCE_WATERMARK()").build()
    stage = Stage(env, t_env, config, settings, strategy, rowtime)

    write_sink_tables(stage)
    register_functions(stage)
    read_topics(stage)
    requirements = parse_requirements(stage)
    parsed_events, events = parse_events(stage, split_events(stage))
    timed = time_events(stage, events)
    present = judge_events(stage, timed, start.late_through)
    members = membership(stage, requirements, present)
    count_present(stage, latest_with_class(stage, present, members))
    rejected_events = reject_events(stage, start.late_through)
    population(stage, seed, start.late_through)
    write_sinks(stage, parsed_events, requirements, members, rejected_events)
