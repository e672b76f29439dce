"""The dead letters found in SQL reach the Population as `POPULATION_IN` rows with a reason
(jobs/streaming/job.py); `population_row` types them and the operator writes them as the replay does."""

import hashlib
import json

from pyflink.common import Row

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.population_operator import PopulationOperator
from pwevent.jobs.common.reasons import TOO_FAR_AHEAD_DETAIL
from pwevent.jobs.common.records import unknown_user
from pwevent.jobs.streaming.hosts import population_row
from pwevent.operators.noise import NumpyRandomness

CONFIG = parse_config({"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z",
                       "domain": {"type": "binary"}, "noise": "numpy-fast"})


def _format(row: Row, resumed_after: int = 0) -> dict:
    operator = PopulationOperator(CONFIG, NumpyRandomness(1), "t.events", resumed_after)
    keep, emitted = operator.on_row(population_row(row))
    assert not keep and len(emitted.dead_letters) == 1 and not emitted.releases
    return json.loads(json.dumps(emitted.dead_letters[0]))


def test_unknown_user_and_late_rows() -> None:
    unknown = _format(Row(3, None, None, None, None, "unknown_user", "u7", 1, 42, b'{"user":"u7"}'))
    assert unknown == {"source": "events", "position": {"topic": "t.events", "partition": 1, "offset": 42},
                       "reason": "unknown_user", "detail": unknown_user("u7", 3), "original": '{"user":"u7"}',
                       "original_bytes": 13, "original_sha256": hashlib.sha256(b'{"user":"u7"}').hexdigest()}
    late = _format(Row(2, None, None, None, None, "late", "u1", 0, 5, b"x"))
    assert late["reason"] == "late" and late["detail"] == "slot 2 had closed when the record arrived"


def test_a_late_row_of_a_slot_decided_before_a_resume_says_so() -> None:
    row = Row(5, None, None, None, None, "late", "u1", 0, 5, b"x")
    resumed = _format(row, resumed_after=5)
    assert resumed["reason"] == "late"
    assert resumed["detail"] == "slot 5 was decided before this job resumed after slot 5"
    closed = _format(row, resumed_after=4)
    assert closed["detail"] == "slot 5 had closed when the record arrived"


def test_too_far_ahead_rows() -> None:
    """Flagged by `pwevent.flink.ValidTime`: the same detail as the source's lead guard gives."""
    ahead = _format(Row(305, None, None, None, None, "too_far_ahead", "u1", 1, 7, b"{}"))
    assert ahead["reason"] == "too_far_ahead" and ahead["detail"] == TOO_FAR_AHEAD_DETAIL
    assert ahead["position"] == {"topic": "t.events", "partition": 1, "offset": 7}
