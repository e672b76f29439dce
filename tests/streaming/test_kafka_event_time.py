"""Where an event's time comes from (jobs/streaming/hosts.py `kafka_timestamp`, used by the job's
reference parser; docs/streaming.md, "Time"): with field event time, the record's
time field, and an event without it is `missing_field` in the job as in the replay, whatever its Kafka
timestamp; with `kafka.event_time: kafka`, the Kafka timestamp, and nothing a record holds (its time
field, or any other key) can set the time instead."""

from __future__ import annotations

import json

import pytest

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_event
from pwevent.jobs.streaming.hosts import kafka_timestamp

CONFIG = parse_config({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "cells", "d": 3}})
NO_TIME = b'{"user": "u1", "value": 1}'
KAFKA_TS = 120_000


def test_with_field_event_time_a_missing_time_is_a_dead_letter_whatever_the_kafka_timestamp() -> None:
    with pytest.raises(Rejected) as refused:
        parse_event(NO_TIME, CONFIG.events, CONFIG.domain, kafka_timestamp(False, KAFKA_TS))
    assert refused.value.reason is Reason.MISSING_FIELD


def test_with_field_event_time_the_time_field_is_the_time() -> None:
    record = b'{"user": "u1", "time": 60000, "value": 1}'
    assert parse_event(record, CONFIG.events, CONFIG.domain, kafka_timestamp(False, KAFKA_TS)).time_ms == 60_000


def test_with_kafka_event_time_the_record_timestamp_is_the_time() -> None:
    event = parse_event(NO_TIME, CONFIG.events, CONFIG.domain, kafka_timestamp(True, KAFKA_TS))
    assert (event.user, event.time_ms, event.cell) == ("u1", KAFKA_TS, 1)


@pytest.mark.parametrize("extra", [
    {"time": 9_000_000},  # the configured time field
    {"time": "not a time"},  # a broken one is not read either (the SQL fast path ignores it too)
    {"\u0000kafka-record-timestamp": 9_000_000},  # a key no configuration names
])
def test_with_kafka_event_time_no_member_of_the_record_sets_the_time(extra: dict) -> None:
    record = json.dumps({"user": "u1", **extra, "value": 1}).encode()
    assert parse_event(record, CONFIG.events, CONFIG.domain, kafka_timestamp(True, KAFKA_TS)).time_ms == KAFKA_TS


def test_with_kafka_event_time_a_record_without_a_kafka_timestamp_is_a_dead_letter() -> None:
    with pytest.raises(Rejected) as refused:
        parse_event(NO_TIME, CONFIG.events, CONFIG.domain, kafka_timestamp(True, None))
    assert refused.value.reason is Reason.MISSING_FIELD
