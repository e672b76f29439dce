"""The Kafka timestamp stands in for a missing time field only with `kafka.event_time: kafka`
(jobs/streaming/hosts.py `fallback_time`, used by the job's reference parser and the restore seed):
with field event time an event without its time field is `missing_field` in the job as in the replay."""

from __future__ import annotations

import pytest

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_event
from pwevent.jobs.streaming.hosts import event_fields, fallback_time

CONFIG = parse_config({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "cells", "d": 3}})
NO_TIME = b'{"user": "u1", "value": 1}'


def test_with_field_event_time_a_missing_time_is_a_dead_letter_whatever_the_kafka_timestamp() -> None:
    with pytest.raises(Rejected) as refused:
        parse_event(NO_TIME, event_fields(CONFIG, False), CONFIG.domain, fallback_time(False, 120_000))
    assert refused.value.reason is Reason.MISSING_FIELD


def test_with_kafka_event_time_the_record_timestamp_is_the_time() -> None:
    event = parse_event(NO_TIME, event_fields(CONFIG, True), CONFIG.domain, fallback_time(True, 120_000))
    assert (event.user, event.time_ms, event.cell) == ("u1", 120_000, 1)
