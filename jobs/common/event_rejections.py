"""The dead letters of valid events that count for no slot: `late` (their slot was released before
they came, or decided before a resumed job started), `too_far_ahead` (past the lead guard) and
`unknown_user` (no requirement in force at their slot). The streaming job writes them from the
parallel operators that judge them (`jobs.streaming.hosts.EventRejections`), so that no such event
reaches the Population's single task; the replay writes the same reasons for the same events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.reasons import TOO_FAR_AHEAD_DETAIL, Reason
from pwevent.jobs.common.records import reject_record, unknown_user


@dataclass(frozen=True)
class RejectedEvent:
    """An event of `slot` the job rejected with `reason`, and where it was read."""

    slot: int
    reason: Reason
    user: str
    partition: int
    offset: int
    original: bytes


def rejected_event_letter(row: RejectedEvent, events_topic: str, resumed_after: int) -> dict[str, Any]:
    """The dead letter of `row`, as the replay writes it; `resumed_after`: the slot a job without
    state resumed after (0: none), whose events up to it are `late` for that reason."""
    position = {"topic": events_topic, "partition": row.partition, "offset": row.offset}
    if row.reason is Reason.UNKNOWN_USER:
        detail = unknown_user(row.user, row.slot)
    elif row.reason is Reason.TOO_FAR_AHEAD:
        detail = TOO_FAR_AHEAD_DETAIL
    elif row.slot <= resumed_after:
        detail = f"slot {row.slot} was decided before this job resumed after slot {resumed_after}"
    else:
        detail = f"slot {row.slot} had closed when the record arrived"
    return reject_record("events", position, row.reason, detail, row.original)
