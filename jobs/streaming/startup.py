"""What a start reads from the topics before it builds the graph (docs/streaming.md, "Time" and
"Starting twice"): where each requirements partition ends, whether a restored job's readers have
read everything, the slot a silent events partition of a restored job closes, and the slots a resumed
job has already decided. Each read is bounded and says so when the broker does not answer.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from pwevent.jobs.common.config import Config
from pwevent.jobs.streaming.settings import StreamSettings


@dataclass(frozen=True)
class StartReads:
    """What `graph.build_pipeline` takes from the topics at a start (the defaults: nothing read).

    late_through: every event of a slot up to it is `late` (a resumed job's decided slots).
    requirements_backlog: one past each requirements partition's last record now, so that its
    partitions stop holding event time back as soon as they have read what they held.
    restore_seed_ms (restored jobs): the slot an events partition that stays silent after the restore
    closes. read_to_end: the sources ("events", "requirements") whose restored readers have nothing
    left to read, so that their silent partitions skip `source_start_grace`. events_ends (restored
    jobs): one past each events partition's last record now, so that the events' ValidTime, if its
    restored state had read them all, skips the grace whatever the consumer group committed."""

    late_through: int = 0
    requirements_backlog: dict[int, int] | None = None
    restore_seed_ms: int | None = None
    read_to_end: frozenset[str] = field(default_factory=frozenset)
    events_ends: dict[int, int] | None = None

    @classmethod
    def read(cls, config: Config, settings: StreamSettings, restored: str | None) -> StartReads:
        """The reads of a start that restores `restored` (None: a start without state)."""
        backlog = requirements_backlog(settings)
        return cls(late_through(settings, restored, config.domain.d), backlog,
                   restore_seed(config, settings) if restored else None,
                   restored_read_to_end(settings) if restored else frozenset(),
                   topic_ends(settings, "events") if restored else None)


#: A start that read nothing from the topics (a graph built for inspection, e.g. tests).
NOTHING_READ = StartReads()


#: How many of each requirements partition's last offsets `requirements_backlog` looks at for its last
#: committed record (the rest may be transaction markers and aborted records).
BACKLOG_LOOK_BACK = 100


def requirements_backlog(settings: StreamSettings) -> dict[int, int] | None:
    """Per requirements partition, one past its last committed record when the job is built
    (docs/streaming.md, "Time": a partition then stops holding event time back once it has read that
    record, instead of after `source_idleness`; 0 for a partition that holds no offset at all: when
    every one is so, as for an events-only job, the partitions stop holding it back at once, instead
    of after `source_start_grace`); None, with a note, when the broker does not tell
    (the job then waits for `source_idleness` as before), and None in `execution_mode: process`,
    where the idle status would overtake the records still in the requirements parser's bundle."""
    if settings.flink.execution_mode == "process":
        return None
    return topic_ends(settings, "requirements")


def topic_ends(settings: StreamSettings, role: str) -> dict[int, int] | None:
    """Per partition of topic `role`, one past its last committed record now (among its last
    `BACKLOG_LOOK_BACK` offsets), 0 for an empty partition; None, with a note, when the broker does not
    tell."""
    from kafka.errors import KafkaError

    from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, empty_partitions, record_ends

    topic = settings.kafka.topics[role]
    try:
        ends = record_ends(settings.kafka, topic, BACKLOG_LOOK_BACK)
        return {**ends, **dict.fromkeys(empty_partitions(settings.kafka, topic), 0)}
    except (BrokerUnavailableError, KafkaError) as err:
        print(f"pwevent run: where the {role} partitions end is unknown ({err}); their silent partitions "
              "wait for flink.source_start_grace or flink.source_idleness", file=sys.stderr)
        return None


def restored_read_to_end(settings: StreamSettings) -> frozenset[str]:
    """For a restored job: the sources whose consumer group had committed, for every partition, the
    offset past its last committed record when the job is built (docs/streaming.md, "Time"; the
    source commits its offsets at each completed checkpoint, so a job restored from its latest one
    then has nothing left to read there). Their partitions that give no record skip
    `source_start_grace`. A source the broker says nothing about keeps the grace, with a note."""
    from kafka.errors import KafkaError

    from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, read_to_end

    kafka, read = settings.kafka, set()
    for role in ("events", "requirements"):
        try:
            if read_to_end(kafka, kafka.topics[role], kafka.source_group_id(role), BACKLOG_LOOK_BACK):
                read.add(role)
        except (BrokerUnavailableError, KafkaError) as err:
            print(f"pwevent run: whether the {role} readers are at their end is unknown ({err})", file=sys.stderr)
    if read:
        print(f"pwevent run: the restored {' and '.join(sorted(read))} readers have nothing left to read; "
              "their silent partitions skip flink.source_start_grace", file=sys.stderr)
    return frozenset(read)


#: How many of each events partition's last records `restore_seed` looks at for a valid event time.
SEED_LOOK_BACK = 100


def restore_seed(config: Config, settings: StreamSettings) -> int | None:
    """For a restored job: the smallest, over the events partitions that hold records, of the latest
    valid event time among each one's last SEED_LOOK_BACK records (docs/streaming.md, "Time": the
    slot a partition silent since the restore closes). None when a partition with records has no
    valid time there, or the broker does not tell: such a partition then closes nothing, as before."""
    from kafka.errors import KafkaError

    from pwevent.jobs.common.reasons import Rejected
    from pwevent.jobs.common.records import parse_event
    from pwevent.jobs.streaming.hosts import kafka_timestamp
    from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, last_messages

    kafka_time = settings.kafka.event_time == "kafka"
    try:
        by_partition = last_messages(settings.kafka, settings.kafka.topics["events"], SEED_LOOK_BACK)
    except (BrokerUnavailableError, KafkaError) as err:
        print(f"pwevent run: no restore seed ({err})", file=sys.stderr)
        return None
    times: dict[int, list[int]] = {}
    for partition, messages in by_partition.items():
        times[partition] = []
        for message in messages:
            try:
                times[partition].append(parse_event(message.value or b"", config.events, config.domain,
                                                    kafka_timestamp(kafka_time, message.timestamp_ms),
                                                    config.max_record_bytes).time_ms)
            except Rejected:
                continue
        if messages and not times[partition]:
            return None
    return seed_time(times, int(time.time() * 1000), settings.flink.max_lead_ms)


def seed_time(times: dict[int, list[int]], now_ms: int, max_lead_ms: int) -> int | None:
    """The restore seed from each partition's recent valid event times: per partition the latest
    time another record confirms (the second largest; a partition with one record, that one), never
    one more than `max_lead_ms` past `now_ms` (0: no bound), so that one forged far-future record
    cannot close slots, as SlotWatermarks' lead guard holds it back in the stream; then the smallest
    over the partitions that hold records."""
    latest = []
    for found in times.values():
        believable = sorted(t for t in found if max_lead_ms <= 0 or t <= now_ms + max_lead_ms)
        if found and not believable:
            return None
        if believable:
            latest.append(believable[-2] if len(believable) > 1 else believable[-1])
    return min(latest) if latest else None


def late_through(settings: StreamSettings, restored: str | None, cells: int) -> int:
    """The slot up to which the job judges every event `late` (`StartReads`): for a job that may
    start without state (`restored` None, or "ha:..." where the cluster decides) under
    `kafka.resume_after_last_release`, the slot it will resume after (the Population checks it,
    docs/streaming.md, "Starting twice"); else 0. Under high availability a recovered job's state has
    decided at least every committed release, so the bound drops nothing it still needs."""
    from pwevent.jobs.streaming.release_guard import read_guard_inputs

    if not settings.kafka.resume_after_last_release or (restored and not restored.startswith("ha:")):
        return 0
    point = read_guard_inputs(settings.kafka, cells).resume_point()
    if point is None:
        return 0
    print(f"pwevent run: resuming after slot {point.slot} with fresh ledgers unless state is restored; "
          "events up to it are late", file=sys.stderr)
    return point.slot
