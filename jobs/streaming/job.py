"""`pwevent run`: the streaming job on Flink (Kafka in, Kafka out; docs/streaming.md).

This module runs the job: a local run (its environment, jobs/streaming/local_run.py) or the command
that submits it to a cluster, with its Flink configuration (jobs/streaming/flink_config.py),
checkpoints, and what a start reads from the topics before the graph is built (a resumed job's
decided slots). The graph itself,
stage by stage, is jobs/streaming/graph.py ("Topology").

Python workers import `pwevent.*` from a copy of the package's sources (jobs/streaming/locations.py,
`python_root`); the jars come from jobs/streaming/jars.py, in a checkout or installed from the wheel.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import sys
import sysconfig
import time
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

from pwevent.jobs.common.config import Config, ConfigError, load_config
from pwevent.jobs.common.extras import STREAM
from pwevent.jobs.common.statistic_cells import MAX_JOINT_CELLS, joint_size
from pwevent.jobs.streaming.checkpoints import (
    HA_TYPE,
    RECOVERY_PATH,
    clean_checkpoints,
    cluster_restore,
    latest_checkpoint,
)
from pwevent.jobs.streaming.flink_config import flink_configuration
from pwevent.jobs.streaming.graph import build_pipeline
from pwevent.jobs.streaming.jars import connector_jar, jvm_jar, metrics_lib, s3_plugins_dir, security_jars
from pwevent.jobs.streaming.kafka_io import require_topics
from pwevent.jobs.streaming.local_run import LocalRun, local_configuration, local_run, with_jvm_args
from pwevent.jobs.streaming.locations import python_root
from pwevent.jobs.streaming.object_store import S3Settings, is_object_store
from pwevent.jobs.streaming.settings import StreamSettings, stream_settings
from pwevent.jobs.streaming.startup import StartReads

#: The switch without which `pwevent run` refuses test randomness (docs/streaming.md, "Test randomness").
TEST_RANDOMNESS_SWITCH = "--insecure-test-randomness"
#: The topics a start checks before any work (`kafka_io.require_topics`): the ones the job reads.
INPUT_TOPICS = ("events", "requirements")


def insecure_randomness(noise: str, seed: int | None) -> str | None:
    """What makes a run's noise unfit for production, named as the user wrote it, or None for
    production's (OpenDP's sampler, unseeded; docs/mechanisms.md section 10)."""
    if seed is not None:
        return ("--seed makes the noise predictable: whoever knows the seed and the public registrations "
                "subtracts it and reads the true counts")
    if noise == "numpy-fast":
        return "noise: numpy-fast draws numpy's floating-point geometric sampler, not OpenDP's vetted one"
    return None


def refuse_several_statistics(config: Config, settings: StreamSettings) -> None:
    """ConfigError (exit 2) for what the job does not do with several statistics (docs/streaming.md,
    "Several statistics"): resume after its last releases without state, or carry joint cells beyond
    a Java int."""
    if len(config.statistics) == 1:
        return
    if settings.kafka.resume_after_last_release:
        raise ConfigError("kafka.resume_after_last_release: a job with several statistics does not resume after its "
                          "last releases without state; restore its state, or start a new job on new topics")
    if joint_size(config.statistics) > MAX_JOINT_CELLS:
        raise ConfigError(f"statistics: the domains' sizes multiply to {joint_size(config.statistics)}, more than the "
                          f"{MAX_JOINT_CELLS} joint cells the job's rows carry")


def refuse_insecure_randomness(noise: str, seed: int | None, allowed: bool, submission: bool = False) -> None:
    """ConfigError (exit 2) when the run would draw test randomness: without the test switch
    (`allowed`), and for a printed cluster submission (`submission`) even with it."""
    why = insecure_randomness(noise, seed)
    if why is None or (allowed and not submission):
        return
    if submission:
        raise ConfigError(f"{why}; --print-submit never prints a cluster submission with test randomness, not "
                          f"even with {TEST_RANDOMNESS_SWITCH} (use noise: opendp and no --seed)")
    raise ConfigError(f"{why}; it is for tests only, and `run` starts it only with {TEST_RANDOMNESS_SWITCH}")


def make_environment(settings: StreamSettings, restore: str | None,  # type: ignore[no-untyped-def]
                     run: LocalRun | None = None, allow_non_restored: bool = False):
    """A local (mini-cluster) environment configured for the job; sets PYTHONPATH for thread mode.
    With `run` (a job to execute, not only a graph to inspect): FLINK_LOG_DIR, LOG4J_PROPERTIES and
    the JVM's temporary folder (read when PyFlink starts its JVM) are the run's own, and the REST
    API listens at the run's address (`local_configuration`). State on an object store (flink.s3 set,
    or an s3:// checkpoint dir or restore path): the JVM loads Flink's S3 file system from the plugins
    folder of jars.s3_plugins_dir, configured by `flink.s3` (its credentials stay out of the job's
    configuration). A JVM system property of
    `kafka.security` that JVM_ARGS cannot carry is a ConfigError, raised before anything is set."""
    system = [f"-D{key}={value}" for key, value in settings.kafka.security.jvm_system_properties().items()]
    try:
        jvm_args = with_jvm_args(os.environ.get("JVM_ARGS"), *system)
    except ValueError as err:
        raise ConfigError(f"kafka.security: a local run passes {err}: use a path or URL without white space "
                          "(kerberos.krb5_conf, oauth.token_endpoint)") from None
    classes = jvm_jar()
    root = str(python_root(classes))
    site = sysconfig.get_paths()["purelib"]
    parts = [root, site, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    places = (settings.flink.checkpoint_dir, restore or "")
    on_store = settings.flink.s3 is not None or any(map(is_object_store, places))
    if settings.flink.prometheus is not None or on_store:
        import pyflink

        # With FLINK_HOME unset, PyFlink sets FLINK_LIB_DIR and FLINK_PLUGINS_DIR to its own folders when it
        # starts the gateway.
        os.environ.setdefault("FLINK_HOME", os.path.dirname(pyflink.__file__))
    if settings.flink.prometheus is not None:  # the gateway's class path, where the mini-cluster finds reporters
        os.environ["FLINK_LIB_DIR"] = str(metrics_lib())
    if on_store:  # read by PyFlink's gateway launcher; load_file_systems below loads the S3 file system from it
        os.environ["FLINK_PLUGINS_DIR"] = str(s3_plugins_dir())
    extra_jars = security_jars(settings.kafka.security)
    if extra_jars:  # the gateway's class path (PyFlink adds $HADOOP_CLASSPATH to it): the parent class loader
        parts = [str(connector_jar()), *map(str, extra_jars), *filter(None, [os.environ.get("HADOOP_CLASSPATH")])]
        os.environ["HADOOP_CLASSPATH"] = os.pathsep.join(parts)
    os.environ["JVM_ARGS"] = jvm_args  # read by PyFlink's gateway launcher, like HADOOP_CLASSPATH
    if run is not None:  # read by PyFlink's gateway launcher, like JVM_ARGS
        os.environ["FLINK_LOG_DIR"] = str(run.log_dir)
        os.environ["LOG4J_PROPERTIES"] = str(run.log_dir / "log4j.properties")
        with suppress(ValueError):  # a folder with white space: the JVM keeps its default (/tmp)
            os.environ["JVM_ARGS"] = with_jvm_args(os.environ.get("JVM_ARGS"), f"-Djava.io.tmpdir={run.tmp_dir}")
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    from pwevent.jobs.streaming.pyflink_internals import load_file_systems

    conf = Configuration()
    keys = {**flink_configuration(settings, restore, allow_non_restored), **local_configuration(settings, run)}
    for key, value in keys.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    if on_store:
        load_file_systems({**keys, **(settings.flink.s3 or S3Settings()).flink_keys()})
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
    reproduction only) is passed on to the job, and with it or `noise: numpy-fast` the test switch
    (the tests' submissions to a local cluster; `pwevent run --print-submit` refuses both); `restore`
    (a checkpoint/savepoint path or `latest`) becomes `-s` (with `-n` when `allow_non_restored`) and
    tells the entry point that the job has state; `resume` is --resume-after-last-release
    (docs/streaming.md, "Starting twice").

    The client reads the configuration; the cluster's TaskManagers need the interpreter at the same
    path, its site-packages on their PYTHONPATH (thread mode) and a checkpoint directory they reach
    (docs/streaming.md, "Submitting to a cluster")."""
    import pyflink

    config = load_config(config_path)
    settings = stream_settings(config, str(Path(config_path).resolve().parent))
    refuse_several_statistics(config, with_resume(settings, resume))
    flink_home = Path(pyflink.__file__).parent
    py = sys.executable
    workers = python_root(jvm_jar())
    if restore == "latest":
        restore = latest_checkpoint(settings.flink.checkpoint_dir, settings.flink.s3)
        if restore is None:
            raise ConfigError(f"--restore latest: no completed checkpoint under {settings.flink.checkpoint_dir}")
    argv = [str(flink_home / "bin" / "flink"), "run", "-d", *(["-m", jobmanager] if jobmanager else []),
            *(["-s", restore] if restore else []), *(["-n"] if restore and allow_non_restored else []),
            "-p", str(settings.flink.parallelism),
            "--jarfile", str(connector_jar()), "-pyclientexec", py, "-pyexec", py, "-pyfs", str(workers),
            "-py", str(Path(__file__).resolve()), "--config", str(Path(config_path).resolve()),
            *([TEST_RANDOMNESS_SWITCH] if insecure_randomness(config.noise, seed) else []),
            *(["--seed", str(seed)] if seed is not None else []), *(["--restore", restore] if restore else []),
            *(["--resume-after-last-release"] if resume else [])]
    env = f"FLINK_HOME={shlex.quote(str(flink_home))} PYTHONPATH={shlex.quote(str(workers))}"
    return f"{env} {shlex.join(argv)}"


