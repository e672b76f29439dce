"""The Flink hosts' record-level rules, called directly (no cluster): ParseRecords."""

from __future__ import annotations

import json
import time

from pyflink.common import Row

from pwevent.jobs.config import parse_config
from pwevent.jobs.flink_functions import DEAD_LETTERS, ParseRecords

CONFIG = parse_config({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "binary"}})


def parse(raw: bytes, max_lead_ms: int = 86_400_000):
    return list(ParseRecords(CONFIG, "events", "pwevent.events", False, max_lead_ms).process_element(
        Row(raw, 0, 7, None), None))


def test_a_valid_event_passes_keyed_by_user_with_its_event_time_and_kafka_position():
    [(keyed, event_time)] = parse(b'{"user": "a", "time": 120000, "value": 1}')
    key, (kind, user, time_ms, cell, order, position, _) = keyed
    assert (key, kind, user, time_ms, cell, event_time) == ("a", "e", "a", 120000, 1, 120000)
    assert order == (120000, 0, 7) and position == {"topic": "pwevent.events", "partition": 0, "offset": 7}


def test_far_future_and_bad_records_go_to_dead_letters():
    future = int(time.time() * 1000) + 3 * 86_400_000
    for raw, reason in ((f'{{"user": "a", "time": {future}, "value": 1}}'.encode(), "too_far_ahead"),
                        (b'{"user": "a", "time": 1', "unparsable"),
                        (b'{"user": "a", "time": -1, "value": 1}', "before_origin")):
        [(tag, text)] = parse(raw)
        record = json.loads(text)
        assert tag is DEAD_LETTERS and record["reason"] == reason and record["position"]["offset"] == 7
    assert parse(f'{{"user": "a", "time": {future}, "value": 1}}'.encode(), max_lead_ms=0)[0][0][1][0] == "e"
