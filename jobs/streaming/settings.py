"""The streaming job's own configuration sections, `kafka:`, `flink:` and `release:` (docs/streaming.md).

```yaml
kafka:
  bootstrap: 127.0.0.1:9092      # default: $PWEVENT_BOOTSTRAP, else <repo>/.run/kafka/bootstrap
  group_id: pwevent-job
  topics: {events: pwevent.events, requirements: pwevent.requirements, releases: pwevent.releases,
           dead_letters: pwevent.dead-letters, audit: pwevent.audit}
  event_time: field               # field (the events.time field) | kafka (the record timestamp)
  security: {}                    # how every client authenticates: protocol, sasl_mechanism (SCRAM, PLAIN,
                                  # OAUTHBEARER, GSSAPI) and its credentials (username + password, oauth,
                                  # kerberos), ca_file or truststore, client_cert (mTLS); secrets as
                                  # ${ENV_VAR} or {file: PATH} (jobs/streaming/kafka_security.py;
                                  # docs/operations.md, Security)
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
  resume_after_last_release: false  # a job without restored state over a release topic that holds
                                  # releases: refuse (false), or continue after the last release the
                                  # audit topic confirms, with fresh ledgers (true; a privacy cost:
                                  # docs/streaming.md, "Starting twice")
flink:
  execution_mode: thread          # thread | process (Python operators)
  parallelism: 1
  checkpoint_interval: 1s
  checkpoint_timeout: 10m         # a checkpoint not complete by then expires (and counts as failed)
  tolerable_failed_checkpoints: 5 # failed/expired checkpoints in a row before the job fails over; a
                                  # step longer than one timeout (e.g. a registration burst) needs > 0
  checkpoint_dir: .run/checkpoints   # relative paths are relative to the config file's folder; default:
                                     # <repo>/.run/checkpoints in a checkout, else
                                     # $XDG_STATE_HOME/pwevent/checkpoints (jobs/streaming/locations.py);
                                     # or an object store, s3://bucket/path
  s3: {}                          # optional: the object store's endpoint, path_style_access, region and
                                  # credentials (access_key, secret_key: ${ENV_VAR} or {file: PATH}) for a
                                  # local run (jobs/streaming/object_store.py; docs/operations.md)
  state_backend: hashmap          # hashmap | rocksdb
  incremental_checkpoints: false  # rocksdb: each checkpoint writes only what changed since the last
  out_of_orderness: 0ms           # bounded out-of-orderness of event time, per partition, in a backlog
  release_delay: 1m               # the public schedule: once the backlog a start found is read, a slot
                                  # is released this long after its end, whether or not anything came;
                                  # an event that arrives later is late (docs/streaming.md, "Time")
  bundle_size: 1000               # process mode: python.fn-execution.bundle.size
  bundle_time: 100ms              # process mode: python.fn-execution.bundle.time
  max_lead: 1h                    # a record timed further ahead of its partition's event time goes to
                                  # the dead letters (unless the next record confirms the jump); 0 = off
  prometheus: {host: 127.0.0.1, port: 9249}   # optional: export the metrics for Prometheus on this
                                  # address (port: a port or a range, 9249-9259); docs/operations.md, Metrics
  restart_strategy: fixed-delay   # fixed-delay | exponential-delay: how a failed job restarts from its
                                  # last checkpoint (docs/operations.md, "A long Schema Registry outage")
  restart_attempts: 3             # at most this many times in a row (exponential-delay: before a stable
                                  # hour resets the count); 0 attempts = fail at once
  restart_delay: 2s               # fixed-delay: the wait before each; exponential-delay: the first wait,
                                  # doubled at each attempt up to ...
  restart_max_delay: 5m           # ... this (exponential-delay only)
  web_port: 0                     # local run: port of the web UI / REST API on 127.0.0.1 (0 = a free one)
  log_dir: .run/logs              # local run: each run logs into its own folder under this one
  retained_jobs: 1                # local checkpoint dirs: earlier jobs' folders kept besides the newest
  retained_checkpoints: 3         # completed checkpoints kept per job (execution.checkpointing.num-retained)
release:
  format: json                    # json | json-confluent (JSON Schema, registered) | avro-confluent (Avro,
                                  # registered); docs/formats.md, "Release"; docs/consuming.md
  schema_registry: {url: http://registry:8081}   # the registered formats only: where the job registers the
                                  # release's schema (subject <releases topic>-value) and readers find it
  upgrade_mode: savepoint         # on Kubernetes, the FlinkDeployment's upgradeMode (savepoint | last-state);
                                  # stateless is refused: it would start every ledger afresh
  extra: {}                       # more Flink configuration, key: value, passed through as strings;
                                  # keys the job sets itself are refused (OWNED_FLINK_KEYS)
```

Both sections are pydantic models (jobs.common.config.Section); their JSON Schema is part of the
configuration's (jobs/streaming/config_schema.py). A duration's default is written as in the file
(`"1s"`, validated like a value: `validate_default`), so that the schema's default is a valid value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from pwevent.jobs.common.config import (
    Config,
    ConfigError,
    Duration,
    DurationOrZero,
    Name,
    SchemaRegistrySection,
    Section,
    config_error,
    load_config,
)
from pwevent.jobs.common.slots import parse_time_ms
from pwevent.jobs.streaming.kafka_security import KafkaSecurity, check_properties
from pwevent.jobs.streaming.locations import default_checkpoint_dir, default_log_dir, run_dir
from pwevent.jobs.streaming.object_store import S3Settings

DEFAULT_BOOTSTRAP_FILE = run_dir() / "kafka" / "bootstrap"
#: kafka.start values besides a time.
START_POSITIONS = ("earliest", "latest", "committed")


def default_bootstrap() -> str | None:
    if os.environ.get("PWEVENT_BOOTSTRAP"):
        return os.environ["PWEVENT_BOOTSTRAP"]
    if DEFAULT_BOOTSTRAP_FILE.is_file():
        return DEFAULT_BOOTSTRAP_FILE.read_text().strip() or None
    return None


class Topics(Section):
    """`kafka.topics`: the topic of each role."""

    events: Name = "pwevent.events"
    requirements: Name = "pwevent.requirements"
    releases: Name = "pwevent.releases"
    dead_letters: Name = "pwevent.dead-letters"
    audit: Name = "pwevent.audit"


DEFAULT_TOPICS = Topics().model_dump()


def _topics(raw: Any) -> dict[str, str]:
    return Topics.model_validate(raw).model_dump()


def _properties(raw: Any) -> dict[str, str]:
    """kafka.properties: Java client property names to values (written as strings); tuning only."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
        raise ValueError("kafka.properties must be a mapping of Kafka client property names to values")
    check_properties(raw)
    return {key: str(value) for key, value in raw.items()}