def with_resume(settings: StreamSettings, resume: bool) -> StreamSettings:
    """`settings` with kafka.resume_after_last_release on when `resume` (the --resume-after-last-release
    shorthand)."""
    if not resume:
        return settings
    kafka = settings.kafka.model_copy(update={"resume_after_last_release": True})
    return settings.model_copy(update={"kafka": kafka})


def _terminated(run: LocalRun, *_: Any) -> None:
    """SIGTERM: remove the run's temporary files and exit at once, as the signal's default would (an
    orderly interpreter exit would call the JVM, which the same signal to the group has ended)."""
    shutil.rmtree(run.tmp_dir, ignore_errors=True)
    os._exit(128 + signal.SIGTERM)


def announce_running(client: Any, ready_file: Path, timeout_s: float = 120) -> None:
    """Once the job of `client` (a PyFlink JobClient) is RUNNING, or after `timeout_s`, write its id
    to `ready_file`. The file appears whole (written beside it, then renamed), so whoever waits for
    it never reads it empty."""
    deadline = time.monotonic() + timeout_s
    while "RUNNING" not in str(client.get_job_status().result()) and time.monotonic() < deadline:
        time.sleep(0.2)
    partial_file = ready_file.with_name(ready_file.name + ".partial")
    partial_file.write_text(str(client.get_job_id()))
    os.replace(partial_file, ready_file)


