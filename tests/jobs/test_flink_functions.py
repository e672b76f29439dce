"""The Flink hosts' record-level rules, called directly (no cluster): ParseRecords, slot groups."""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np
from pyflink.common import Row

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.streaming.hosts import DEAD_LETTERS, ParseRecords, slot_groups
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.policies import NO_BORDER
from pwevent.operators.slot_release import SlotRelease
from pwevent.state.spend import Kind

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


def test_grouped_users_release_exactly_what_one_row_per_user_releases():
    """The job hands SlotRelease one row per (slot, cell, budgets) group with its member count (a Java
    window aggregate); the release must equal the one from one row per user, seed for seed."""
    d, users = 4, 300
    rng = np.random.default_rng(7)
    levels = [(0.01, 0.02, NO_BORDER), (0.01, 0.05, NO_BORDER), (0.03, 0.02, 2.0), (0.005, 0.01, NO_BORDER)]
    per_user = []
    for _ in range(users):
        eps1, eps2, border = levels[rng.integers(len(levels))]
        per_user.append((3, int(rng.integers(-1, d)), eps1, eps2, border, 1))
    grouped = Counter(row[:5] for row in per_user)
    groups = [(*key, n) for key, n in sorted(grouped.items(), key=lambda item: -item[1])]
    assert len(groups) < users / 10
    last = np.array([20, 30, 40, 50])
    for scheduled in (None, Kind.PUBLISH):
        one = SlotRelease(d, NumpyRandomness(11)).decide(3, slot_groups(per_user, d), last, scheduled)
        many = SlotRelease(d, NumpyRandomness(11)).decide(3, slot_groups(groups, d), last, scheduled)
        assert (one.kind, one.population, one.dissimilarity) == (many.kind, many.population, many.dissimilarity)
        assert one.counts.tolist() == many.counts.tolist()
    assert slot_groups(groups, d).present.sum() == sum(1 for row in per_user if row[1] >= 0)