_START_SCHEMA = {"anyOf": [{"enum": list(START_POSITIONS)}, {"type": "string"}, {"type": "number"}],
                 "description": "earliest | latest | committed | a time (ISO-8601 or epoch ms)"}


class KafkaSettings(Section):
    """`kafka:`. `start` is one of START_POSITIONS, or "timestamp" with `start_time_ms`."""

    derived: ClassVar[frozenset[str]] = frozenset({"start_time_ms"})

    bootstrap: Name | None = Field(default_factory=default_bootstrap)
    group_id: Name = "pwevent-job"
    topics: Annotated[dict[str, str], PlainValidator(_topics, json_schema_input_type=Topics)] = Field(
        default_factory=lambda: dict(DEFAULT_TOPICS))
    event_time: Literal["field", "kafka"] = "field"
    properties: Annotated[dict[str, str], PlainValidator(
        _properties, json_schema_input_type=dict[str, str | int | float | bool])] = Field(default_factory=dict)
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    transaction_timeout_ms: Duration = Field("10m", alias="transaction_timeout", validate_default=True)
    transactional_id_prefix: Name = "pwevent"
    start: Annotated[Literal["earliest", "latest", "committed", "timestamp"], WithJsonSchema(_START_SCHEMA)] = (
        "earliest")
    start_time_ms: Annotated[int | None, WithJsonSchema({})] = None
    resume_after_last_release: StrictBool = Field(False, description=(
        "a job without restored state over a release topic that holds releases: refuse (false) or continue "
        "after the last release the audit topic confirms, with fresh ledgers (true); docs/streaming.md, "
        "'Starting twice'"))

    @classmethod
    def derive(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """kafka.start: a named position, or a time (the Kafka timestamp to start at)."""
        value = raw.get("start", "earliest")
        if value in START_POSITIONS:
            return {**raw, "start": value}
        try:
            moment = parse_time_ms(value, "kafka.start")
        except ValueError:
            raise ValueError(f"kafka.start must be {', '.join(START_POSITIONS)} or a time (ISO-8601 or epoch "
                             f"milliseconds), got {value!r}") from None
        if moment < 0:
            raise ValueError(f"kafka.start must not be before 1970, got {value!r}")
        return {**raw, "start": "timestamp", "start_time_ms": moment}

    @field_validator("bootstrap", mode="before")
    @classmethod
    def _default_bootstrap(cls, value: Any) -> Any:
        return value if value else default_bootstrap()

    @field_validator("transaction_timeout_ms")
    @classmethod
    def _under_broker_maximum(cls, value: int) -> int:
        if value > 900_000:
            raise ValueError("kafka.transaction_timeout must stay under the broker's transaction.max.timeout.ms "
                             "(15m by default)")
        return value

    def source_group_id(self, role: str) -> str:
        """The consumer group of the job's source of topic role `role` (its offsets are committed at
        each checkpoint)."""
        return f"{self.group_id}-{role}"

    def require_bootstrap(self) -> str:
        if not self.bootstrap:
            raise ConfigError("no Kafka bootstrap address: set kafka.bootstrap, $PWEVENT_BOOTSTRAP or run "
                              "deploy/local/kafka.sh start")
        return self.bootstrap

    @property
    def release_transactional_id(self) -> str:
        """The transactional id of the job's release writer (`pwevent.flink.release.ReleaseWriter`): one per job,
        so that a restored writer fences a failed one's producer."""
        return f"{self.transactional_id_prefix}-release-writer"

    def release_topic(self, statistic: str | None) -> str:
        """The release topic of a statistic: `topics.releases`, or for a named statistic (several
        statistics under one budget) `topics.releases` + "." + its name, one topic per statistic, each
        keyed by slot (docs/streaming.md, "Several statistics")."""
        base = self.topics["releases"]
        return base if statistic is None else f"{base}.{statistic}"

    def release_writer_id(self, statistic: str | None) -> str:
        """The transactional id of a statistic's release writer (`release_transactional_id` for the one
        unnamed statistic)."""
        base = self.release_transactional_id
        return base if statistic is None else f"{base}.{statistic}"

    def jvm_properties(self) -> dict[str, str]:
        """Java client properties of every Flink source and sink: `properties` and `security`."""
        return {**self.properties, **self.security.jvm_properties()}

    def release_writer_properties(self) -> dict[str, str]:
        """The Java client properties of the job's release writer (`pwevent.flink.release.ReleaseWriter`): the
        bootstrap address, `jvm_properties` and the transaction timeout."""
        return {"bootstrap.servers": self.require_bootstrap(), **self.jvm_properties(),
                "transaction.timeout.ms": str(self.transaction_timeout_ms)}

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments of the Python tools (security only)."""
        return self.security.python_options()


def _port(raw: Any) -> str:
    """A port or a range low-high, as Flink's reporter reads it."""
    port = str(raw)
    bounds = port.split("-")
    valid = not isinstance(raw, bool) and len(bounds) <= 2 and all(b.isdigit() and 0 < int(b) < 65536 for b in bounds)
    if not valid or int(bounds[0]) > int(bounds[-1]):
        raise ValueError(f"flink.prometheus.port must be a port or a range low-high, got {raw!r}")
    return port


class PrometheusSettings(Section):
    """Where the mini-cluster's Prometheus reporter listens (docs/operations.md, "Metrics")."""

    host: Name = "127.0.0.1"
    port: Annotated[str, PlainValidator(_port, json_schema_input_type=int | str)] = "9249"


def _local_path(value: Any, info: ValidationInfo) -> str:
    """A path or URI; relative paths are relative to the config file's folder (context `base_dir`)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a path, got {value!r}")
    if "://" not in value and not os.path.isabs(value):
        value = str(Path((info.context or {}).get("base_dir") or ".").resolve() / value)
    return value


LocalPath = Annotated[str, PlainValidator(_local_path, json_schema_input_type=str)]


def _extra(raw: Any) -> dict[str, str]:
    """flink.extra: Flink keys to values, each a string (numbers and booleans are written as Flink
    reads them); keys the job owns are refused."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ValueError("flink.extra must be a mapping of Flink configuration keys to values")
    out = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key or any(c.isspace() for c in key):
            raise ValueError(f"flink.extra: {key!r} is not a Flink configuration key")
        if key in OWNED_FLINK_KEYS:
            raise ValueError(f"flink.extra.{key} is set by the job itself; use the flink: keys or the "
                             "pwevent run options (docs/streaming.md, 'Flink settings')")
        if isinstance(value, bool):
            out[key] = str(value).lower()
        elif isinstance(value, (str, int, float)):
            out[key] = str(value)
        else:
            raise ValueError(f"flink.extra.{key} must be a string, number or boolean, got {value!r}")
    return out


#: flink.restart_max_delay's default (exponential-delay), ms.
DEFAULT_RESTART_MAX_DELAY_MS = 300_000

_SCHEDULE = ("replaced by flink.release_delay: slots close on a public schedule once the backlog is read, "
             "never after a quiet spell (docs/streaming.md, \"Time\")")


class FlinkSettings(Section):
    """`flink:`."""

    replaced: ClassVar[dict[str, str]] = dict.fromkeys(("close_after", "source_idleness", "source_start_grace"),
                                                        _SCHEDULE)

    execution_mode: Literal["thread", "process"] = "thread"
    parallelism: StrictInt = Field(1, ge=1)
    checkpoint_interval_ms: Duration = Field("1s", alias="checkpoint_interval", validate_default=True)
    checkpoint_timeout_ms: Duration = Field("10m", alias="checkpoint_timeout", validate_default=True)
    tolerable_failed_checkpoints: StrictInt = Field(5, ge=0)
    checkpoint_dir: LocalPath = Field(default_factory=default_checkpoint_dir)
    s3: S3Settings | None = None
    state_backend: Literal["hashmap", "rocksdb"] = "hashmap"
    incremental_checkpoints: StrictBool = False
    out_of_orderness_ms: DurationOrZero = Field(0, alias="out_of_orderness")
    release_delay_ms: DurationOrZero = Field("1m", alias="release_delay", validate_default=True)
    bundle_size: StrictInt = Field(1000, ge=1)
    bundle_time_ms: Duration = Field("100ms", alias="bundle_time", validate_default=True)
    max_lead_ms: DurationOrZero = Field("1h", alias="max_lead", validate_default=True)
    prometheus: PrometheusSettings | None = None
    restart_strategy: Literal["fixed-delay", "exponential-delay"] = "fixed-delay"
    restart_attempts: StrictInt = Field(3, ge=0)
    restart_delay_ms: DurationOrZero = Field("2s", alias="restart_delay", validate_default=True)
    restart_max_delay_ms: Duration | None = Field(None, alias="restart_max_delay", description=(
        "exponential-delay: the longest wait between restarts (default 5m)"))
    web_port: StrictInt = Field(0, ge=0, le=65535, description="0 = a free one")
    log_dir: LocalPath = Field(default_factory=default_log_dir)  # a factory: the schema holds no local path
    retained_jobs: StrictInt = Field(1, ge=0)
    retained_checkpoints: StrictInt = Field(3, ge=1)
    upgrade_mode: Literal["savepoint", "last-state"] | None = Field(None, description=(
        "the Flink Kubernetes Operator's upgradeMode of the deployment running the job (the Helm chart sets it)"))
    extra: Annotated[dict[str, str], PlainValidator(
        _extra, json_schema_input_type=dict[str, str | int | float | bool])] = Field(default_factory=dict)

    @field_validator("upgrade_mode", mode="before")
    @classmethod
    def _keeps_state(cls, value: Any) -> Any:
        if value == "stateless":
            raise ValueError("stateless starts the job without its state on every change, so "
                             "every user's ledger would start afresh and the spent budget be forgotten; use "
                             "savepoint or last-state (docs/kubernetes.md, \"Upgrades, savepoints and rescaling\")")
        return value

    @model_validator(mode="after")
    def _restart_strategy(self) -> FlinkSettings:
        """exponential-delay: a first wait of at least 1 ms, at least one attempt, and a longest wait
        not shorter than the first (Flink's own checks, here with the key's name)."""
        if self.restart_strategy == "fixed-delay":
            if self.restart_max_delay_ms is not None:
                raise ValueError("flink.restart_max_delay applies to restart_strategy exponential-delay only")
            return self
        if self.restart_delay_ms < 1:
            raise ValueError("flink.restart_delay must be at least 1ms with restart_strategy exponential-delay")
        if self.restart_attempts < 1:
            raise ValueError("flink.restart_attempts must be at least 1 with restart_strategy exponential-delay "
                             "(0 = fail at once: use fixed-delay)")
        if self.restart_max_delay < self.restart_delay_ms:
            raise ValueError(f"flink.restart_max_delay ({self.restart_max_delay} ms) must not be shorter than "
                             f"flink.restart_delay ({self.restart_delay_ms} ms)")
        return self

    @property
    def restart_max_delay(self) -> int:
        """The longest wait between restarts of exponential-delay, ms."""
        return self.restart_max_delay_ms if self.restart_max_delay_ms is not None else DEFAULT_RESTART_MAX_DELAY_MS

    @model_validator(mode="after")
    def _one_reporter(self) -> FlinkSettings:
        """A Prometheus reporter is configured in one place: flink.prometheus or flink.extra."""
        clash = sorted(key for key in self.extra if self.prometheus is not None and key.startswith(PROMETHEUS_PREFIX))
        if clash:
            raise ValueError(f"flink.extra.{clash[0]} is set by flink.prometheus; configure the reporter in one place")
        return self


#: Flink keys the job sets itself (jobs/streaming/flink_config.py, flink_configuration, tested to match): an
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
    "restart-strategy.fixed-delay.delay", "restart-strategy.exponential-delay.initial-backoff",
    "restart-strategy.exponential-delay.max-backoff", "restart-strategy.exponential-delay.backoff-multiplier",
    "restart-strategy.exponential-delay.attempts-before-reset-backoff", "table.exec.uid.generation",
    "table.exec.uid.format",
    "rest.bind-address", "rest.address", "rest.port", "execution.state-recovery.path",
    "execution.state-recovery.ignore-unclaimed-state", "pipeline.jars", "python.files", "table.local-time-zone",
})
#: Set by the job only when `flink.prometheus` is: otherwise `flink.extra` may configure a reporter itself.
PROMETHEUS_PREFIX = "metrics.reporter.prom."