def run_job(config_path: str, seed: int | None = None, restore: str | None = None,
            ready_file: str | None = None, resume: bool = False, allow_non_restored: bool = False,
            insecure_test_randomness: bool = False) -> int:
    """Build and run the job on the local mini-cluster until it is cancelled, stopped or killed; test
    randomness (`seed`, `noise: numpy-fast`) only with `insecure_test_randomness`."""
    config = load_config(config_path)
    refuse_insecure_randomness(config.noise, seed, insecure_test_randomness)
    settings = with_resume(stream_settings(config, str(Path(config_path).resolve().parent)), resume)
    refuse_several_statistics(config, settings)
    require_topics(settings.kafka, INPUT_TOPICS)
    if restore == "latest":
        restore = latest_checkpoint(settings.flink.checkpoint_dir, settings.flink.s3)
        print(f"pwevent run: restoring from {restore or 'nothing (no checkpoint yet)'}", file=sys.stderr)
    start = StartReads.read(config, settings, restore)
    for folder in clean_checkpoints(settings.flink.checkpoint_dir, settings.flink.retained_jobs, restore):
        print(f"pwevent run: removed the checkpoints of an earlier job, {folder}", file=sys.stderr)
    run = local_run(settings)
    signal.signal(signal.SIGTERM, partial(_terminated, run))
    try:
        env, t_env = make_environment(settings, restore, run, allow_non_restored)
        build_pipeline(env, t_env, config, settings, seed, start)
        client = env.execute_async(f"pwevent {config.mechanism}")
        job_id = client.get_job_id()
        print(f"pwevent run: job {job_id} submitted; checkpoints under {settings.flink.checkpoint_dir}",
              file=sys.stderr)
        print(f"pwevent run: web UI and REST API at http://{run.rest} (loopback only); Flink log in {run.log_dir}",
              file=sys.stderr, flush=True)
        if ready_file:
            announce_running(client, Path(ready_file))
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
    finally:  # the JVM leaves the jars it extracted (docs/operations.md, "Logs and the local web UI")
        shutil.rmtree(run.tmp_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point for `flink run -py jobs/streaming/job.py --config FILE` (cluster submission)."""
    parser = argparse.ArgumentParser(prog="flink_job.py")
    parser.add_argument("--config", required=True)
    parser.add_argument("--seed", type=int, help=f"TESTS ONLY: seeded numpy noise (with {TEST_RANDOMNESS_SWITCH})")
    parser.add_argument(TEST_RANDOMNESS_SWITCH, action="store_true",
                        help="TESTS ONLY: accept --seed and noise: numpy-fast (a local test cluster)")
    parser.add_argument("--restore", help="the path `flink run -s` restores from (the job has state)")
    parser.add_argument("--resume-after-last-release", action="store_true")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    try:
        refuse_insecure_randomness(config.noise, args.seed, args.insecure_test_randomness)
        settings = with_resume(stream_settings(config, str(Path(args.config).resolve().parent)),
                               args.resume_after_last_release)
        refuse_several_statistics(config, settings)
    except ConfigError as err:
        parser.error(str(err))
    require_topics(settings.kafka, INPUT_TOPICS)
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
    start = StartReads.read(config, settings, restored)
    # The job's JVM jar, by `add_jars`, both halves needed (tested on a standalone cluster,
    # tests/integration/test_cluster_submit.py): it puts the jar on the py4j gateway's context class
    # loader (the client constructs PositionedRecords and ValidTime), and appends it to this
    # environment's `pipeline.jars` after the `--jarfile` connector jar, so the client uploads it with
    # the job graph and the JobManager and TaskManagers load it from their blob servers: no path on the
    # cluster's hosts, unlike `-C`. With the class loader alone, submission fails in the JobManager
    # (ClassNotFoundException: pwevent.flink.parsing.PositionedRecords, deserialising the Kafka source).
    env.add_jars(jvm_jar().resolve().as_uri(),
                 *(jar.resolve().as_uri() for jar in security_jars(settings.kafka.security)))
    t_env = StreamTableEnvironment.create(env)
    build_pipeline(env, t_env, config, settings, args.seed, start)
    env.execute(f"pwevent {config.mechanism}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    STREAM.require()  # the extra `stream` (docs/architecture.md, "Dependencies")
    if args.print_submit:
        refuse_insecure_randomness(load_config(args.config).noise, args.seed, False, submission=True)
        print(submit_command(args.config, args.jobmanager, args.seed, args.restore, args.resume_after_last_release,
                             args.allow_non_restored_state))
        return 0
    return run_job(args.config, args.seed, args.restore, args.ready_file, args.resume_after_last_release,
                   args.allow_non_restored_state, args.insecure_test_randomness)


def register(sub) -> None:  # type: ignore[no-untyped-def]
    p = sub.add_parser(
        "run", help="run the streaming job (Kafka in and out) on Flink's local mini-cluster",
        description="Build the Flink job (Kafka sources, event time from valid records and the release "
        "schedule, SQL parsing and per-slot counts, keyed Membership, the global Population; releases, "
        "dead letters and the audit "
        "log written exactly once) and run it on the local mini-cluster until killed. Before any work it checks "
        "that the input topics (kafka.topics.events, .requirements) exist: a missing one is named, exit 4. "
        "Releases are written in release.format (json, or json-confluent / avro-confluent with their schema "
        "registered under <releases topic>-value at release.schema_registry when the job is built; "
        "docs/formats.md, 'Release'). See docs/streaming.md.",
    )
    p.add_argument("--config", required=True, help="YAML configuration with kafka:, flink: and release: sections")
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
    p.add_argument("--seed", type=int, help="TESTS ONLY, with --insecure-test-randomness: seeded numpy noise instead "
                   "of the secure default (predictable to whoever knows the seed)")
    p.add_argument(TEST_RANDOMNESS_SWITCH, action="store_true",
                   help="TESTS ONLY, NEVER IN PRODUCTION: start the job with test randomness, --seed (noise "
                   "predictable from the seed) or noise: numpy-fast (numpy's sampler, not OpenDP's); without this "
                   "switch `run` refuses both (exit 2), and --print-submit refuses them even with it")
    p.add_argument("--ready-file",
                   help="write the job id to this file once the job is RUNNING")
    p.add_argument("--print-submit", action="store_true",
                   help="print the command that submits the job (detached) to a Flink session cluster, and exit "
                   "(with -p flink.parallelism; never with test randomness, --seed or noise: numpy-fast)")
    p.add_argument("--jobmanager", metavar="HOST:PORT",
                   help="with --print-submit: the cluster's REST address (else the flink CLI's configuration)")
    p.set_defaults(func=cmd_run)


if __name__ == "__main__":
    sys.exit(main())
