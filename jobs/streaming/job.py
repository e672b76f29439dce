"""`pwevent run`: the streaming job on Flink (Kafka in, Kafka out; docs/streaming.md).

This module configures and runs the job: its Flink configuration, a local run or the command that
submits it to a cluster, checkpoints, and what a start reads from the topics before the graph is
built (the requirements backlog, the restore seed, a resumed job's decided slots). The graph itself,
stage by stage, is jobs/streaming/graph.py ("Topology").

Python workers import `pwevent.*` from a copy of the package's sources (jobs/streaming/locations.py,
`python_root`); the jars come from jobs/streaming/jars.py, in a checkout or installed from the wheel.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import shutil
import socket
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from pwevent.jobs.common.config import Config, ConfigError, load_config
from pwevent.jobs.common.extras import STREAM
from pwevent.jobs.streaming.graph import build_pipeline
from pwevent.jobs.streaming.jars import (
    OAUTHBEARER_PARENT_FIRST,
    PARENT_FIRST_KEY,
    connector_jar,
    jvm_jar,
    metrics_lib,
    security_jars,
)
from pwevent.jobs.streaming.locations import python_root
from pwevent.jobs.streaming.settings import PROMETHEUS_PREFIX, StreamSettings, stream_settings

#: Flink's Prometheus reporter bound to one address (jobs/streaming/jvm-metrics).
PROMETHEUS_REPORTER = "org.apache.flink.metrics.prometheus.LoopbackPrometheusReporterFactory"


def flink_configuration(settings: StreamSettings, restore: str | None,
                        allow_non_restored: bool = False) -> dict[str, str]:
    """The job's Flink configuration: `flink.extra` first, then the keys the job owns
    (settings.OWNED_FLINK_KEYS; `flink.extra` cannot hold them)."""
    f = settings.flink
    checkpoints = f.checkpoint_dir if "://" in f.checkpoint_dir else "file://" + f.checkpoint_dir
    conf = dict(f.extra)
    conf.update({
        "python.execution-mode": f.execution_mode,
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "python.fn-execution.bundle.size": str(f.bundle_size),
        "python.fn-execution.bundle.time": str(f.bundle_time_ms),
        "pipeline.auto-watermark-interval": "100 ms",
        "parallelism.default": str(f.parallelism),
        "execution.checkpointing.interval": f"{f.checkpoint_interval_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.dir": checkpoints,
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.checkpointing.num-retained": "3",
        "execution.checkpointing.min-pause": "0 ms",
        # A step that holds the barrier longer than the timeout (Membership closing the slot of a
        # million registrations fires a million timers at one watermark) expires checkpoints; with no
        # tolerance the job failed over to the checkpoint before the step and began it again, forever.
        "execution.checkpointing.timeout": f"{f.checkpoint_timeout_ms} ms",
        "execution.checkpointing.tolerable-failed-checkpoints": str(f.tolerable_failed_checkpoints),
        # Chained operators hand records over without a copy: the SQL operators copy what they keep,
        # the job's Java pieces keep and change nothing, Python operators get serialised copies.
        # Measured: the backlog rate from 49,938 to 67,607 events/s (docs/streaming.md, benchmark).
        "pipeline.object-reuse": "true",
        "state.backend.type": f.state_backend,
        "execution.checkpointing.incremental": str(f.incremental_checkpoints).lower(),
        # rocksdb: most Membership lookups are of users it has never seen (every registration);
        # without bloom filters each such miss searches every file (measured: registrations read
        # fell from ~2,500/s to ~400/s after half a million users).
        "state.backend.rocksdb.use-bloom-filter": "true",
        # rocksdb: timers on the heap (Flink's advice for many timers: a RocksDB timer queue slows
        # down behind the tombstones of fired timers); every registration fires one Membership timer.
        "state.backend.rocksdb.timer-service.factory": "HEAP",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": str(f.restart_attempts),
        "restart-strategy.fixed-delay.delay": f"{f.restart_delay_ms} ms",
        # The SQL operators get uids from the planner (node id, node type, transformation), as the
        # DataStream operators have theirs: a restore maps state by uid (docs/operations.md,
        # "Savepoints, upgrades and rescaling"). The type in the uid turns a shifted plan into a
        # refused restore instead of state handed to another kind of operator.
        "table.exec.uid.generation": "ALWAYS",
        "table.exec.uid.format": "<id>_<type>_<transformation>",
    })
    if f.prometheus is not None:  # docs/operations.md, "Metrics"
        reporter = PROMETHEUS_PREFIX
        conf[reporter + "factory.class"] = PROMETHEUS_REPORTER
        conf[reporter + "host"] = f.prometheus.host
        conf[reporter + "port"] = f.prometheus.port
    if restore:
        conf["execution.state-recovery.path"] = restore
        if allow_non_restored:
            conf["execution.state-recovery.ignore-unclaimed-state"] = "true"
    return conf


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The newest completed checkpoint (a chk-N folder with _metadata) under the checkpoint dir."""
    base = checkpoint_dir.removeprefix("file://")
    found = glob.glob(os.path.join(base, "*", "chk-*", "_metadata"))
    if not found:
        return None
    return os.path.dirname(max(found, key=os.path.getmtime))


