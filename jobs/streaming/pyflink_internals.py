"""Every place where the job reaches under PyFlink's public Python API (apache-flink 2.2.x).

Each workaround exists because the public route costs a Python operator per record or cannot
express what the job needs; tests/integration/test_job_graph.py fails if one breaks or a Python
operator creeps back onto the per-record path. An upgrade of apache-flink starts here.
- `kafka_source`: the Python KafkaSource builder only takes value-only deserialisers; the job needs
  each record's partition and offset (dead letters name them) and its own watermark strategy
  (jobs/streaming/jvm), so the Java builder is driven through the gateway.
- `keyed_by_first_field`: `DataStream.key_by` runs a Python key selector per record; for records
  that already have PyFlink's keyed Row(key, value) shape the Java `KeyByKeySelector` suffices.
- `set_output_type`: re-declares a stream's type (a `to_data_stream` Row as the RowTypeInfo a
  Python operator or a union needs; same Row objects, another serializer).
- `side_output`: `DataStream.get_side_output` adds a Python identity map per record.
- `load_file_systems`: a local run's mini-cluster loads no file system plugins (only a cluster's
  entry points initialise them); the S3 file system of a job whose state is on an object store is
  loaded so, with its `s3.*` keys, before the job is submitted.
- `avro_fields`, `register_java_function`: the Table API registers a Java function by class name
  only from Python; `AvroFields` is registered as an instance that holds the registry's client, so
  that its credentials travel in the serialized function, not in the SQL text (which plans, operator
  names and logs show).
- `effective_setting`: PyFlink has no reader of the environment's effective configuration (the
  cluster's and the submitter's keys), which tells the entry point whether the cluster restores state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.config import SchemaRegistrySection
from pwevent.jobs.common.pseudonyms import Pseudonyms


def _jvm() -> Any:
    from pyflink.java_gateway import get_gateway

    return get_gateway().jvm


def _starting_offsets(start: str, start_time_ms: int | None) -> Any:
    """The connector's OffsetsInitializer of a `kafka.start` position (jobs/streaming/settings.py)."""
    jvm = _jvm()
    offsets = jvm.org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer
    if start == "latest":
        return offsets.latest()
    if start == "committed":  # the connector shades the Kafka client: its reset strategy too
        reset = jvm.org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetResetStrategy.EARLIEST
        return offsets.committedOffsets(reset)
    if start == "timestamp":
        assert start_time_ms is not None
        return offsets.timestamp(start_time_ms)
    assert start == "earliest", start
    return offsets.earliest()


