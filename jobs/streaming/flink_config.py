"""The streaming job's Flink configuration, wherever it runs (docs/streaming.md;
docs/operations.md): checkpoints, state backend, restarts, Python execution, the planner's uids and
the metrics reporter, from the `flink:` section (jobs/streaming/settings.py). A local run adds its
own keys (jobs/streaming/local_run.py); a cluster submission passes these to `flink run`
(jobs/streaming/job.py)."""

from __future__ import annotations

import sys

from pwevent.jobs.streaming.settings import PROMETHEUS_PREFIX, FlinkSettings, StreamSettings

#: Flink's Prometheus reporter bound to one address (jobs/streaming/jvm-metrics).
PROMETHEUS_REPORTER = "org.apache.flink.metrics.prometheus.LoopbackPrometheusReporterFactory"


def restart_strategy(f: FlinkSettings) -> dict[str, str]:
    """Flink's restart strategy keys of `flink.restart_strategy`: fixed-delay (`restart_attempts` waits
    of `restart_delay`) or exponential-delay (`restart_attempts` waits, the first `restart_delay`, each
    twice the last up to `restart_max_delay`, with Flink's default jitter; a job that ran stably for
    Flink's reset threshold, an hour by default, starts counting afresh)."""
    if f.restart_strategy == "fixed-delay":
        return {"restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": str(f.restart_attempts),
                "restart-strategy.fixed-delay.delay": f"{f.restart_delay_ms} ms"}
    exponential = "restart-strategy.exponential-delay."
    return {"restart-strategy.type": "exponential-delay",
            exponential + "initial-backoff": f"{f.restart_delay_ms} ms",
            exponential + "max-backoff": f"{f.restart_max_delay} ms",
            exponential + "backoff-multiplier": "2.0",
            exponential + "attempts-before-reset-backoff": str(f.restart_attempts)}


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
        "execution.checkpointing.num-retained": str(f.retained_checkpoints),
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
        **restart_strategy(f),
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
