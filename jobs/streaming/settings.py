"""The streaming job's own configuration sections, `kafka:` and `flink:` (docs/streaming.md).

```yaml
kafka:
  bootstrap: 127.0.0.1:9092      # default: $PWEVENT_BOOTSTRAP, else <repo>/.run/kafka/bootstrap
  group_id: pwevent-job
  topics: {events: pwevent.events, requirements: pwevent.requirements, releases: pwevent.releases,
           dead_letters: pwevent.dead-letters, audit: pwevent.audit}
  event_time: field               # field (the events.time field, else the Kafka record timestamp) | kafka
  security: {}                    # how every client authenticates: protocol, sasl_mechanism, username,
                                  # password (${ENV_VAR}), ca_file (jobs/streaming/kafka_security.py)
  start: earliest                 # where a job without restored state reads the events topic: earliest |
                                  # latest | committed (the offsets the job's consumer group committed at
                                  # its checkpoints; earliest where none) | a time (ISO-8601 or epoch ms:
                                  # the first record with a Kafka timestamp at or after it). Requirements
                                  # are always read from the earliest offset (docs/streaming.md,
                                  # "Reading an existing events topic")
  properties: {}                  # extra Java client properties for every Flink source and sink
                                  # (tuning only: security.*, sasl.*, ssl.* belong in kafka.security)
  transaction_timeout: 10m        # the sinks' transaction.timeout.ms; keep it under the broker's max
  transactional_id_prefix: pwevent
flink:
  execution_mode: thread          # thread | process (Python operators)
  parallelism: 1
  checkpoint_interval: 1s
  checkpoint_timeout: 10m         # a checkpoint not complete by then expires (and counts as failed)
  tolerable_failed_checkpoints: 5 # failed/expired checkpoints in a row before the job fails over; a
                                  # step longer than one timeout (e.g. a registration burst) needs > 0
  checkpoint_dir: .run/checkpoints   # relative paths are relative to the config file's folder; default:
                                     # <repo>/.run/checkpoints in a checkout, else
                                     # $XDG_STATE_HOME/pwevent/checkpoints (jobs/streaming/locations.py)
  state_backend: hashmap          # hashmap | rocksdb
  incremental_checkpoints: false  # rocksdb: each checkpoint writes only what changed since the last
  out_of_orderness: 0ms           # bounded out-of-orderness of event time, per partition
  close_after: 5s                 # a partition quiet this long closes the slot of its latest record
                                  # (so a quiet stream's last slot is released); 0 = never
  source_idleness: 10s            # a partition quiet this long stops holding event time back
  source_start_grace: 60s         # ... but one that has given no record yet, only after this long
  bundle_size: 1000               # process mode: python.fn-execution.bundle.size
  bundle_time: 100ms              # process mode: python.fn-execution.bundle.time
  max_lead: 1h                    # a record timed further ahead of its partition's event time goes to
                                  # the dead letters (unless the next record confirms the jump); 0 = off
  prometheus: {host: 127.0.0.1, port: 9249}   # optional: export the metrics for Prometheus on this
                                  # address (port: a port or a range, 9249-9259); docs/operations.md, Metrics
  restart_attempts: 3             # a failed job restarts from its last checkpoint this many times ...
  restart_delay: 2s               # ... waiting this long before each; 0 attempts = fail at once
  web_port: 0                     # local run: port of the web UI / REST API on 127.0.0.1 (0 = a free one)
  log_dir: .run/logs              # local run: each run logs into its own folder under this one
  retained_jobs: 1                # local checkpoint dirs: earlier jobs' folders kept besides the newest
  extra: {}                       # more Flink configuration, key: value, passed through as strings;
                                  # keys the job sets itself are refused (OWNED_FLINK_KEYS)
```
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pwevent.jobs.common.config import Config, ConfigError
from pwevent.jobs.common.slots import parse_duration_ms, parse_time_ms
from pwevent.jobs.streaming.kafka_security import KafkaSecurity, check_properties, parse_security
from pwevent.jobs.streaming.locations import default_checkpoint_dir, run_dir

DEFAULT_BOOTSTRAP_FILE = run_dir() / "kafka" / "bootstrap"
#: kafka.start values besides a time.
START_POSITIONS = ("earliest", "latest", "committed")
TOPIC_ROLES = ("events", "requirements", "releases", "dead_letters", "audit")
DEFAULT_TOPICS = {
    "events": "pwevent.events",
    "requirements": "pwevent.requirements",
    "releases": "pwevent.releases",
    "dead_letters": "pwevent.dead-letters",
    "audit": "pwevent.audit",
}


def default_bootstrap() -> str | None:
    if os.environ.get("PWEVENT_BOOTSTRAP"):
        return os.environ["PWEVENT_BOOTSTRAP"]
    if DEFAULT_BOOTSTRAP_FILE.is_file():
        return DEFAULT_BOOTSTRAP_FILE.read_text().strip() or None
    return None


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str | None
    group_id: str = "pwevent-job"
    topics: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TOPICS))
    event_time: str = "field"
    properties: dict[str, str] = field(default_factory=dict)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    transaction_timeout_ms: int = 600_000
    transactional_id_prefix: str = "pwevent"
    start: str = "earliest"  # one of START_POSITIONS, or "timestamp" with start_time_ms
    start_time_ms: int | None = None

    def require_bootstrap(self) -> str:
        if not self.bootstrap:
            raise ConfigError("no Kafka bootstrap address: set kafka.bootstrap, $PWEVENT_BOOTSTRAP or run "
                              "deploy/local/kafka.sh start")
        return self.bootstrap

    def jvm_properties(self) -> dict[str, str]:
        """Java client properties of every Flink source and sink: `properties` and `security`."""
        return {**self.properties, **self.security.jvm_properties()}

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments of the Python tools (security only)."""
        return self.security.python_options()