def clean_checkpoints(checkpoint_dir: str, keep: int, restore: str | None) -> list[str]:
    """Remove the checkpoint folders of earlier jobs (docs/operations.md, "Savepoints, upgrades and
    rescaling"): under a local checkpoint dir, every job-id folder except the `keep` + 1 whose
    newest completed checkpoint is newest (the first is what `--restore latest` picks) and the one
    `restore` lies in. Folders without a completed checkpoint are earlier jobs' too. Remote stores
    (s3://, ...) are left alone. Returns the removed folders."""
    if "://" in checkpoint_dir and not checkpoint_dir.startswith("file://"):
        return []
    base = Path(checkpoint_dir.removeprefix("file://"))
    if not base.is_dir():
        return []
    jobs = [p for p in base.iterdir() if p.is_dir() and re.fullmatch("[0-9a-f]{32}", p.name)]

    def newest(folder: Path) -> float:
        done = [m.stat().st_mtime for m in folder.glob("chk-*/_metadata")]
        return max(done, default=-1.0)

    ranked = sorted(jobs, key=newest, reverse=True)
    kept = {p for p in ranked[:keep + 1] if newest(p) >= 0}
    if restore:
        local = Path(restore.removeprefix("file://").removeprefix("file:")).resolve()
        kept |= {p for p in jobs if p.resolve() in local.parents}
    removed = [p for p in jobs if p not in kept]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return [str(p) for p in removed]


