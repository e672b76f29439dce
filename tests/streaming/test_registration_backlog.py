"""Which requirements partitions the events wait for at a start (docs/streaming.md, "Time"): the
registrations a start's requirements reader has left to read in its backlog."""

from __future__ import annotations

from pwevent.jobs.streaming.startup import unread_backlog


def test_a_partition_is_awaited_while_its_committed_offset_is_below_its_backlogs_end():
    ends = {0: 5, 1: 3, 2: 7}
    assert unread_backlog(ends, {0: 5, 1: 2, 2: None}) == {1: 3, 2: 7}  # 0 read to its end; 2 never committed
    assert unread_backlog(ends, {0: 9, 1: 3, 2: 7}) == {}  # a restored reader with nothing left waits for nothing
    assert unread_backlog(ends, {}) == ends  # a group the broker knows nothing of: everything
    assert unread_backlog(ends, {0: 0}) == ends  # offset 0 committed: nothing read
