"""FormatDeadLetter takes the rows of the job's SQL dead letters (8 columns, jobs/streaming/job.py)."""

import hashlib
import json

from pyflink.common import Row

from pwevent.jobs.common.records import unknown_user
from pwevent.jobs.streaming.hosts import FormatDeadLetter


def _format(row: Row) -> dict:
    (text,) = list(FormatDeadLetter().process_element(row, None))
    return json.loads(text)


def test_unknown_user_and_late_rows() -> None:
    unknown = _format(Row("events", "t.events", 1, 42, "unknown_user", "u7", 3, b'{"user":"u7"}'))
    assert unknown == {"source": "events", "position": {"topic": "t.events", "partition": 1, "offset": 42},
                       "reason": "unknown_user", "detail": unknown_user("u7", 3), "original": '{"user":"u7"}',
                       "original_bytes": 13, "original_sha256": hashlib.sha256(b'{"user":"u7"}').hexdigest()}
    late = _format(Row("events", "t.events", 0, 5, "late", "u1", 2, b"x"))
    assert late["reason"] == "late" and late["detail"] == "slot 2 had closed when the record arrived"
