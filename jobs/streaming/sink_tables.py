"""The streaming job's Kafka sink tables (dead letters, audit lines) as Flink SQL DDL
(docs/streaming.md, "Which releases count"): exactly once, in Kafka transactions, with the clients'
properties (security included). The releases have a writer of their own (`pwevent.flink.release.ReleaseWriter`)."""

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


def sink_ddl(name: str, topic: str, role: str, settings: StreamSettings) -> str:
    """An exactly-once Kafka sink table of one column, `v`, the message's value."""
    kafka = settings.kafka
    options = _kafka_options(settings, topic)
    options.update({
        "sink.delivery-guarantee": "exactly-once",
        "sink.transactional-id-prefix": f"{kafka.transactional_id_prefix}-{role}",
        "properties.transaction.timeout.ms": str(kafka.transaction_timeout_ms),
        "value.format": "raw",
    })
    return f"CREATE TEMPORARY TABLE `{name}` (`v` STRING) WITH ({_with(options)})"
