"""The rows of jobs/streaming/rows.py as their hosts read them: the events that count for no slot
(`REJECTED_EVENT`, as the job's SQL makes them), typed by `rejected_event` by field name and written
as the replay writes them (`rejected_event_letter`); the requirement records Membership refused
(`refused_requirement_letter`); the Population's rows (`POPULATION_IN`) and the
rows its host keeps in list state, also those an earlier release kept (`kept_row`)."""

import hashlib
import json

import orjson
from pyflink.common import Row

from pwevent.jobs.common.event_rejections import rejected_event_letter
from pwevent.jobs.common.population_operator import SlotChanges, SlotCount, row_to_json
from pwevent.jobs.common.reasons import TOO_FAR_AHEAD_DETAIL, Reason
from pwevent.jobs.common.records import reject_record, unknown_user
from pwevent.jobs.common.requirement_rejections import RefusedRequirement, refused_requirement_letter
from pwevent.jobs.streaming.rows import kept_row, population_row, rejected_event
from pwevent.state.population import MembershipChange
from pwevent.state.requirements import Requirement


def _rejected(slot: int, reason: str, user: str, partition: int, offset: int, original: bytes) -> Row:
    """A `REJECTED_EVENT` row, as the job's SQL makes it."""
    return Row(slot=slot, reason=reason, user=user, partition=partition, offset=offset, original=original)


def _format(row: Row, resumed_after: int = 0) -> dict:
    return json.loads(json.dumps(rejected_event_letter(rejected_event(row), "t.events", resumed_after)))


def test_unknown_user_and_late_rows() -> None:
    unknown = _format(_rejected(3, "unknown_user", "u7", 1, 42, b'{"user":"u7"}'))
    assert unknown == {"source": "events", "position": {"topic": "t.events", "partition": 1, "offset": 42},
                       "reason": "unknown_user", "detail": unknown_user("u7", 3), "original": '{"user":"u7"}',
                       "original_bytes": 13, "original_sha256": hashlib.sha256(b'{"user":"u7"}').hexdigest()}
    late = _format(_rejected(2, "late", "u1", 0, 5, b"x"))
    assert late["reason"] == "late" and late["detail"] == "slot 2 had closed when the record arrived"


def test_a_late_row_of_a_slot_decided_before_a_resume_says_so() -> None:
    row = _rejected(5, "late", "u1", 0, 5, b"x")
    resumed = _format(row, resumed_after=5)
    assert resumed["reason"] == "late"
    assert resumed["detail"] == "slot 5 was decided before this job resumed after slot 5"
    closed = _format(row, resumed_after=4)
    assert closed["detail"] == "slot 5 had closed when the record arrived"


def test_too_far_ahead_rows() -> None:
    """Flagged by `pwevent.flink.time.ValidTime`: the same detail as the source's lead guard gives."""
    ahead = _format(_rejected(305, Reason.TOO_FAR_AHEAD, "u1", 1, 7, b"{}"))
    assert ahead["reason"] == Reason.TOO_FAR_AHEAD and ahead["detail"] == TOO_FAR_AHEAD_DETAIL
    assert ahead["position"] == {"topic": "t.events", "partition": 1, "offset": 7}


def test_a_refused_requirement_letter_keeps_the_records_own_bytes() -> None:
    """An Avro requirement record (a Confluent frame, not UTF-8) refused as late: its dead letter's
    length and SHA-256 are the record's bytes', as the replay's reject of the same bytes, so the
    record can be found at its source."""
    record = b"\x00\x00\x00\x00\x07\x04u7\xfe\xff\x80\x01"
    letter = refused_requirement_letter(RefusedRequirement(Reason.LATE, "slot 3 had closed", 0, 41, record),
                                        "t.requirements")
    assert letter["original_bytes"] == len(record)
    assert letter["original_sha256"] == hashlib.sha256(record).hexdigest()
    assert letter == reject_record("requirements", {"topic": "t.requirements", "partition": 0, "offset": 41},
                                   Reason.LATE, "slot 3 had closed", record)
    assert letter["reason"] == "late" and letter["source"] == "requirements"


def test_counts_and_changes_by_field_name_and_as_kept_before_and_now() -> None:
    """A count and a batch of changes (in groups) as the job's SQL makes them; kept as `row_to_json`
    writes them, and as earlier releases kept them (the ten positional values, or one change of kind "change"),
    they are the same typed rows."""
    change = MembershipChange.of(4, "u1", None, Requirement(10, 1.0))
    change_text = json.dumps(change.to_json())
    other = MembershipChange.of(4, "u\"2", None, Requirement(5, 1.0))
    count = population_row(Row(slot=4, present=Row(cls=change.target, cell=1, n=3), change=None))
    assert count == SlotCount(4, change.target, 1, 3)
    legacy = (4, change.target, 1, 3, None, None, None, None, None, None)
    assert kept_row(row_to_json(count)) == count == kept_row(legacy)
    batch = json.dumps([{"target": c.target, "previous": None, "requirement": c.requirement.to_json(),
                         "users": [c.user]} for c in (change, other)])  # pwevent.flink.membership.ChangeBatches' groups
    changed = population_row(Row(slot=4, present=None, change=batch))
    assert changed == SlotChanges(4, (change, other))
    assert kept_row(row_to_json(changed)) == changed
    one = SlotChanges(4, (change,))
    assert kept_row((4, change.target, None, None, change_text, None, None, None, None, None)) == one
    assert kept_row(orjson.dumps({"version": 1, "kind": "change", "slot": 4, "change": change.to_json()})) == one
