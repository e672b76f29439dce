"""A local run of the streaming job on Flink's mini-cluster (`pwevent run` without a cluster;
docs/streaming.md): its own log folder with the log4j configuration its JVM reads, its temporary
folder, its REST address on loopback, and the configuration keys a mini-cluster needs beyond
jobs/streaming/flink_config.py."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pwevent.jobs.streaming.jars import PARENT_FIRST_KEY, parent_first_patterns
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.settings import StreamSettings


@dataclass(frozen=True)
class LocalRun:
    """Where a local run can be reached and read: its REST API / web UI and its own log folder."""

    rest: str
    log_dir: Path

    @property
    def tmp_dir(self) -> Path:
        """The run's JVM's temporary folder (`java.io.tmpdir`, hence Flink's `io.tmp.dirs`): the
        planner and RPC jars Flink extracts at every start (~65 MB), the mini-cluster's working
        folders. The JVM does not remove the jars; `run_job` removes the folder when the run ends, and
        a SIGKILLed run leaves it here, in the run's own folder, rather than in the machine's /tmp."""
        return self.log_dir / "tmp"


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


def with_jvm_args(current: str | None, *args: str) -> str:
    """`JVM_ARGS` (what PyFlink's gateway launcher and Flink's scripts add to a JVM's command line)
    with `args` after `current`: of two `-D` of one property, the later wins. The launcher splits
    `JVM_ARGS` at white space, so an argument holding any is refused (ValueError naming it)."""
    for arg in args:
        if any(c.isspace() for c in arg):
            raise ValueError(f"{arg!r} holds white space, at which JVM_ARGS is split")
    return " ".join([*filter(None, [current]), *args])


def local_run(settings: StreamSettings) -> LocalRun:
    """A fresh log folder under flink.log_dir (Flink's log of this run only, named by start time and
    pid, with the log4j configuration the run's JVM reads, and its temporary folder), and the REST
    address on loopback (flink.web_port, else a free port)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log_dir = Path(settings.flink.log_dir).resolve() / f"run-{stamp}-{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "log4j.properties").write_text(RUN_LOG4J)
    run = LocalRun(f"127.0.0.1:{settings.flink.web_port or free_loopback_port()}", log_dir)
    run.tmp_dir.mkdir(exist_ok=True)
    return run


#: Managed memory holds RocksDB's block cache and write buffers, shared by every keyed operator of a
#: slot. A local run's mini-cluster gives it 128 MB unless told; at 1,000,000 registered users almost
#: every state lookup then missed the cache, and Membership closed the registrations' slot at 300-400
#: users per second, against about 23,000 with 2 GB (docs/benchmarks.md, "Managed memory for RocksDB").
#: `flink.extra` may set another size; on a cluster the TaskManagers' own configuration decides.
MANAGED_MEMORY = "taskmanager.memory.managed.size"
LOCAL_ROCKSDB_MANAGED_MEMORY = "2g"


def local_configuration(settings: StreamSettings, run: LocalRun | None) -> dict[str, str]:
    """What a local run's mini-cluster needs beyond `flink_configuration`: the REST address of `run`,
    with RocksDB the managed memory (unless `flink.extra` sets it), and with OAUTHBEARER the Kafka
    client, Jackson and jose4j parent-first, with AWS_MSK_IAM the Kafka client and AWS's login module
    (jars.parent_first_patterns; make_environment puts them on the gateway's class path)."""
    local: dict[str, str] = {}
    patterns = parent_first_patterns(settings.kafka.security)
    if patterns is not None:
        local[PARENT_FIRST_KEY] = patterns
    if settings.flink.state_backend == "rocksdb" and MANAGED_MEMORY not in settings.flink.extra:
        local[MANAGED_MEMORY] = LOCAL_ROCKSDB_MANAGED_MEMORY
    if run is not None:
        host, port = run.rest.rsplit(":", 1)
        local.update({"rest.bind-address": host, "rest.address": host, "rest.port": port})
    return local