@dataclass(frozen=True)
class PrometheusSettings:
    """Where the mini-cluster's Prometheus reporter listens (docs/operations.md, "Metrics")."""

    host: str = "127.0.0.1"
    port: str = "9249"


@dataclass(frozen=True)
class FlinkSettings:
    execution_mode: str = "thread"
    parallelism: int = 1
    checkpoint_interval_ms: int = 1000
    checkpoint_timeout_ms: int = 600_000
    tolerable_failed_checkpoints: int = 5
    checkpoint_dir: str = field(default_factory=default_checkpoint_dir)
    state_backend: str = "hashmap"
    incremental_checkpoints: bool = False
    out_of_orderness_ms: int = 0
    close_after_ms: int = 5000
    source_idleness_ms: int = 10_000
    source_start_grace_ms: int = 60_000
    bundle_size: int = 1000
    bundle_time_ms: int = 100
    max_lead_ms: int = 3_600_000
    prometheus: PrometheusSettings | None = None
    restart_attempts: int = 3
    restart_delay_ms: int = 2000
    web_port: int = 0
    log_dir: str = str(run_dir() / "logs")
    retained_jobs: int = 1
    extra: dict[str, str] = field(default_factory=dict)


#: Flink keys the job sets itself (jobs/streaming/job.py, flink_configuration, tested to match): an
#: operator sets them through the `flink:` keys above or the `pwevent run` options, not `flink.extra`.
OWNED_FLINK_KEYS = frozenset({
    "python.execution-mode", "python.executable", "python.client.executable", "python.fn-execution.bundle.size",
    "python.fn-execution.bundle.time", "pipeline.auto-watermark-interval", "parallelism.default",
    "execution.checkpointing.interval", "execution.checkpointing.mode", "execution.checkpointing.dir",
    "execution.checkpointing.externalized-checkpoint-retention", "execution.checkpointing.num-retained",
    "execution.checkpointing.min-pause", "execution.checkpointing.timeout",
    "execution.checkpointing.tolerable-failed-checkpoints", "pipeline.object-reuse", "state.backend.type",
    "execution.checkpointing.incremental", "state.backend.rocksdb.use-bloom-filter",
    "state.backend.rocksdb.timer-service.factory", "restart-strategy.type", "restart-strategy.fixed-delay.attempts",
    "restart-strategy.fixed-delay.delay", "table.exec.uid.generation", "table.exec.uid.format",
    "rest.bind-address", "rest.address", "rest.port", "execution.state-recovery.path",
    "execution.state-recovery.ignore-unclaimed-state", "pipeline.jars", "python.files", "table.local-time-zone",
})
#: Set by the job only when `flink.prometheus` is: otherwise `flink.extra` may configure a reporter itself.
PROMETHEUS_PREFIX = "metrics.reporter.prom."