def kafka_source(env: Any, name: str, bootstrap: str, topic: str, group_id: str, properties: dict[str, str],
                 time_path: tuple[str, ...] | None, max_bytes: int,
                 start: tuple[str, int | None] = ("earliest", None), whole_records: bool = False) -> Any:
    """A Kafka source of `jvm_contract.RECORD` rows (`pwevent.flink.parsing.PositionedRecords`),
    read from `start` (a `kafka.start` position and its time) when no state is restored, without
    watermarks (`pwevent.flink.time.ValidTime` makes them from the valid records; docs/streaming.md,
    "Time"). `time_path`: the keys of the time's field path (None: the Kafka record timestamp).
    `whole_records`: each row's `value` is the record's whole-records line (jobs/common/kafka_record.py)."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream import DataStream

    jvm = _jvm()
    builder = (
        jvm.org.apache.flink.connector.kafka.source.KafkaSource.builder()
        .setBootstrapServers(bootstrap)
        .setTopics(jvm.java.util.Collections.singletonList(topic))
        .setGroupId(group_id)
        .setStartingOffsets(_starting_offsets(*start))
        .setDeserializer(jvm.pwevent.flink.parsing.PositionedRecords(None if time_path is None else list(time_path),
                                                                     max_bytes, whole_records))
        .setProperty("isolation.level", "read_committed")
    )
    for key, value in properties.items():
        builder = builder.setProperty(key, value)
    j_stream = env._j_stream_execution_environment.fromSource(
        builder.build(), WatermarkStrategy.no_watermarks()._j_watermark_strategy, name)
    return DataStream(j_stream)


def _java_strings(properties: dict[str, str]) -> Any:
    """A java.util.HashMap of `properties` (the Kafka clients', a Flink configuration)."""
    out = _jvm().java.util.HashMap()
    for key, value in properties.items():
        out.put(key, value)
    return out


def avro_fields(registry: SchemaRegistrySection | None) -> Any:
    """A `pwevent.flink.avro.AvroFields` with the client of `registry` (None: format avro)."""
    jvm = _jvm()
    if registry is None:
        return jvm.pwevent.flink.avro.AvroFields(None)
    authorization = registry.authorization()
    tls = None
    if registry.ca_file is not None or registry.client_cert is not None:
        cert = registry.client_cert
        store = cert.keystore if cert is not None else None
        store_password = store.password if store is not None else None
        key_password = cert.key_password if cert is not None else None
        tls = jvm.pwevent.flink.avro.RegistryTls(
            registry.ca_file, None if store is None else store.location, None if store is None else store.type,
            None if store_password is None else store_password.reveal(),
            None if key_password is None else key_password.reveal())
    client = jvm.pwevent.flink.avro.RegistryClient(
        registry.url, int(registry.timeout_ms), None if authorization is None else authorization.reveal(), tls)
    return jvm.pwevent.flink.avro.AvroFields(client)


def register_java_function(t_env: Any, name: str, function: Any) -> None:
    """Register the Java function instance `function` as the temporary system function `name`."""
    t_env._j_tenv.createTemporarySystemFunction(name, function)


def user_class_join(versions: Any, rows: Any) -> Any:
    """Java `UserClassJoin`: of `rows` (user, slot, cell, partition, offset, original, time ms, slot's
    last ms), the latest of each user in each slot, with the user's class at the slot from `versions`
    (user, cls, valid-from ms), keyed by user."""
    from pyflink.datastream import DataStream

    return DataStream(_jvm().pwevent.flink.counting.UserClassJoin.join(versions._j_data_stream, rows._j_data_stream))


def pseudonyms(config: Pseudonyms | None) -> Any:
    """Java `Pseudonyms` of the configured `pseudonymise` (None: the ids as they are)."""
    parsing = _jvm().pwevent.flink.parsing
    return parsing.Pseudonyms.none() if config is None else parsing.Pseudonyms(config.key_bytes())


def fast_path_split(verdicts: Any, names: Pseudonyms | None) -> Any:
    """Java `FastPathSplit`, chained to `verdicts` (`jvm_contract.EVENT_VERDICT`): the fast path's
    events (users named by `names`) and the marks of the other records, as `ValidTime.IN`."""
    from pyflink.datastream import DataStream

    return DataStream(_jvm().pwevent.flink.parsing.FastPathSplit.apply(verdicts._j_data_stream, pseudonyms(names)))


def fast_path_slow(split: Any) -> Any:
    """`fast_path_split`'s side output: `jvm_contract.SLOW_RECORD` of each record the fast
    path hands to the reference parser."""
    from pyflink.datastream import DataStream

    flink = _jvm().pwevent.flink
    return DataStream(split._j_data_stream.getSideOutput(flink.parsing.FastPathSplit.SLOW))


def slot_judge(timed: Any, origin_ms: int, slot_ms: int, late_through: int) -> tuple[Any, Any]:
    """Java `SlotJudge`, chained behind the events' `ValidTime` (`timed`): (the events that count for
    their slot, `jvm_contract.PRESENT`; the late and too-far-ahead ones, `jvm_contract.REJECTED_EVENT`),
    both timed by the events. Returns (the operator's stream, which needs a uid; its side output)."""
    from pyflink.datastream import DataStream

    flink = _jvm().pwevent.flink
    judged = flink.time.SlotJudge.apply(timed._j_data_stream, origin_ms, slot_ms, late_through)
    return DataStream(judged), DataStream(judged.getSideOutput(flink.time.SlotJudge.REJECTED))


def slot_counts(joined: Any) -> tuple[Any, Any]:
    """Java `SlotCounts`, chained behind the class join (`joined`, `UserClassJoin.OUT`): (the count
    per (slot, class, cell) once the watermark passed the slot's end, `jvm_contract.SLOT_COUNT`;
    the rows without a class). Returns (the operator's stream, which needs a uid; its side output)."""
    from pyflink.datastream import DataStream

    flink = _jvm().pwevent.flink
    counts = flink.counting.SlotCounts.apply(joined._j_data_stream)
    return DataStream(counts), DataStream(counts.getSideOutput(flink.counting.SlotCounts.UNKNOWN))


def first_presence(present: Any, default_on: bool) -> Any:
    """Java `FirstPresence`: of the present events (`jvm_contract.PRESENT`), as `jvm_contract.PRESENCE`
    keyed by user, only the presences Membership can still need (none when `default_on`, whether this run
    has a default requirement, is false)."""
    from pyflink.datastream import DataStream

    return DataStream(_jvm().pwevent.flink.membership.FirstPresence.apply(present._j_data_stream, default_on))


def valid_time(records: Any, strategy: dict[str, int], lag_ms: int, properties: dict[str, str], topic: str,
               start: tuple[str, int | None], name: str) -> Any:
    """Java `ValidTime`: `records` (user, time_ms, cell, partition, offset, original, path: the two
    parsers' rows, `jvm_contract.TimePath`) of `topic`, the accepted ones timed, with the flag `ahead` for
    those the lead guard does not believe, and the watermark: event time of the valid records over
    each partition's backlog (what it held when the subtask (re)started, read with the Kafka client
    `properties`, the source's group id included, from the source's `start` position without
    restored state), then the later of that and the clock less `lag_ms` (keys of `strategy`:
    out_of_orderness_ms, max_lead_ms, origin_ms: a record from before it moves no time; docs/streaming.md,
    "Time"). Each partition's rows are routed to the subtask that owns it, at the job's parallelism.
    Needs a uid."""
    from pyflink.datastream import DataStream

    jvm = _jvm()
    ends = jvm.pwevent.flink.time.KafkaPartitionEnds(_java_strings(properties), topic, _starting_offsets(*start))
    operator = jvm.pwevent.flink.time.ValidTime(strategy["out_of_orderness_ms"], strategy["max_lead_ms"], lag_ms,
                                                strategy["origin_ms"], ends)
    return DataStream(jvm.pwevent.flink.time.ValidTime.apply(records._j_data_stream, operator, name))


def requirement_split(verdicts: Any, names: Pseudonyms | None) -> tuple[Any, Any]:
    """Java `RequirementSplit`, chained to `verdicts` (`jvm_contract.REQUIREMENT_VERDICT`): (the fast
    path's requirement records, users named by `names`, and the marks of the others, as
    `ValidTime.IN`, which needs a uid; the
    others, `jvm_contract.SLOW_RECORD`, for the reference parser)."""
    from pyflink.datastream import DataStream

    flink = _jvm().pwevent.flink
    split = flink.parsing.RequirementSplit.apply(verdicts._j_data_stream, pseudonyms(names))
    return DataStream(split), DataStream(split.getSideOutput(flink.parsing.RequirementSplit.SLOW))


def requirement_order(split: Any, parsed: Any) -> Any:
    """Java `RequirementOrder`: `split`'s rows with the reference parser's (`parsed`) in their place,
    one row per record in each partition's offset order (`ValidTime.IN`, paths FAST and REFUSED).
    Needs a uid."""
    from pyflink.datastream import DataStream

    return DataStream(_jvm().pwevent.flink.parsing.RequirementOrder.apply(split._j_data_stream, parsed._j_data_stream))


def membership(requirements: Any, presences: Any, dynamic: bool, fixed_change_detail: str,
               default: tuple[str, str] | None, origin_ms: int, slot_ms: int) -> tuple[Any, Any]:
    """Java `Membership`, keyed by user, over the requirements' timed rows and `presences`
    (`FirstPresence.PRESENCE`), under `MembershipRule(dynamic, fixed_change_detail, default)`
    (`default`: the default requirement as declared and as its ledger runs, canonical JSON). Returns
    (the changes, `jvm_contract.CHANGE`, which need a uid; the records that did not apply,
    `jvm_contract.REFUSED_REQUIREMENT`)."""
    from pyflink.datastream import DataStream

    flink = _jvm().pwevent.flink
    requested, ledger = default if default is not None else (None, None)
    rule = flink.membership.MembershipRule(dynamic, fixed_change_detail, requested, ledger)
    changes = flink.membership.Membership.apply(requirements._j_data_stream, presences._j_data_stream,
                                                flink.membership.Membership(rule, origin_ms, slot_ms))
    return DataStream(changes), DataStream(changes.getSideOutput(flink.membership.Membership.REJECTED))


def change_batches(changes: Any) -> Any:
    """Java `ChangeBatches`, chained to `changes` (Membership's): `jvm_contract.CHANGE_BATCH`."""
    from pyflink.datastream import DataStream

    return DataStream(_jvm().pwevent.flink.membership.ChangeBatches.apply(changes._j_data_stream))


@dataclass(frozen=True)
class ReleaseTarget:
    """Where a `ReleaseWriter` writes (Java `ReleaseWriter.Target`): the rows of `route`
    (`rows.release_route`) to `release_topic`, and, when `audit_topic` is not None, the spend-log
    lines before each release to `audit_topic` in the release's transaction, by a transactional
    producer with `transactional_id`."""

    route: str
    release_topic: str
    audit_topic: str | None
    transactional_id: str


def release_writer(population: Any, properties: dict[str, str], target: ReleaseTarget, end_uid: str) -> Any:
    """Java `ReleaseWriter` behind the Population (`population`, `rows.POPULATION_OUT`): its releases
    of `target.route` (and the spend-log lines, if it writes them) written once the checkpoint
    holding them has completed, with the Kafka clients' `properties` (bootstrap and security
    included). Returns the writer's stream (it needs a uid; a discarding sink with uid `end_uid` ends
    it)."""
    from pyflink.datastream import DataStream

    writers = _jvm().pwevent.flink.release.ReleaseWriter
    j_target = writers.Target(target.route, target.release_topic, target.audit_topic, target.transactional_id)
    written = writers.apply(population._j_data_stream, _java_strings(properties), j_target)
    writers.end(written, end_uid)
    return DataStream(written)


def set_output_type(stream: Any, type_info: Any) -> Any:
    stream._j_data_stream.getTransformation().setOutputType(type_info.get_java_type_info())
    return stream


def keyed_by_first_field(stream: Any, key_type: Any, value_type: Any) -> Any:
    """A stream of Row(key, value) keyed by its first field, in Java."""
    from pyflink.common import Types
    from pyflink.datastream import KeyedStream

    j_keyed = stream._j_data_stream.keyBy(_jvm().KeyByKeySelector(), Types.ROW([key_type]).get_java_type_info())
    return KeyedStream(j_keyed, value_type, stream)


def side_output(stream: Any, tag: Any) -> Any:
    """A side output as a DataStream, without the Python identity map `DataStream.get_side_output` adds."""
    from pyflink.datastream import DataStream

    return DataStream(stream._j_data_stream.getSideOutput(tag.get_java_output_tag()))


def effective_setting(env: Any, key: str) -> str | None:
    """The value of Flink configuration `key` the environment runs with (cluster configuration,
    `flink run` options, the operator's settings), or None."""
    value = env._j_stream_execution_environment.getConfiguration().toMap().get(key)
    return None if value is None else str(value)


def load_file_systems(configuration: dict[str, str]) -> None:
    """Initialise Flink's file systems in this JVM (the mini-cluster's) from `configuration`, with the
    plugins of the gateway's $FLINK_PLUGINS_DIR, as a cluster's entry point does at its start."""
    jvm = _jvm()
    conf = jvm.org.apache.flink.configuration.Configuration.fromMap(_java_strings(configuration))
    plugins = jvm.org.apache.flink.core.plugin.PluginUtils.createPluginManagerFromRootFolder(conf)
    jvm.org.apache.flink.core.fs.FileSystem.initialize(conf, plugins)
