"""The release topic as an analyst reads it (docs/operations.md, "The ACLs each principal needs").

An analyst may read the release topic with any isolation level: `read_uncommitted` gives the records
of open and aborted transactions too, and every record they see is a release of its slot whatever
became of its transaction. Each slot (the message key) must therefore appear once, or in
byte-identical copies; two different records of one slot are two draws of its outcome, of which
the spend log charges one (`release_redrawn`).

`slot_values` and `redrawn` are pure (what `pwevent audit --release-topic` and the failover tests
check, byte for byte, so in every release format); `read_release_topic` reads the topic twice,
read_uncommitted for that check and read_committed for the releases the audit compares with the
spend log; `audit_release_topic` does both and gives the report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pwevent.jobs.common.config import Config
from pwevent.jobs.offline.audit import AuditInputError, AuditReport, Violation, audit_file
from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, Message, consumer, read_topic
from pwevent.jobs.streaming.release_format import NotARelease, ReleaseDecoder, release_decoder
from pwevent.jobs.streaming.settings import KafkaSettings, ReleaseSettings
from pwevent.state.spend_log import last_logged_slot

#: The rule of a slot with two different records (audit.RULES).
RULE = "release_redrawn"
#: How long a read of the whole topic may take.
READ_LIMIT_S = 600.0


def slot_key(message: Message) -> str:
    """The slot a release record is keyed by, as text (the job writes the slot number)."""
    return "" if message.key is None else message.key.decode("utf-8", errors="backslashreplace")


def slot_values(messages: Iterable[Message]) -> dict[str, list[Message]]:
    """Per slot key, one message of each distinct value (byte for byte), in the order read."""
    out: dict[str, list[Message]] = {}
    for message in messages:
        seen = out.setdefault(slot_key(message), [])
        if all(message.value != other.value for other in seen):
            seen.append(message)
    return out


def redrawn(messages: Iterable[Message]) -> list[Violation]:
    """One `release_redrawn` finding per slot (of each topic: several statistics have a release topic
    each) whose records (as read, aborted ones included) are not all byte-identical, naming where each
    distinct record lies."""
    by_topic: dict[str, list[Message]] = {}
    for message in messages:
        by_topic.setdefault(message.topic, []).append(message)
    found = []
    for topic, read in by_topic.items():
        for key, distinct in slot_values(read).items():
            if len(distinct) > 1:
                where = ", ".join(f"partition {m.partition} offset {m.offset}" for m in distinct)
                slot = int(key) if key.isdigit() else 0
                label = ("" if len(by_topic) == 1 else f"topic {topic}: ") + ("" if key.isdigit() else f"key {key!r}: ")
                found.append(Violation(RULE, slot, f"{label}{len(distinct)} different records ({where})"))
    return sorted(found, key=lambda v: v.slot)


@dataclass(frozen=True)
class TopicRead:
    """The release topic read both ways at one time; `decoder` reads its records (any release format)."""

    topic: str
    uncommitted: tuple[Message, ...]
    committed: tuple[Message, ...]
    decoder: ReleaseDecoder = field(default_factory=ReleaseDecoder)

    def releases(self) -> list[Any]:
        """The committed records, decoded (an AuditInputError for one that is no release record)."""
        out = []
        for message in self.committed:
            try:
                out.append(self.decoder.decode(message.value))
            except NotARelease as err:
                raise AuditInputError(f"{self.topic} partition {message.partition} offset {message.offset}: "
                                      f"not a release record ({err})") from None
        return out


def read_release_topic(kafka: KafkaSettings, release: ReleaseSettings, config: Config | None = None) -> TopicRead:
    """Every record of the release topic up to its end: read_uncommitted (what any reader may see),
    then read_committed, decoded as `release` says (its registry); with several statistics in
    `config`, of every statistic's release topic (`KafkaSettings.release_topic`), one after the other."""
    topics = [kafka.release_topic(s.name) for s in config.statistics] if config else [kafka.topics["releases"]]
    client = consumer(kafka)
    try:
        missing = [topic for topic in topics if topic not in client.topics()]
        if missing:
            raise BrokerUnavailableError(f"topic {missing[0]} does not exist at {kafka.bootstrap}")
    finally:
        client.close()
    uncommitted, committed = (tuple(m for topic in topics for m in
                                    read_topic(kafka, topic, idle_s=2.0, max_s=READ_LIMIT_S, committed=read_committed))
                              for read_committed in (False, True))
    return TopicRead(", ".join(topics), uncommitted, committed, release_decoder(release))


