"""`pwevent run`: the streaming job on Flink (Kafka in, keyed ledgers, global release, Kafka out).

Topology (docs/streaming.md):

    events, requirements (Kafka, with partition/offset/timestamp) -> ParseRecords -> event time
      -> key by user -> UserLedger  <- broadcast <- ParseDecision <- releases (read_committed)
      -> split by route: UserSlots -> per-slot groups (window aggregate) -> SlotReleaseHost
         -> releases (exactly once, key = slot); spend records (audit) and dead letters, both
         written exactly once.

Sources and sinks are Flink SQL Kafka tables (the DataStream KafkaSource in Python only offers
value-only deserialisers, and the dead letters need each record's partition and offset; the sinks
need the slot as the message key). The tables are bridged to the DataStream operators with
`to_data_stream`/`from_data_stream` and the inserts attached to the same pipeline.

Python workers import `pwevent.*` from a generated folder (`.run/pyroot/pwevent/{jobs,operators,state}`
linking to the repository's folders): the editable install's meta-path finder is only installed by
a `.pth` file, which the PYTHONPATH-based start-up of Flink's Python workers never processes.
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from pwevent.jobs.common.config import Config, load_config
from pwevent.jobs.common.slots import SlotClock
from pwevent.jobs.streaming.settings import REPO_ROOT, StreamSettings, stream_settings

CONNECTOR_JAR = REPO_ROOT / ".cache" / "jars" / "flink" / "flink-sql-connector-kafka-5.0.0-2.2.jar"
PYROOT = REPO_ROOT / ".run" / "pyroot"


def connector_jar() -> Path:
    """The Flink Kafka connector jar, fetched into the cache on first use."""
    jar = Path(os.environ.get("PWEVENT_KAFKA_CONNECTOR_JAR", CONNECTOR_JAR))
    if not jar.is_file():
        subprocess.run([str(REPO_ROOT / "deploy" / "local" / "fetch-jars.sh")], check=True, stdout=subprocess.DEVNULL)
    return jar


def python_root() -> Path:
    """A folder holding `pwevent/` (links to jobs/, operators/, state/) for Flink's Python workers."""
    package = PYROOT / "pwevent"
    package.mkdir(parents=True, exist_ok=True)
    for name in ("jobs", "operators", "state"):
        link = package / name
        if not link.is_symlink() or os.readlink(link) != str(REPO_ROOT / name):
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(REPO_ROOT / name, target_is_directory=True)
    return PYROOT


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"{_sql_str(k)} = {_sql_str(v)}" for k, v in options.items())


def _kafka_options(settings: StreamSettings, topic: str) -> dict[str, str]:
    kafka = settings.kafka
    options = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": kafka.require_bootstrap()}
    for key, value in kafka.properties.items():
        options[f"properties.{key}"] = value
    return options


def source_ddl(name: str, topic: str, role: str, settings: StreamSettings, watermark_ms: int | None = None) -> str:
    """A Kafka source table: the raw value plus partition, offset and record timestamp (`ts`, and as
    epoch milliseconds `ts_ms`: computed in Java, a Python worker would call into Java per record for
    it); with `watermark_ms`, `ts` is the rowtime with that bounded out-of-orderness. `ts_ms` is right
    only with the session time zone UTC (`build_pipeline` pins it)."""
    options = _kafka_options(settings, topic)
    options.update({
        "properties.group.id": f"{settings.kafka.group_id}-{role}",
        "properties.isolation.level": "read_committed",
        "scan.startup.mode": "earliest-offset",
        "format": "raw",
    })
    return (
        f"CREATE TEMPORARY TABLE `{name}` (`value` BYTES, `partition` INT METADATA VIRTUAL, "
        f"`offset` BIGINT METADATA VIRTUAL, `ts` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL, "
        "`ts_ms` AS EXTRACT(EPOCH FROM `ts`) * 1000 + EXTRACT(MILLISECOND FROM `ts`)"
        + ("" if watermark_ms is None
           else f", WATERMARK FOR `ts` AS `ts` - INTERVAL '{watermark_ms / 1000:.3f}' SECOND")
        + f") WITH ({_with(options)})"
    )


