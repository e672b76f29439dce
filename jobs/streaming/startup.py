"""What a start reads from the topics before it builds the graph (docs/streaming.md, "Starting
twice"): the slots a resumed job has already decided. The read is bounded and says so when the
broker does not answer. (Where the input topics' partitions end, the backlog, each `ValidTime`
subtask reads itself at every (re)start: `pwevent.flink.time.KafkaPartitionEnds`.)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pwevent.jobs.common.config import Config
from pwevent.jobs.streaming.settings import StreamSettings


@dataclass(frozen=True)
class StartReads:
    """What `graph.build_pipeline` takes from the topics at a start (the defaults: nothing read).

    late_through: every event of a slot up to it is `late` (a resumed job's decided slots)."""

    late_through: int = 0

    @classmethod
    def read(cls, config: Config, settings: StreamSettings, restored: str | None) -> StartReads:
        """The reads of a start that restores `restored` (None: a start without state)."""
        return cls(late_through(settings, restored, config.domain.d))


#: A start that read nothing from the topics (a graph built for inspection, e.g. tests).
NOTHING_READ = StartReads()


def late_through(settings: StreamSettings, restored: str | None, cells: int) -> int:
    """The slot up to which the job judges every event `late` (`StartReads`): for a job that may
    start without state (`restored` None, or "ha:..." where the cluster decides) under
    `kafka.resume_after_last_release`, the slot it will resume after (the Population checks it,
    docs/streaming.md, "Starting twice"); else 0. Under high availability a recovered job's state has
    decided at least every committed release, so the bound drops nothing it still needs."""
    from pwevent.jobs.streaming.release_guard import read_guard_inputs

    if not settings.kafka.resume_after_last_release or (restored and not restored.startswith("ha:")):
        return 0
    point = read_guard_inputs(settings.kafka, cells, settings.release).resume_point()
    if point is None:
        return 0
    print(f"pwevent run: resuming after slot {point.slot} with fresh ledgers unless state is restored; "
          "events up to it are late", file=sys.stderr)
    return point.slot
