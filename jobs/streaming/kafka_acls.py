"""The ACLs each principal of a deployment needs, derived from the job's `kafka:` section: the one
list that deploy/local/kafka-acls.py grants, the tests grant and docs/operations.md ("Security")
explains. Everything else is denied by the broker's authorizer.

- the job: reads the events and requirements topics (and commits its sources' offsets under groups
  prefixed by `kafka.group_id`); writes the releases, dead letters and audit topics in transactions
  whose ids start with `kafka.transactional_id_prefix`; reads the releases and audit topics when its
  Population starts without state (the refusal to start twice, docs/streaming.md, "Starting twice").
- producers: write the events topic.
- the registrar: writes the requirements topic. Whoever writes a user's first requirement decides
  that user's protection (docs/formats.md, "Requirement provenance"): in production this is the
  registration service alone; locally `pwevent produce` writes both topics, so both roles default
  to the one user pwevent-producer.
- analysts: read the releases topic (with read_committed: `pwevent tail`).
- auditors: read the releases and audit topics (`pwevent audit` of an exported spend log).
"""

from __future__ import annotations

from dataclasses import dataclass

from pwevent.jobs.streaming.settings import KafkaSettings


@dataclass(frozen=True)
class Grant:
    """Allow `operation` on a resource to `principal` ("User:name"); `prefixed`: every name starting
    with `name` (a Kafka PREFIXED pattern), else the literal name."""

    principal: str
    resource: str  # topic | group | transactional_id
    name: str
    operation: str  # READ | WRITE | DESCRIBE
    prefixed: bool = False


@dataclass(frozen=True)
class Principals:
    """The user names of a deployment's roles (the local secured broker's, by default)."""

    job: str = "pwevent-job"
    producer: str = "pwevent-producer"
    registrar: str = "pwevent-producer"
    analyst: str = "pwevent-analyst"
    auditor: str = "pwevent-analyst"


def _topic(principal: str, topic: str, *operations: str) -> list[Grant]:
    return [Grant(f"User:{principal}", "topic", topic, op) for op in ("DESCRIBE", *operations)]


def acl_plan(kafka: KafkaSettings, who: Principals = Principals(), statistics: tuple[str, ...] = ()) -> list[Grant]:
    """Every grant of the deployment described by `kafka`, without duplicates, in a stable order;
    `statistics`: the names of a job's several statistics, whose release topics
    (`KafkaSettings.release_topic`) are granted as the releases topic is."""
    topics = kafka.topics
    job = who.job
    releases = [topics["releases"], *(kafka.release_topic(name) for name in statistics)]
    grants = [
        *_topic(job, topics["events"], "READ"),
        *_topic(job, topics["requirements"], "READ"),
        *(grant for topic in releases for grant in _topic(job, topic, "READ", "WRITE")),
        *_topic(job, topics["dead_letters"], "WRITE"),
        *_topic(job, topics["audit"], "READ", "WRITE"),
        Grant(f"User:{job}", "group", kafka.group_id, "READ", prefixed=True),
        Grant(f"User:{job}", "group", kafka.group_id, "DESCRIBE", prefixed=True),
        Grant(f"User:{job}", "transactional_id", kafka.transactional_id_prefix, "WRITE", prefixed=True),
        Grant(f"User:{job}", "transactional_id", kafka.transactional_id_prefix, "DESCRIBE", prefixed=True),
        *_topic(who.producer, topics["events"], "WRITE"),
        *_topic(who.registrar, topics["requirements"], "WRITE"),
        *(grant for topic in releases for grant in _topic(who.analyst, topic, "READ")),
        *(grant for topic in releases for grant in _topic(who.auditor, topic, "READ")),
        *_topic(who.auditor, topics["audit"], "READ"),
    ]
    return list(dict.fromkeys(grants))