class ReleaseSettings(Section):
    """`release:`: how the job writes its releases on the release topic (jobs/streaming/release_format.py).
    `json` (the default): one JSON object per record. `json-confluent`: the same JSON in the Confluent
    wire format under the release's registered JSON Schema; `avro-confluent`: Avro in the Confluent wire
    format under its registered Avro schema; both register under subject `<releases topic>-value`
    (Confluent's TopicNameStrategy) at `schema_registry`."""

    format: Literal["json", "json-confluent", "avro-confluent"] = "json"
    schema_registry: SchemaRegistrySection | None = None

    @model_validator(mode="after")
    def _registry(self) -> ReleaseSettings:
        if self.format == "json" and self.schema_registry is not None:
            raise ValueError("format json registers no schema: schema_registry goes with json-confluent and "
                             "avro-confluent")
        if self.format != "json" and self.schema_registry is None:
            raise ValueError(f"format {self.format} registers the release's schema: it needs schema_registry")
        return self


class StreamSettings(Section):
    """The streaming job's sections of the configuration (`Config.extra`)."""

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    flink: FlinkSettings = Field(default_factory=FlinkSettings)
    release: ReleaseSettings = Field(default_factory=ReleaseSettings)


def stream_settings(config: Config, base_dir: str | None = None) -> StreamSettings:
    """Validate the `kafka:`, `flink:` and `release:` sections (paths relative to `base_dir`, the config file's
    folder); every error names the key."""
    if isinstance(config.extra.get("kafka"), dict) and "client" in config.extra["kafka"]:
        raise ConfigError("kafka.client was replaced by kafka.security, which drives the Java and the Python "
                          "clients alike (docs/operations.md, Security)")
    try:
        return StreamSettings.model_validate(config.extra, context={"base_dir": base_dir})
    except ValidationError as err:
        raise config_error(err) from None


def load_settings(path: str) -> tuple[Config, StreamSettings]:
    """The configuration file and its `kafka:`, `flink:` and `release:` sections, all validated (paths relative to
    the file's folder). Every command that reads a configuration file loads it so: a file is valid for
    all of them or for none, and an unknown or invalid key is an error naming it (README.md,
    "Configuration"), even for a command that uses neither section."""
    config = load_config(path)
    return config, stream_settings(config, str(Path(path).resolve().parent))
