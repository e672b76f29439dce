"""What a start reads from the topics before it builds the graph (docs/streaming.md, "Time" and
"Starting twice"): where each partition of the two input topics ends (the backlog the start finds),
and the slots a resumed job has already decided. Each read is bounded and says so when the broker
does not answer.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from pwevent.jobs.common.config import Config
from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError
from pwevent.jobs.streaming.settings import StreamSettings


@dataclass(frozen=True)
class StartReads:
    """What `graph.build_pipeline` takes from the topics at a start (the defaults: nothing read).

    late_through: every event of a slot up to it is `late` (a resumed job's decided slots).
    ends: per source ("events", "requirements"), one past each partition's last committed record
    now (0 for an empty partition): the backlog this start finds, which event time alone decides
    before the release schedule takes over (docs/streaming.md, "Time")."""

    late_through: int = 0
    ends: dict[str, dict[int, int]] = field(default_factory=lambda: {"events": {}, "requirements": {}})

    @classmethod
    def read(cls, config: Config, settings: StreamSettings, restored: str | None) -> StartReads:
        """The reads of a start that restores `restored` (None: a start without state)."""
        return cls(late_through(settings, restored, config.domain.d),
                   {role: topic_ends(settings, role) for role in ("events", "requirements")})


#: A start that read nothing from the topics (a graph built for inspection, e.g. tests).
NOTHING_READ = StartReads()


#: How many of each partition's last offsets `topic_ends` looks at for its last committed record (the
#: rest may be transaction markers and aborted records).
BACKLOG_LOOK_BACK = 100


class BacklogUnknownError(BrokerUnavailableError):
    """The broker did not tell where a topic's partitions end: a start cannot tell its backlog."""


def topic_ends(settings: StreamSettings, role: str) -> dict[int, int]:
    """Per partition of topic `role`, one past its last committed record now (among its last
    `BACKLOG_LOOK_BACK` offsets), 0 for an empty partition. Raises BacklogUnknownError when the broker
    does not tell: without it the job could not tell its backlog from live records (docs/streaming.md,
    "Time")."""
    from kafka.errors import KafkaError

    from pwevent.jobs.streaming.kafka_io import empty_partitions, record_ends

    topic = settings.kafka.topics[role]
    try:
        ends = record_ends(settings.kafka, topic, BACKLOG_LOOK_BACK)
        return {**ends, **dict.fromkeys(empty_partitions(settings.kafka, topic), 0)}
    except (BrokerUnavailableError, KafkaError) as err:
        raise BacklogUnknownError(f"where the {role} topic {topic}'s partitions end is unknown ({err}); "
                                  "the job needs it to tell the backlog it starts with from live records") from err


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
