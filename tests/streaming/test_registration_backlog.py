"""Which requirements partitions the events wait for at a start (docs/streaming.md, "Time"): every
one with a record; a restored job's ValidTime drops those its reader had read through
(RegistrationGateTest.java)."""

from __future__ import annotations

from pwevent.jobs.streaming.startup import registration_backlog


def test_every_partition_with_a_record_is_awaited_and_an_unknown_backlog_awaits_nothing():
    assert registration_backlog({0: 5, 1: 0, 2: 7}) == {0: 5, 2: 7}  # 1 holds no record
    assert registration_backlog({0: 0}) == {}
    assert registration_backlog(None) is None  # the broker did not say: the events wait for nothing
