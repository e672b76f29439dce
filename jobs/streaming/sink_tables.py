"""The streaming job's Kafka sink tables as Flink SQL DDL (docs/streaming.md, "Which releases
count"): exactly once, in Kafka transactions, with the clients' properties (security included)."""

from __future__ import annotations

from pwevent.jobs.streaming.event_sql import sql_literal
from pwevent.jobs.streaming.settings import StreamSettings


def _with(options: dict[str, str]) -> str:
    """A WITH clause's options."""
    return ", ".join(f"{sql_literal(k)} = {sql_literal(v)}" for k, v in options.items())


def _kafka_options(settings: StreamSettings, topic: str) -> dict[str, str]:
    """The Kafka connector's options for `topic`, with the clients' properties (security included)."""
    kafka = settings.kafka
    options = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": kafka.require_bootstrap()}
    for key, value in kafka.jvm_properties().items():
        options[f"properties.{key}"] = value
    return options


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