def sink_ddl(name: str, topic: str, role: str, keyed: bool, settings: StreamSettings) -> str:
    """An exactly-once Kafka sink table; keyed sinks take the first column as the message key."""
    kafka = settings.kafka
    options = _kafka_options(settings, topic)
    options.update({
        "sink.delivery-guarantee": "exactly-once",
        "sink.transactional-id-prefix": f"{kafka.transactional_id_prefix}-{role}",
        "properties.transaction.timeout.ms": str(kafka.transaction_timeout_ms),
        "value.format": "raw",
    })
    if keyed:
        options.update({"key.format": "raw", "key.fields": "k", "value.fields-include": "EXCEPT_KEY"})
        columns = "`k` STRING, `v` STRING"
    else:
        columns = "`v` STRING"
    return f"CREATE TEMPORARY TABLE `{name}` ({columns}) WITH ({_with(options)})"


def flink_configuration(settings: StreamSettings, restore: str | None) -> dict[str, str]:
    f = settings.flink
    checkpoints = f.checkpoint_dir if "://" in f.checkpoint_dir else "file://" + f.checkpoint_dir
    conf = {
        "python.execution-mode": f.execution_mode,
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "python.fn-execution.bundle.size": str(f.bundle_size),
        "python.fn-execution.bundle.time": str(f.bundle_time_ms),
        "pipeline.jars": connector_jar().resolve().as_uri(),
        "pipeline.auto-watermark-interval": "100 ms",
        "parallelism.default": str(f.parallelism),
        "execution.checkpointing.interval": f"{f.checkpoint_interval_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.dir": checkpoints,
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.checkpointing.num-retained": "3",
        "execution.checkpointing.min-pause": "0 ms",
        "state.backend.type": f.state_backend,
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "2 s",
    }
    if restore:
        conf["execution.state-recovery.path"] = restore
    return conf


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The newest completed checkpoint (a chk-N folder with _metadata) under the checkpoint dir."""
    base = checkpoint_dir.removeprefix("file://")
    found = glob.glob(os.path.join(base, "*", "chk-*", "_metadata"))
    if not found:
        return None
    return os.path.dirname(max(found, key=os.path.getmtime))


def _interval(ms: int) -> str:
    """A SQL day-time interval literal of `ms` milliseconds."""
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY(9) TO SECOND(3)"


def slot_groups_sql(view: str, clock: SlotClock, route: str) -> str:
    """The UserSlots of `view` (UserLedger's output) grouped per slot: users with the same cell and
    budgets form one row with their count. A tumbling event-time window per slot (aligned to the
    origin) emits a slot's groups when the watermark passes the slot's end, the watermark that fires
    the UserLedger timers that made them, so no UserSlot is late for its window."""
    offset = clock.origin_ms % clock.length_ms
    return (
        "SELECT 0 AS k, ROW(slot, cell, eps1, eps2, border, members) AS g FROM ("
        " SELECT slot, cell, eps1, eps2, border, COUNT(*) AS members"
        f" FROM TABLE(TUMBLE(TABLE `{view}`, DESCRIPTOR(rowtime), {_interval(clock.length_ms)},"
        f" {_interval(offset)}))"
        f" WHERE route = '{route}'"
        " GROUP BY window_start, window_end, slot, cell, eps1, eps2, border)"
    )


def _timestamped(stream, value_type, strategy):  # type: ignore[no-untyped-def]
    """(value, time_ms) records -> values carrying `time_ms` as their Flink timestamp, with watermarks
    from `strategy` (None: keep the timestamps and watermarks the stream already has).

    PyFlink's `assign_timestamps_and_watermarks` with a Python TimestampAssigner runs one more Python
    operator per record; the record already carries its time, so the Java operators PyFlink uses
    behind that assigner (CustomTimestampAssigner, RemoveTimestampMapFunction) do it alone."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    eventtime = get_gateway().jvm.org.apache.flink.streaming.api.functions.python.eventtime
    j_stream = stream._j_data_stream
    if strategy is not None:
        j_stream = j_stream.assignTimestampsAndWatermarks(
            strategy._j_watermark_strategy.withTimestampAssigner(eventtime.CustomTimestampAssigner()))
    return DataStream(j_stream.map(eventtime.RemoveTimestampMapFunction(), value_type.get_java_type_info()))


def _keyed_by_first_field(stream, key_type, value_type, names=None):  # type: ignore[no-untyped-def]
    """A stream of Row(key, value) keyed by its first field, in Java.

    PyFlink's `key_by` runs a Python operator per record to compute the key and builds this same
    Row(key, value) shape; the records here already have it, so only the Java key selector remains.
    A stream from `to_data_stream` (rows named `names`) is re-declared as the RowTypeInfo that
    PyFlink's keyed operators require (same Row objects, another serializer)."""
    from pyflink.common import Types
    from pyflink.datastream import KeyedStream
    from pyflink.java_gateway import get_gateway

    if names is not None:
        row_type = Types.ROW_NAMED(names, [key_type, value_type])
        stream._j_data_stream.getTransformation().setOutputType(row_type.get_java_type_info())
    j_keyed = stream._j_data_stream.keyBy(get_gateway().jvm.KeyByKeySelector(),
                                          Types.ROW([key_type]).get_java_type_info())
    return KeyedStream(j_keyed, value_type, stream)


def _side_output(stream, tag):  # type: ignore[no-untyped-def]
    """A side output as a DataStream, without the Python identity map `DataStream.get_side_output` adds."""
    from pyflink.datastream import DataStream

    return DataStream(stream._j_data_stream.getSideOutput(tag.get_java_output_tag()))


def build_pipeline(env, t_env, config: Config, settings: StreamSettings, seed: int | None) -> None:  # type: ignore[no-untyped-def]
    """Sources, operators and sinks of the job, added to `env` (executed by the caller).

    The Python operators: ParseRecords (events, requirements), ParseDecision, UserLedger and
    SlotReleaseHost. Event time, keying, the split of UserLedger's output and the slot groups are
    Java operators, so an input event crosses into Python twice, a user's slot once and a slot's
    group once (docs/streaming.md, Topology)."""
    from pyflink.common import Duration, Types, WatermarkStrategy
    from pyflink.table import Schema
    from pyflink.table.expressions import col

    from pwevent.jobs.streaming import hosts as fn

    topics = settings.kafka.topics
    kafka_time = settings.kafka.event_time == "kafka"
    # Slot windows (tumbling windows on TIMESTAMP_LTZ align to the session time zone) and `ts_ms`
    # assume UTC; the default is the JVM's zone.
    t_env.get_config().set("table.local-time-zone", "UTC")
    for role in ("events", "requirements", "releases"):
        watermark = settings.flink.out_of_orderness_ms if role != "releases" and kafka_time else None
        t_env.execute_sql(source_ddl(f"src_{role}", topics[role], role, settings, watermark))
    t_env.execute_sql(sink_ddl("sink_releases", topics["releases"], "releases", True, settings))
    t_env.execute_sql(sink_ddl("sink_dead_letters", topics["dead_letters"], "dead-letters", False, settings))
    t_env.execute_sql(sink_ddl("sink_audit", topics["audit"], "audit", False, settings))

    picked = Types.PICKLED_BYTE_ARRAY()
    if kafka_time:  # watermarks from the Kafka sources (per partition), idle partitions skipped
        t_env.get_config().set("table.exec.source.idle-timeout", f"{settings.flink.source_idleness_ms} ms")
    parsed = {}
    for role in ("events", "requirements"):
        # `ts` only where it is the rowtime (it sets the records' timestamps); Python reads `ts_ms`.
        columns = [col("value"), col("partition"), col("offset"), col("ts_ms")] + ([col("ts")] if kafka_time else [])
        rows = t_env.to_data_stream(t_env.from_path(f"src_{role}").select(*columns))
        parse = fn.ParseRecords(config, role, topics[role], kafka_time, settings.flink.max_lead_ms)
        parsed[role] = rows.process(parse, output_type=fn.PARSED).uid(f"parse-{role}").name(f"parse {role}")
    # Event time from a JSON field: watermarks after parsing (per subtask); from Kafka: the sources'.
    strategy = None if kafka_time else WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(settings.flink.out_of_orderness_ms))
    keyed_input = Types.ROW([Types.STRING(), picked])
    timed = _timestamped(parsed["events"].union(parsed["requirements"]), keyed_input, strategy) \
        .uid("event-time").name("event time")

    readback_rows = t_env.to_data_stream(t_env.from_path("src_releases").select(col("value"), col("partition"),
                                                                              col("offset")))
    decisions = readback_rows.process(fn.ParseDecision(topics["releases"]), output_type=picked) \
        .uid("parse-decisions").name("parse read-back releases")
    # The read-back must never hold the ledgers' event time back (there are no releases before the
    # first slot closes) nor push it forward: no watermarks at all, and idle after a short timeout,
    # so the two-input UserLedger follows the input watermark alone. It never turns active again:
    # only an emitted watermark would, and this strategy emits none.
    decisions_timed = decisions.assign_timestamps_and_watermarks(
        WatermarkStrategy.no_watermarks().with_idleness(Duration.of_millis(settings.flink.readback_idleness_ms))
    ).uid("readback-time").name("read-back (idle, no watermarks)")

    ledger_out = _keyed_by_first_field(timed, Types.STRING(), picked) \
        .connect(decisions_timed.broadcast(fn.DECISIONS)) \
        .process(fn.UserLedger(config, settings.flink.decisions_kept), output_type=fn.LEDGER_OUTPUT) \
        .uid("user-ledger").name("UserLedger")
    # UserLedger's output split by route in Java (Table API); watermarks carried through.
    ledger_table = t_env.from_data_stream(
        ledger_out,
        Schema.new_builder().column_by_metadata("rowtime", "TIMESTAMP_LTZ(3)")
        .watermark("rowtime", "SOURCE_WATERMARK()").build(),
    )
    t_env.create_temporary_view("user_ledger_out", ledger_table)

    def routed(route: str):  # type: ignore[no-untyped-def]
        return ledger_table.where(col("route") == route).select(col("v"))

    groups = t_env.to_data_stream(t_env.sql_query(slot_groups_sql("user_ledger_out", config.clock, fn.SLOT_ROUTE)))
    releases = _keyed_by_first_field(groups, Types.INT(), fn.SLOT_GROUP, ["k", "g"]) \
        .process(fn.SlotReleaseHost(config, seed),
                 output_type=Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.STRING()])) \
        .uid("slot-release").name("SlotRelease").set_parallelism(1).set_max_parallelism(1)

    parse_dead = _side_output(parsed["events"], fn.DEAD_LETTERS) \
        .union(_side_output(parsed["requirements"], fn.DEAD_LETTERS), _side_output(decisions, fn.DEAD_LETTERS))
    dead = t_env.from_data_stream(parse_dead).select(col("f0").alias("v")).union_all(routed(fn.DEAD_ROUTE))

    statements = t_env.create_statement_set()
    statements.add_insert("sink_releases", t_env.from_data_stream(releases))
    statements.add_insert("sink_dead_letters", dead)
    statements.add_insert("sink_audit", routed(fn.AUDIT_ROUTE))
    statements.attach_as_datastream()