def free_loopback_port() -> int:
    """A port nothing listens on at 127.0.0.1 now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class LocalRun:
    """Where a local run can be reached and read: its REST API / web UI and its own log folder."""

    rest: str
    log_dir: Path


#: log4j 2 configuration of a local run's JVM. PyFlink's default (conf/log4j-cli.properties) opens
#: the file with append=false and re-reads itself every 30 s; a second open of the same file (a
#: reconfiguration, another JVM) then empties what the run had logged. This one appends and never
#: reconfigures; the folder is the run's own, so appending mixes nothing.
RUN_LOG4J = """\
rootLogger.level = ${env:ROOT_LOG_LEVEL:-INFO}
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = FILE
appender.file.append = true
appender.file.fileName = ${sys:log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.netty.name = org.jboss.netty.channel.DefaultChannelPipeline
logger.netty.level = OFF
"""


def local_run(settings: StreamSettings) -> LocalRun:
    """A fresh log folder under flink.log_dir (Flink's log of this run only, named by start time and
    pid, with the log4j configuration the run's JVM reads), and the REST address on loopback
    (flink.web_port, else a free port)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log_dir = Path(settings.flink.log_dir) / f"run-{stamp}-{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "log4j.properties").write_text(RUN_LOG4J)
    return LocalRun(f"127.0.0.1:{settings.flink.web_port or free_loopback_port()}", log_dir)


#: Managed memory holds RocksDB's block cache and write buffers, shared by every keyed operator of a
#: slot. A local run's mini-cluster gives it 128 MB unless told; at 1,000,000 registered users almost
#: every state lookup then missed the cache, and Membership closed the registrations' slot at 300-400
#: users per second, against about 23,000 with 2 GB (docs/benchmarks.md, "1M registered users").
#: `flink.extra` may set another size; on a cluster the TaskManagers' own configuration decides.
MANAGED_MEMORY = "taskmanager.memory.managed.size"
LOCAL_ROCKSDB_MANAGED_MEMORY = "2g"


def local_configuration(settings: StreamSettings, run: LocalRun | None) -> dict[str, str]:
    """What a local run's mini-cluster needs beyond `flink_configuration`: the REST address of `run`,
    with RocksDB the managed memory (unless `flink.extra` sets it), and with OAUTHBEARER the Kafka
    client, Jackson and jose4j parent-first (jars.OAUTHBEARER_PARENT_FIRST; make_environment puts
    them on the gateway's class path)."""
    local: dict[str, str] = {}
    if security_jars(settings.kafka.security):
        local[PARENT_FIRST_KEY] = OAUTHBEARER_PARENT_FIRST
    if settings.flink.state_backend == "rocksdb" and MANAGED_MEMORY not in settings.flink.extra:
        local[MANAGED_MEMORY] = LOCAL_ROCKSDB_MANAGED_MEMORY
    if run is not None:
        host, port = run.rest.rsplit(":", 1)
        local.update({"rest.bind-address": host, "rest.address": host, "rest.port": port})
    return local


def make_environment(settings: StreamSettings, restore: str | None,  # type: ignore[no-untyped-def]
                     run: LocalRun | None = None, allow_non_restored: bool = False):
    """A local (mini-cluster) environment configured for the job; sets PYTHONPATH for thread mode.
    With `run` (a job to execute, not only a graph to inspect): FLINK_LOG_DIR and LOG4J_PROPERTIES
    (read when PyFlink starts its JVM) are the run's own log folder and configuration, and the REST
    API listens at the run's address (`local_configuration`)."""
    classes = jvm_jar()
    root = str(python_root(classes))
    site = sysconfig.get_paths()["purelib"]
    parts = [root, site, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    if settings.flink.prometheus is not None:  # the gateway's class path, where the mini-cluster finds reporters
        import pyflink

        # With FLINK_HOME unset, PyFlink sets FLINK_LIB_DIR to its own lib folder when it starts the gateway.
        os.environ.setdefault("FLINK_HOME", os.path.dirname(pyflink.__file__))
        os.environ["FLINK_LIB_DIR"] = str(metrics_lib())
    extra_jars = security_jars(settings.kafka.security)
    if extra_jars:  # the gateway's class path (PyFlink adds $HADOOP_CLASSPATH to it): the parent class loader
        parts = [str(connector_jar()), *map(str, extra_jars), *filter(None, [os.environ.get("HADOOP_CLASSPATH")])]
        os.environ["HADOOP_CLASSPATH"] = os.pathsep.join(parts)
        system = [f"-D{key}={value}" for key, value in settings.kafka.security.jvm_system_properties().items()]
        if system:  # JVM_ARGS: read by PyFlink's gateway launcher, like HADOOP_CLASSPATH
            os.environ["JVM_ARGS"] = " ".join([*filter(None, [os.environ.get("JVM_ARGS")]), *system])
    if run is not None:
        os.environ["FLINK_LOG_DIR"] = str(run.log_dir)
        os.environ["LOG4J_PROPERTIES"] = str(run.log_dir / "log4j.properties")  # read by PyFlink's gateway launcher
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    conf = Configuration()
    local = local_configuration(settings, run)
    for key, value in {**flink_configuration(settings, restore, allow_non_restored), **local}.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.add_jars(connector_jar().resolve().as_uri(), classes.resolve().as_uri(),
                 *(jar.resolve().as_uri() for jar in extra_jars))
    env.add_python_file(root)
    return env, StreamTableEnvironment.create(env)


def submit_command(config_path: str, jobmanager: str | None = None, seed: int | None = None,
                   restore: str | None = None, resume: bool = False, allow_non_restored: bool = False) -> str:
    """The shell command that submits this job, detached, to a running Flink session cluster (the
    one at `jobmanager`, host:port of its REST endpoint, else the one in the CLI's configuration).
    Every path and argument is shell-quoted. `-p` is the configuration's `flink.parallelism` (the
    job's default parallelism; the Population and the events' ValidTime are pinned to 1 in the graph); `seed` (tests and
    reproduction only) is passed on to the job; `restore` (a checkpoint/savepoint path or `latest`)
    becomes `-s` (with `-n` when `allow_non_restored`) and tells the entry point that the job has
    state; `resume` is
    --resume-after-last-release (docs/streaming.md, "Starting twice").

    The client reads the configuration; the cluster's TaskManagers need the interpreter at the same
    path, its site-packages on their PYTHONPATH (thread mode) and a checkpoint directory they reach
    (docs/streaming.md, "Submitting to a cluster")."""
    import pyflink

    config = load_config(config_path)
    settings = stream_settings(config, str(Path(config_path).resolve().parent))
    flink_home = Path(pyflink.__file__).parent
    py = sys.executable
    workers = python_root(jvm_jar())
    if restore == "latest":
        restore = latest_checkpoint(settings.flink.checkpoint_dir)
        if restore is None:
            raise ConfigError(f"--restore latest: no completed checkpoint under {settings.flink.checkpoint_dir}")
    argv = [str(flink_home / "bin" / "flink"), "run", "-d", *(["-m", jobmanager] if jobmanager else []),
            *(["-s", restore] if restore else []), *(["-n"] if restore and allow_non_restored else []),
            "-p", str(settings.flink.parallelism),
            "--jarfile", str(connector_jar()), "-pyclientexec", py, "-pyexec", py, "-pyfs", str(workers),
            "-py", str(Path(__file__).resolve()), "--config", str(Path(config_path).resolve()),
            *(["--seed", str(seed)] if seed is not None else []), *(["--restore", restore] if restore else []),
            *(["--resume-after-last-release"] if resume else [])]
    env = f"FLINK_HOME={shlex.quote(str(flink_home))} PYTHONPATH={shlex.quote(str(workers))}"
    return f"{env} {shlex.join(argv)}"


#: How many of each requirements partition's last offsets `requirements_backlog` looks at for its last
#: committed record (the rest may be transaction markers and aborted records).
BACKLOG_LOOK_BACK = 100


def requirements_backlog(settings: StreamSettings) -> dict[int, int] | None:
    """Per requirements partition, one past its last committed record when the job is built
    (docs/streaming.md, "Time": a partition then stops holding event time back once it has read that
    record, instead of after `source_idleness`; 0 for a partition that holds no offset at all: when
    every one is so, as for an events-only job, the partitions stop holding it back at once, instead
    of after `source_start_grace`); None, with a note, when the broker does not tell
    (the job then waits for `source_idleness` as before), and None in `execution_mode: process`,
    where the idle status would overtake the records still in the requirements parser's bundle."""
    from kafka.errors import KafkaError

    from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, empty_partitions, record_ends

    if settings.flink.execution_mode == "process":
        return None
    topic = settings.kafka.topics["requirements"]
    try:
        ends = record_ends(settings.kafka, topic, BACKLOG_LOOK_BACK)
        return {**ends, **dict.fromkeys(empty_partitions(settings.kafka, topic), 0)}
    except (BrokerUnavailableError, KafkaError) as err:
        print(f"pwevent run: requirements backlog unknown ({err}); its partitions idle after "
              "flink.source_idleness", file=sys.stderr)
        return None


def restored_read_to_end(settings: StreamSettings) -> frozenset[str]:
    """For a restored job: the sources whose consumer group had committed, for every partition, the
    offset past its last committed record when the job is built (docs/streaming.md, "Time"; the
    source commits its offsets at each completed checkpoint, so a job restored from its latest one
    then has nothing left to read there). Their partitions that give no record skip
    `source_start_grace`. A source the broker says nothing about keeps the grace, with a note."""
    from kafka.errors import KafkaError

    from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, read_to_end

    kafka, read = settings.kafka, set()
    for role in ("events", "requirements"):
        try:
            if read_to_end(kafka, kafka.topics[role], kafka.source_group_id(role), BACKLOG_LOOK_BACK):
                read.add(role)
        except (BrokerUnavailableError, KafkaError) as err:
            print(f"pwevent run: whether the {role} readers are at their end is unknown ({err})", file=sys.stderr)
    if read:
        print(f"pwevent run: the restored {' and '.join(sorted(read))} readers have nothing left to read; "
              "their silent partitions skip flink.source_start_grace", file=sys.stderr)
    return frozenset(read)


#: How many of each events partition's last records `restore_seed` looks at for a valid event time.
SEED_LOOK_BACK = 100


def restore_seed(config: Config, settings: StreamSettings) -> int | None:
    """For a restored job: the smallest, over the events partitions that hold records, of the latest
    valid event time among each one's last SEED_LOOK_BACK records (docs/streaming.md, "Time": the
    slot a partition silent since the restore closes). None when a partition with records has no
    valid time there, or the broker does not tell: such a partition then closes nothing, as before."""
    from kafka.errors import KafkaError

    from pwevent.jobs.common.reasons import Rejected
    from pwevent.jobs.common.records import parse_event
    from pwevent.jobs.streaming.hosts import kafka_timestamp
    from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, last_messages

    kafka_time = settings.kafka.event_time == "kafka"
    try:
        by_partition = last_messages(settings.kafka, settings.kafka.topics["events"], SEED_LOOK_BACK)
    except (BrokerUnavailableError, KafkaError) as err:
        print(f"pwevent run: no restore seed ({err})", file=sys.stderr)
        return None
    times: dict[int, list[int]] = {}
    for partition, messages in by_partition.items():
        times[partition] = []
        for message in messages:
            try:
                times[partition].append(parse_event(message.value or b"", config.events, config.domain,
                                                    kafka_timestamp(kafka_time, message.timestamp_ms),
                                                    config.max_record_bytes).time_ms)
            except Rejected:
                continue
        if messages and not times[partition]:
            return None
    return seed_time(times, int(time.time() * 1000), settings.flink.max_lead_ms)


def seed_time(times: dict[int, list[int]], now_ms: int, max_lead_ms: int) -> int | None:
    """The restore seed from each partition's recent valid event times: per partition the latest
    time another record confirms (the second largest; a partition with one record, that one), never
    one more than `max_lead_ms` past `now_ms` (0: no bound), so that one forged far-future record
    cannot close slots, as SlotWatermarks' lead guard holds it back in the stream; then the smallest
    over the partitions that hold records."""
    latest = []
    for found in times.values():
        believable = sorted(t for t in found if max_lead_ms <= 0 or t <= now_ms + max_lead_ms)
        if found and not believable:
            return None
        if believable:
            latest.append(believable[-2] if len(believable) > 1 else believable[-1])
    return min(latest) if latest else None


def late_through(settings: StreamSettings, restored: str | None, cells: int) -> int:
    """The slot up to which the job judges every event `late` (`build_pipeline`): for a job that may
    start without state (`restored` None, or "ha:..." where the cluster decides) under
    `kafka.resume_after_last_release`, the slot it will resume after (the Population checks it,
    docs/streaming.md, "Starting twice"); else 0. Under high availability a recovered job's state has
    decided at least every committed release, so the bound drops nothing it still needs."""
    from pwevent.jobs.streaming.release_guard import read_guard_inputs

    if not settings.kafka.resume_after_last_release or (restored and not restored.startswith("ha:")):
        return 0
    point = read_guard_inputs(settings.kafka, cells).resume_point()
    if point is None:
        return 0
    print(f"pwevent run: resuming after slot {point.slot} with fresh ledgers unless state is restored; "
          "events up to it are late", file=sys.stderr)
    return point.slot


def with_resume(settings: StreamSettings, resume: bool) -> StreamSettings:
    """`settings` with kafka.resume_after_last_release on when `resume` (the --resume-after-last-release
    shorthand)."""
    if not resume:
        return settings
    kafka = settings.kafka.model_copy(update={"resume_after_last_release": True})
    return settings.model_copy(update={"kafka": kafka})


def run_job(config_path: str, seed: int | None = None, restore: str | None = None,
            ready_file: str | None = None, resume: bool = False, allow_non_restored: bool = False) -> int:
    """Build and run the job on the local mini-cluster until it is cancelled, stopped or killed."""
    config = load_config(config_path)
    settings = with_resume(stream_settings(config, str(Path(config_path).resolve().parent)), resume)
    settings.kafka.require_bootstrap()
    if restore == "latest":
        restore = latest_checkpoint(settings.flink.checkpoint_dir)
        print(f"pwevent run: restoring from {restore or 'nothing (no checkpoint yet)'}", file=sys.stderr)
    start = late_through(settings, restore, config.domain.d)
    for folder in clean_checkpoints(settings.flink.checkpoint_dir, settings.flink.retained_jobs, restore):
        print(f"pwevent run: removed the checkpoints of an earlier job, {folder}", file=sys.stderr)
    run = local_run(settings)
    env, t_env = make_environment(settings, restore, run, allow_non_restored)
    build_pipeline(env, t_env, config, settings, seed, start, requirements_backlog(settings),
                   restore_seed(config, settings) if restore else None,
                   restored_read_to_end(settings) if restore else frozenset())
    client = env.execute_async(f"pwevent {config.mechanism}")
    job_id = client.get_job_id()
    print(f"pwevent run: job {job_id} submitted; checkpoints under {settings.flink.checkpoint_dir}", file=sys.stderr)
    print(f"pwevent run: web UI and REST API at http://{run.rest} (loopback only); Flink log in {run.log_dir}",
          file=sys.stderr, flush=True)
    if ready_file:
        deadline = time.monotonic() + 120
        while "RUNNING" not in str(client.get_job_status().result()) and time.monotonic() < deadline:
            time.sleep(0.2)
        Path(ready_file).write_text(str(job_id))
    from py4j.protocol import Py4JJavaError

    try:
        client.get_job_execution_result().result()
    except Py4JJavaError as err:  # the job failed (after its restart attempts)
        text = str(err)
        refused = re.search(r"(restore refused|refusing to start): [^\n]*", text)
        reason = refused.group(0) if refused else text.strip().splitlines()[0][:500]
        print(f"pwevent run: job {job_id} failed: {reason}\n(the whole trace: {run.log_dir})", file=sys.stderr)
        return 2 if refused and refused.group(1) == "refusing to start" else 1
    return 0


RECOVERY_PATH = "execution.state-recovery.path"
HA_TYPE = "high-availability.type"


def cluster_restore(recovery_path: str | None, ha_type: str | None) -> str | None:
    """What the entry point treats as restored state when the cluster, not `--restore`, decides it
    (docs/kubernetes.md, "State"): a recovery path the cluster was given (the Kubernetes operator's
    savepoint upgrade, `flink run -s`), or, under high availability, the cluster's own recovery of
    its latest checkpoint ("ha:<type>"), since in application mode this entry point runs again on
    every JobManager fail-over, though after a loss of the HA metadata it starts without state. It
    only bounds `late_through`: the Population itself checks the release topic whenever it finds no
    state (docs/streaming.md, "Starting twice")."""
    if recovery_path:
        return recovery_path
    if ha_type and ha_type.lower() not in ("none", ""):
        return f"ha:{ha_type}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point for `flink run -py jobs/streaming/job.py --config FILE` (cluster submission)."""
    parser = argparse.ArgumentParser(prog="flink_job.py")
    parser.add_argument("--config", required=True)
    parser.add_argument("--seed", type=int, help="TEST/REPRODUCTION ONLY: seeded numpy noise")
    parser.add_argument("--restore", help="the path `flink run -s` restores from (the job has state)")
    parser.add_argument("--resume-after-last-release", action="store_true")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    settings = with_resume(stream_settings(config, str(Path(args.config).resolve().parent)),
                           args.resume_after_last_release)
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    from pwevent.jobs.streaming.pyflink_internals import effective_setting

    conf = Configuration()
    for key, value in flink_configuration(settings, None).items():
        if not key.startswith(("python.executable", "python.client.executable", "pipeline.jars")):
            conf.set_string(key, value)  # interpreters and the connector jar come from `flink run`
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    restored = args.restore or cluster_restore(effective_setting(env, RECOVERY_PATH), effective_setting(env, HA_TYPE))
    start = late_through(settings, restored, config.domain.d)
    # The job's JVM jar, by `add_jars`, both halves needed (tested on a standalone cluster,
    # tests/integration/test_cluster_submit.py): it puts the jar on the py4j gateway's context class
    # loader (the client constructs PositionedRecords and SlotWatermarks), and appends it to this
    # environment's `pipeline.jars` after the `--jarfile` connector jar, so the client uploads it with
    # the job graph and the JobManager and TaskManagers load it from their blob servers: no path on the
    # cluster's hosts, unlike `-C`. With the class loader alone, submission fails in the JobManager
    # (ClassNotFoundException: pwevent.flink.PositionedRecords, deserialising the Kafka source).
    env.add_jars(jvm_jar().resolve().as_uri(),
                 *(jar.resolve().as_uri() for jar in security_jars(settings.kafka.security)))
    t_env = StreamTableEnvironment.create(env)
    build_pipeline(env, t_env, config, settings, args.seed, start, requirements_backlog(settings),
                   restore_seed(config, settings) if restored else None,
                   restored_read_to_end(settings) if restored else frozenset())
    env.execute(f"pwevent {config.mechanism}")
    return 0



def cmd_run(args: argparse.Namespace) -> int:
    STREAM.require()  # the extra `stream` (docs/architecture.md, "Dependencies")
    if args.print_submit:
        print(submit_command(args.config, args.jobmanager, args.seed, args.restore, args.resume_after_last_release,
                             args.allow_non_restored_state))
        return 0
    return run_job(args.config, args.seed, args.restore, args.ready_file, args.resume_after_last_release,
                   args.allow_non_restored_state)


def register(sub) -> None:  # type: ignore[no-untyped-def]
    p = sub.add_parser(
        "run", help="run the streaming job (Kafka in and out) on Flink's local mini-cluster",
        description="Build the Flink job (Kafka sources with per-partition slot watermarks, SQL parsing and "
        "per-slot counts, keyed Membership, the global Population; releases, dead letters and the audit "
        "log written exactly once) and run it on the local mini-cluster until killed. See docs/streaming.md.",
    )
    p.add_argument("--config", required=True, help="YAML configuration with kafka: and flink: sections")
    p.add_argument("--restore", help="checkpoint/savepoint path to restore from, or 'latest' (the newest "
                   "completed checkpoint under flink.checkpoint_dir)")
    p.add_argument("--allow-non-restored-state", action="store_true",
                   help="with --restore: start even if some state in it belongs to no operator of this job "
                   "(an upgrade that removed or renamed a stateful operator; docs/operations.md, 'Savepoints, "
                   "upgrades and rescaling')")
    p.add_argument("--resume-after-last-release", action="store_true",
                   help="shorthand for kafka.resume_after_last_release: true: when the release topic already "
                   "holds releases and no state is restored, continue after the last release the audit topic "
                   "confirms, with fresh ledgers (users' budgets in windows spanning the restart can be spent "
                   "twice; docs/streaming.md, 'Starting twice'); without either the job refuses")
    p.add_argument("--seed", type=int, help="TEST/REPRODUCTION ONLY: seeded numpy noise instead of the secure "
                   "default")
    p.add_argument("--ready-file",
                   help="write the job id to this file once the job is RUNNING")
    p.add_argument("--print-submit", action="store_true",
                   help="print the command that submits the job (detached) to a Flink session cluster, and exit "
                   "(with -p flink.parallelism, and --seed if given)")
    p.add_argument("--jobmanager", metavar="HOST:PORT",
                   help="with --print-submit: the cluster's REST address (else the flink CLI's configuration)")
    p.set_defaults(func=cmd_run)


if __name__ == "__main__":
    sys.exit(main())
