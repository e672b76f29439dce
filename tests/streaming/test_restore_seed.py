"""The restore seed (docs/streaming.md, "Time"): from each events partition's recent event times,
the slot a partition silent since a restore may close. A forged record must not move it."""

from __future__ import annotations

from pwevent.jobs.streaming.startup import seed_time

NOW = 1_800_000_000_000
HOUR = 3_600_000


def test_the_smallest_confirmed_latest_time_over_the_partitions():
    assert seed_time({0: [10, 30, 20], 1: [5, 40, 35]}, NOW, HOUR) == 20
    assert seed_time({0: [10], 1: [50, 60]}, NOW, HOUR) == 10
    assert seed_time({0: [], 1: [50, 60]}, NOW, HOUR) == 50  # an empty partition constrains nothing
    assert seed_time({}, NOW, HOUR) is None


def test_one_forged_far_ahead_record_moves_nothing():
    # one lone jump is not confirmed; past the wall clock + max_lead it is never believed
    assert seed_time({0: [10, 20, NOW - 1]}, NOW, HOUR) == 20
    assert seed_time({0: [10, 20, NOW + 2 * HOUR, NOW + 3 * HOUR]}, NOW, HOUR) == 10  # 20 stands alone
    assert seed_time({0: [NOW + 2 * HOUR]}, NOW, HOUR) is None  # nothing believable: no seed
    assert seed_time({0: [10, NOW + 2 * HOUR]}, NOW, 0) == 10  # max_lead 0: no wall-clock bound