def make_environment(settings: StreamSettings, restore: str | None):  # type: ignore[no-untyped-def]
    """A local (mini-cluster) environment configured for the job; sets PYTHONPATH for thread mode."""
    root = str(python_root())
    site = sysconfig.get_paths()["purelib"]
    parts = [root, site, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    conf = Configuration()
    for key, value in flink_configuration(settings, restore).items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.add_python_file(root)
    return env, StreamTableEnvironment.create(env)


def submit_command(config_path: str, jobmanager: str | None = None) -> str:
    """The shell command that submits this job, detached, to a running Flink session cluster (the
    one at `jobmanager`, host:port of its REST endpoint, else the one in the CLI's configuration).
    Every path and argument is shell-quoted.

    The client reads the configuration; the cluster's TaskManagers need the interpreter at the same
    path, its site-packages on their PYTHONPATH (thread mode) and a checkpoint directory they reach
    (docs/streaming.md, "Submitting to a cluster")."""
    import pyflink

    flink_home = Path(pyflink.__file__).parent
    py = sys.executable
    argv = [str(flink_home / "bin" / "flink"), "run", "-d", *(["-m", jobmanager] if jobmanager else []),
            "--jarfile", str(connector_jar()), "-pyclientexec", py, "-pyexec", py, "-pyfs", str(python_root()),
            "-py", str(Path(__file__).resolve()), "--config", str(Path(config_path).resolve())]
    env = f"FLINK_HOME={shlex.quote(str(flink_home))} PYTHONPATH={shlex.quote(str(python_root()))}"
    return f"{env} {shlex.join(argv)}"


def run_job(config_path: str, seed: int | None = None, restore: str | None = None,
            ready_file: str | None = None) -> int:
    """Build and run the job on the local mini-cluster until it is cancelled or killed."""
    config = load_config(config_path)
    settings = stream_settings(config, str(Path(config_path).resolve().parent))
    settings.kafka.require_bootstrap()
    if restore == "latest":
        restore = latest_checkpoint(settings.flink.checkpoint_dir)
        print(f"pwevent run: restoring from {restore or 'nothing (no checkpoint yet)'}", file=sys.stderr)
    env, t_env = make_environment(settings, restore)
    build_pipeline(env, t_env, config, settings, seed)
    client = env.execute_async(f"pwevent {config.mechanism}")
    job_id = client.get_job_id()
    print(f"pwevent run: job {job_id} submitted; checkpoints under {settings.flink.checkpoint_dir}", file=sys.stderr)
    if ready_file:
        deadline = time.monotonic() + 120
        while "RUNNING" not in str(client.get_job_status().result()) and time.monotonic() < deadline:
            time.sleep(0.2)
        Path(ready_file).write_text(str(job_id))
    client.get_job_execution_result().result()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for `flink run -py jobs/streaming/job.py --config FILE` (cluster submission)."""
    parser = argparse.ArgumentParser(prog="flink_job.py")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    config = load_config(args.config)
    settings = stream_settings(config, str(Path(args.config).resolve().parent))
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    conf = Configuration()
    for key, value in flink_configuration(settings, None).items():
        if not key.startswith(("python.executable", "python.client.executable", "pipeline.jars")):
            conf.set_string(key, value)  # interpreters and the connector jar come from `flink run`
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    t_env = StreamTableEnvironment.create(env)
    build_pipeline(env, t_env, config, settings, None)
    env.execute(f"pwevent {config.mechanism}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def cmd_run(args: argparse.Namespace) -> int:
    if args.print_submit:
        print(submit_command(args.config, args.jobmanager))
        return 0
    return run_job(args.config, args.seed, args.restore, args.ready_file)


def register(sub) -> None:  # type: ignore[no-untyped-def]
    p = sub.add_parser(
        "run", help="run the streaming job (Kafka in and out) on Flink's local mini-cluster",
        description="Build the Flink job (Kafka sources, keyed UserLedger, global SlotRelease, release "
        "read-back, dead-letter and audit outputs; exactly once) and run it on the local mini-cluster "
        "until killed. See docs/streaming.md.",
    )
    p.add_argument("--config", required=True, help="YAML configuration with kafka: and flink: sections")
    p.add_argument("--restore", help="checkpoint/savepoint path to restore from, or 'latest'")
    p.add_argument("--seed", type=int, help="TEST/REPRODUCTION ONLY: seeded numpy noise instead of the secure "
                   "default")
    p.add_argument("--ready-file", help="write the job id to this file once the job is RUNNING")
    p.add_argument("--print-submit", action="store_true",
                   help="print the command that submits the job (detached) to a Flink session cluster, and exit")
    p.add_argument("--jobmanager", metavar="HOST:PORT",
                   help="with --print-submit: the cluster's REST address (else the flink CLI's configuration)")
    p.set_defaults(func=cmd_run)
