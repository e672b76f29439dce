"""The dead letters of requirement records that did not apply: `late` (their slot was decided before
they came), `too_far_ahead`, `invalid_requirement` and a change under a fixed mechanism. The
streaming job's Membership (Java) refuses them (`jvm_contract.REFUSED_REQUIREMENT`) and
`jobs.streaming.hosts.RequirementRejections` writes these letters; the replay writes the same
reasons (all but `late`) for the same records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.records import reject_record


@dataclass(frozen=True)
class RefusedRequirement:
    """A requirement record refused with `reason` (`detail` says why), where it was read, and its
    bytes as the topic holds them."""

    reason: Reason
    detail: str
    partition: int
    offset: int
    original: bytes


def refused_requirement_letter(row: RefusedRequirement, requirements_topic: str) -> dict[str, Any]:
    """The dead letter of `row`: its `original_bytes` and `original_sha256` are the record's own
    bytes' (an Avro or Protobuf record is not UTF-8), as the replay's reject of the record."""
    position = {"topic": requirements_topic, "partition": row.partition, "offset": row.offset}
    return reject_record("requirements", position, row.reason, row.detail, row.original)