def _extra(raw: Any) -> dict[str, str]:
    """flink.extra: Flink keys to values, each a string (numbers and booleans are written as Flink
    reads them); keys the job owns are refused."""
    if not isinstance(raw, dict):
        raise ConfigError("flink.extra must be a mapping of Flink configuration keys to values")
    out = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key or any(c.isspace() for c in key):
            raise ConfigError(f"flink.extra: {key!r} is not a Flink configuration key")
        if key in OWNED_FLINK_KEYS:
            raise ConfigError(f"flink.extra.{key} is set by the job itself; use the flink: keys or the "
                              "pwevent run options (docs/streaming.md, 'Flink settings')")
        if isinstance(value, bool):
            out[key] = str(value).lower()
        elif isinstance(value, (str, int, float)):
            out[key] = str(value)
        else:
            raise ConfigError(f"flink.extra.{key} must be a string, number or boolean, got {value!r}")
    return out


def _local_path(raw: dict[str, Any], key: str, default: str, base_dir: str | None) -> str:
    """flink.<key>: a path or URI; relative paths are relative to the config file's folder."""
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"flink.{key} must be a path, got {value!r}")
    if "://" not in value and not os.path.isabs(value):
        value = str(Path(base_dir or ".").resolve() / value)
    return value


@dataclass(frozen=True)
class StreamSettings:
    kafka: KafkaSettings
    flink: FlinkSettings


def _section(config: Config, name: str, allowed: set[str]) -> dict[str, Any]:
    raw = config.extra.get(name, {}) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{name} must be a mapping")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"unknown key {name}.{unknown[0]} (allowed: {', '.join(sorted(allowed))})")
    return raw


def _duration(raw: dict[str, Any], section: str, key: str, default: int, allow_zero: bool = False) -> int:
    if key not in raw:
        return default
    value = raw[key]
    if allow_zero and value in (0, "0", "0ms", "0s"):
        return 0
    try:
        return parse_duration_ms(value, f"{section}.{key}")
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _int(raw: dict[str, Any], section: str, key: str, default: int, low: int = 1) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{section}.{key} must be an integer >= {low}, got {value!r}")
    return value


