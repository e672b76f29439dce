"""The dead letters found in SQL reach PopulationHost as `POPULATION_IN` rows with a reason (jobs/streaming/job.py)."""

import hashlib
import json

from pyflink.common import Row

from pwevent.jobs.common.records import unknown_user
from pwevent.jobs.streaming.hosts import TOO_FAR_AHEAD_DETAIL, sql_dead_letter


def _format(row: Row) -> dict:
    return json.loads(sql_dead_letter("t.events", row))


def test_unknown_user_and_late_rows() -> None:
    unknown = _format(Row(3, None, None, None, None, "unknown_user", "u7", 1, 42, b'{"user":"u7"}'))
    assert unknown == {"source": "events", "position": {"topic": "t.events", "partition": 1, "offset": 42},
                       "reason": "unknown_user", "detail": unknown_user("u7", 3), "original": '{"user":"u7"}',
                       "original_bytes": 13, "original_sha256": hashlib.sha256(b'{"user":"u7"}').hexdigest()}
    late = _format(Row(2, None, None, None, None, "late", "u1", 0, 5, b"x"))
    assert late["reason"] == "late" and late["detail"] == "slot 2 had closed when the record arrived"


def test_a_late_row_of_a_slot_decided_before_a_resume_says_so() -> None:
    row = Row(5, None, None, None, None, "late", "u1", 0, 5, b"x")
    resumed = json.loads(sql_dead_letter("t.events", row, resumed_after=5))
    assert resumed["reason"] == "late"
    assert resumed["detail"] == "slot 5 was decided before this job resumed after slot 5"
    closed = json.loads(sql_dead_letter("t.events", row, resumed_after=4))
    assert closed["detail"] == "slot 5 had closed when the record arrived"


def test_too_far_ahead_rows() -> None:
    """Flagged by `pwevent.flink.ValidTime`: the same detail as the source's lead guard gives."""
    ahead = _format(Row(305, None, None, None, None, "too_far_ahead", "u1", 1, 7, b"{}"))
    assert ahead["reason"] == "too_far_ahead" and ahead["detail"] == TOO_FAR_AHEAD_DETAIL
    assert ahead["position"] == {"topic": "t.events", "partition": 1, "offset": 7}
