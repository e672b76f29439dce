"""Kafka clients of the command-line tools (produce, tail) and of the tests, via kafka-python.

Every client takes the security settings of `kafka.security` (jobs/streaming/kafka_security.py), the
same the job's Java clients take, so a locked-down cluster needs no code change. Readers of job output always use
isolation_level=read_committed: the job writes releases, dead letters and the spend log in Kafka
transactions, and uncommitted (or aborted, after a failover) messages must stay invisible.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from pwevent.jobs.streaming.settings import KafkaSettings


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int

    def json(self) -> Any:
        return json.loads(self.value)


#: How long a client waits for the first answer of a broker (kafka-python's bootstrap_timeout_ms,
#: new in kafka-python 3.0) unless told otherwise.
CONNECT_TIMEOUT_S = 30.0


class BrokerUnavailableError(RuntimeError):
    """No broker answered at the bootstrap address in time, or the topic does not exist; the CLI
    prints the message and exits with code 4."""


def _connect(make: Any, kafka: KafkaSettings, options: dict[str, Any], timeout_s: float) -> Any:
    options = {**options, "bootstrap_timeout_ms": int(timeout_s * 1000)}
    try:
        return make(**options)
    except KafkaTimeoutError:
        raise BrokerUnavailableError(
            f"no Kafka broker answered at {kafka.bootstrap} within {timeout_s:g} s (kafka.bootstrap, "
            "$PWEVENT_BOOTSTRAP; is the broker running and reachable?)") from None


def producer(kafka: KafkaSettings, connect_timeout_s: float = CONNECT_TIMEOUT_S, **overrides: Any) -> KafkaProducer:
    options: dict[str, Any] = {"bootstrap_servers": kafka.require_bootstrap(), "linger_ms": 5, "acks": "all"}
    options.update(kafka.client_options())
    options.update(overrides)
    return _connect(KafkaProducer, kafka, options, connect_timeout_s)


def consumer(kafka: KafkaSettings, connect_timeout_s: float = CONNECT_TIMEOUT_S, **overrides: Any) -> KafkaConsumer:
    options: dict[str, Any] = {
        "bootstrap_servers": kafka.require_bootstrap(),
        "isolation_level": "read_committed",
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    options.update(kafka.client_options())
    options.update(overrides)
    return _connect(KafkaConsumer, kafka, options, connect_timeout_s)


def require_topics(kafka: KafkaSettings, roles: tuple[str, ...], wait_s: float = CONNECT_TIMEOUT_S) -> None:
    """BrokerUnavailableError naming each topic of `roles` (keys of `kafka.topics`) the broker does not
    list: it does not exist, or this client's principal may not describe it. `pwevent run` checks its
    input topics so before any work."""
    client = consumer(kafka, connect_timeout_s=wait_s)
    try:
        known = client.topics()
    finally:
        client.close()
    missing = [f"{kafka.topics[role]} (kafka.topics.{role})" for role in roles if kafka.topics[role] not in known]
    if missing:
        raise BrokerUnavailableError(
            f"no such topic at {kafka.bootstrap}: {', '.join(missing)} (or this client may not describe it); "
            "create it (deploy/local/create-topics.py) or name an existing one")


def follow(
    kafka: KafkaSettings, topic: str, from_beginning: bool = True, poll_ms: int = 200,
    wait_s: float = CONNECT_TIMEOUT_S,
) -> Iterator[Message | None]:
    """Committed messages of `topic` as they arrive; yields None after each empty poll. Waits at most
    `wait_s` for the broker's first answer and again for the topic (BrokerUnavailableError)."""
    client = consumer(kafka, connect_timeout_s=wait_s)
    try:
        partitions = None
        deadline = time.monotonic() + wait_s
        while not partitions:
            partitions = client.partitions_for_topic(topic)
            if not partitions:
                if time.monotonic() > deadline:
                    raise BrokerUnavailableError(f"topic {topic} does not exist at {kafka.bootstrap}")
                time.sleep(0.2)
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        client.assign(assigned)
        if from_beginning:
            client.seek_to_beginning(*assigned)
        else:
            client.seek_to_end(*assigned)
        while True:
            batch = client.poll(timeout_ms=poll_ms)
            if not batch:
                yield None
                continue
            for records in batch.values():
                for r in records:
                    yield Message(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp)
    finally:
        client.close()


def read_topic(
    kafka: KafkaSettings, topic: str, idle_s: float = 2.0, max_s: float = 60.0, committed: bool = True
) -> list[Message]:
    """Every committed message of `topic` up to its current end (the last stable offset, for
    read_committed), waiting at most `max_s`; `idle_s` bounds the wait for a topic still being filled.
    `committed=False` reads uncommitted and aborted messages too (tests of exactly-once only)."""
    client = consumer(kafka, isolation_level="read_committed" if committed else "read_uncommitted")
    out: list[Message] = []
    try:
        deadline = time.monotonic() + max_s
        partitions = client.partitions_for_topic(topic)
        while not partitions and time.monotonic() < deadline:
            time.sleep(0.2)
            partitions = client.partitions_for_topic(topic)
        if not partitions:
            raise RuntimeError(f"topic {topic} does not exist")
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        client.assign(assigned)
        client.seek_to_beginning(*assigned)
        end = client.end_offsets(assigned)
        last = time.monotonic()
        while time.monotonic() < deadline:
            if all(client.position(tp) >= end[tp] for tp in assigned):
                break
            batch = client.poll(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    out.append(Message(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp))
            if batch:
                last = time.monotonic()
            elif time.monotonic() - last > max(idle_s, 10.0):
                break  # positions stuck below the end: give up after a long quiet spell
    finally:
        client.close()
    return out