def _bool(raw: dict[str, Any], section: str, key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{section}.{key} must be true or false, got {value!r}")
    return value


def _str(raw: dict[str, Any], section: str, key: str, default: str, choices: tuple[str, ...] = ()) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value or (choices and value not in choices):
        want = f"one of {', '.join(choices)}" if choices else "a non-empty string"
        raise ConfigError(f"{section}.{key} must be {want}, got {value!r}")
    return value


def _prometheus(raw: Any) -> PrometheusSettings | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("flink.prometheus must be a mapping (host, port)")
    unknown = sorted(set(raw) - {"host", "port"})
    if unknown:
        raise ConfigError(f"unknown key flink.prometheus.{unknown[0]} (allowed: host, port)")
    host = _str(raw, "flink.prometheus", "host", "127.0.0.1")
    port = str(raw.get("port", "9249"))
    bounds = port.split("-")
    valid = len(bounds) <= 2 and all(b.isdigit() and 0 < int(b) < 65536 for b in bounds)
    if not valid or int(bounds[0]) > int(bounds[-1]):
        raise ConfigError(f"flink.prometheus.port must be a port or a range low-high, got {raw.get('port')!r}")
    return PrometheusSettings(host, port)


def _start(raw: dict[str, Any]) -> tuple[str, int | None]:
    """kafka.start: a named position, or a time (the Kafka timestamp to start at)."""
    value = raw.get("start", "earliest")
    if value in START_POSITIONS:
        return value, None
    try:
        moment = parse_time_ms(value, "kafka.start")
    except ValueError:
        raise ConfigError(f"kafka.start must be {', '.join(START_POSITIONS)} or a time (ISO-8601 or epoch "
                          f"milliseconds), got {value!r}") from None
    if moment < 0:
        raise ConfigError(f"kafka.start must not be before 1970, got {value!r}")
    return "timestamp", moment


def stream_settings(config: Config, base_dir: str | None = None) -> StreamSettings:
    """Validate the `kafka:` and `flink:` sections; every error names the key."""
    if isinstance(config.extra.get("kafka"), dict) and "client" in config.extra["kafka"]:
        raise ConfigError("kafka.client was replaced by kafka.security, which drives the Java and the Python "
                          "clients alike (docs/operations.md, Security)")
    k = _section(config, "kafka", {"bootstrap", "group_id", "topics", "event_time", "properties", "security",
                                   "transaction_timeout", "transactional_id_prefix", "start"})
    topics = dict(DEFAULT_TOPICS)
    raw_topics = k.get("topics", {}) or {}
    if not isinstance(raw_topics, dict):
        raise ConfigError("kafka.topics must be a mapping")
    for role in raw_topics:
        if role not in TOPIC_ROLES:
            raise ConfigError(f"unknown key kafka.topics.{role} (allowed: {', '.join(TOPIC_ROLES)})")
        topics[role] = _str(raw_topics, "kafka.topics", role, "")
    properties = k.get("properties", {}) or {}
    if not isinstance(properties, dict) or not all(isinstance(key, str) for key in properties):
        raise ConfigError("kafka.properties must be a mapping of Kafka client property names to values")
    check_properties(properties)
    bootstrap = k.get("bootstrap") or default_bootstrap()
    if bootstrap is not None and not isinstance(bootstrap, str):
        raise ConfigError(f"kafka.bootstrap must be host:port[,host:port], got {bootstrap!r}")
    start, start_time_ms = _start(k)
    kafka = KafkaSettings(
        bootstrap=bootstrap,
        group_id=_str(k, "kafka", "group_id", "pwevent-job"),
        topics=topics,
        event_time=_str(k, "kafka", "event_time", "field", ("field", "kafka")),
        properties={str(key): str(value) for key, value in properties.items()},
        security=parse_security(k.get("security"), base_dir),
        transaction_timeout_ms=_duration(k, "kafka", "transaction_timeout", 600_000),
        transactional_id_prefix=_str(k, "kafka", "transactional_id_prefix", "pwevent"),
        start=start,
        start_time_ms=start_time_ms,
    )
    f = _section(config, "flink", {"execution_mode", "parallelism", "checkpoint_interval", "checkpoint_dir",
                                   "checkpoint_timeout", "tolerable_failed_checkpoints",
                                   "state_backend", "incremental_checkpoints", "out_of_orderness", "close_after",
                                   "source_idleness", "source_start_grace", "bundle_size", "bundle_time", "max_lead",
                                   "restart_attempts", "restart_delay", "web_port", "log_dir", "retained_jobs",
                                   "extra", "prometheus"})
    checkpoint_dir = _local_path(f, "checkpoint_dir", default_checkpoint_dir(), base_dir)
    web_port = _int(f, "flink", "web_port", 0, low=0)
    if web_port > 65535:
        raise ConfigError(f"flink.web_port must be a port number (0 = a free one), got {web_port}")
    flink = FlinkSettings(
        execution_mode=_str(f, "flink", "execution_mode", "thread", ("thread", "process")),
        parallelism=_int(f, "flink", "parallelism", 1),
        checkpoint_interval_ms=_duration(f, "flink", "checkpoint_interval", 1000),
        checkpoint_timeout_ms=_duration(f, "flink", "checkpoint_timeout", 600_000),
        tolerable_failed_checkpoints=_int(f, "flink", "tolerable_failed_checkpoints", 5, low=0),
        checkpoint_dir=checkpoint_dir,
        state_backend=_str(f, "flink", "state_backend", "hashmap", ("hashmap", "rocksdb")),
        incremental_checkpoints=_bool(f, "flink", "incremental_checkpoints", False),
        out_of_orderness_ms=_duration(f, "flink", "out_of_orderness", 0, allow_zero=True),
        close_after_ms=_duration(f, "flink", "close_after", 5000, allow_zero=True),
        source_idleness_ms=_duration(f, "flink", "source_idleness", 10_000),
        source_start_grace_ms=_duration(f, "flink", "source_start_grace", 60_000, allow_zero=True),
        bundle_size=_int(f, "flink", "bundle_size", 1000),
        bundle_time_ms=_duration(f, "flink", "bundle_time", 100),
        max_lead_ms=_duration(f, "flink", "max_lead", 3_600_000, allow_zero=True),
        prometheus=_prometheus(f.get("prometheus")),
        restart_attempts=_int(f, "flink", "restart_attempts", 3, low=0),
        restart_delay_ms=_duration(f, "flink", "restart_delay", 2000, allow_zero=True),
        web_port=web_port,
        log_dir=_local_path(f, "log_dir", str(run_dir() / "logs"), base_dir),
        retained_jobs=_int(f, "flink", "retained_jobs", 1, low=0),
        extra=_extra(f.get("extra", {}) or {}),
    )
    clash = sorted(key for key in flink.extra if flink.prometheus is not None and key.startswith(PROMETHEUS_PREFIX))
    if clash:
        raise ConfigError(f"flink.extra.{clash[0]} is set by flink.prometheus; configure the reporter in one place")
    if kafka.transaction_timeout_ms > 900_000:
        raise ConfigError("kafka.transaction_timeout must stay under the broker's transaction.max.timeout.ms "
                          "(15m by default)")
    return StreamSettings(kafka, flink)