@dataclass(frozen=True)
class TopicAudit:
    """The topic read and the audit's report, the topic check's findings among its violations."""

    read: TopicRead
    report: AuditReport
    #: committed releases of slots after the spend log's last: left to a later audit
    later: int = 0
    logged_through: int = 0

    @property
    def ok(self) -> bool:
        return self.report.ok

    @property
    def unusable(self) -> tuple[str, ...]:
        return self.report.unusable

    def render(self) -> str:
        slots = len(slot_values(self.read.uncommitted))
        head = (f"release topic {self.read.topic}: {len(self.read.uncommitted)} records read_uncommitted "
                f"({len(self.read.committed)} committed) for {slots} slots")
        if self.later:
            head += (f"; {self.later} committed releases after slot {self.logged_through}, the spend log's last, "
                     "are left to a later audit (a running job goes on releasing)")
        return f"{head}\n{self.report.render()}"


def last_spend_slot(spend_log: str) -> int:
    """The last slot a spend log file reaches (`last_logged_slot`; 0: none)."""
    def records() -> Iterator[Any]:
        with open(spend_log, encoding="utf-8") as lines:
            for line in lines:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue  # the audit itself reports an unreadable line
    return last_logged_slot(records())


def with_findings(report: AuditReport, found: Iterable[Violation]) -> AuditReport:
    """`report` with `found` among its violations, in the auditor's order."""
    merged = sorted((*report.violations, *found), key=lambda v: (v.slot, v.rule, v.ledger or "", v.user or ""))
    return replace(report, violations=tuple(merged))


def audit_release_topic(kafka: KafkaSettings, config: Config, spend_log: str | None = None,
                        requirements: str | None = None, read: TopicRead | None = None,
                        erased: frozenset[str] = frozenset(),
                        release: ReleaseSettings | None = None, dead_letters: str | None = None) -> TopicAudit:
    """Every slot's records read_uncommitted once or identical; with `spend_log`, the audit of the
    log (the full audit, against the committed releases up to the log's last slot, `last_spend_slot`, with
    `requirements` too: the topic is read after the log, and a running job releases meanwhile;
    `erased`: the erased users, `dead_letters` a file of the run's dead letters, jobs/offline/audit.py)."""
    read = read or read_release_topic(kafka, release or ReleaseSettings(), config)
    found = redrawn(read.uncommitted)
    if spend_log is None:
        report = AuditReport(0, 0, 0, 0, (), "the spend log and every user's windows; pass --spend-log "
                             "(and --requirements for the full audit)")
    elif requirements is None:
        report = audit_file(spend_log)
    else:
        through = last_spend_slot(spend_log)
        releases = read.releases()
        logged = [r for r in releases if not isinstance(r.get("slot"), int) or r["slot"] <= through]
        report = audit_file(spend_log, requirements, None, config, release_records=logged, erased=erased,
                            dead_letters=dead_letters)
        return TopicAudit(read, with_findings(report, found), len(releases) - len(logged), through)
    return TopicAudit(read, with_findings(report, found))


def distinct_counts(messages: Iterable[Message]) -> Mapping[str, int]:
    """Per slot key, how many different records it has (1 where all copies are identical)."""
    return {key: len(distinct) for key, distinct in slot_values(messages).items()}
