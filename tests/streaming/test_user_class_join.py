"""`pwevent.flink.counting.UserClassJoin` on a Flink mini-cluster (docs/streaming.md, "Topology"): each
user's latest event of a slot takes the newest class version valid from at most the slot's
last millisecond, the last to arrive of two from the same time, or none. The job's integration
tests check it end to end against the replay; this one pins the version rules on rows made for
them (UserClassJoinTest.java the choice of the latest event)."""

from __future__ import annotations

import pytest

from pwevent.jobs.streaming.jars import jvm_jar

pytestmark = [pytest.mark.flink, pytest.mark.slow]

SLOT_MS = 60_000


def end(slot: int) -> int:
    """The last millisecond of a slot (origin 0): the time a (user, slot) row comes out with."""
    return slot * SLOT_MS - 1


def run_join(versions: list[tuple[str, str, int]], rows: list[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
    """(user, slot) -> class, through the Java join, versions and rows timed by SQL watermarks."""
    from pyflink.common import Configuration
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import Schema, StreamTableEnvironment

    from pwevent.jobs.streaming.pyflink_internals import user_class_join

    conf = Configuration()
    conf.set_string("parallelism.default", "1")
    conf.set_string("table.local-time-zone", "UTC")
    # No watermark until the inputs end: every row waits, and the timers of one user fire together
    # (the case where versions must be kept for rows still waiting).
    conf.set_string("pipeline.auto-watermark-interval", "1 h")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.add_jars(jvm_jar().resolve().as_uri())
    t_env = StreamTableEnvironment.create(env)

    def timed(stream, column: str):  # type: ignore[no-untyped-def]
        return t_env.from_data_stream(stream, Schema.new_builder()
                                      .column_by_expression("rt", f"TO_TIMESTAMP_LTZ(`{column}`, 3)")
                                      .watermark("rt", "rt").build())

    v = env.from_collection(versions, Types.ROW_NAMED(["user", "cls", "vms"],
                                                      [Types.STRING(), Types.STRING(), Types.LONG()]))
    r = env.from_collection(  # one event per (user, slot), in the slot's last millisecond
        [(user, slot, 1, 0, n, bytearray(b"{}"), end(slot), end(slot)) for n, (user, slot) in enumerate(rows)],
        Types.ROW_NAMED(["user", "slot", "cell", "partition", "offset", "original", "t", "slot_end_ms"],
                        [Types.STRING(), Types.LONG(), Types.INT(), Types.INT(), Types.LONG(),
                         Types.PRIMITIVE_ARRAY(Types.BYTE()), Types.LONG(), Types.LONG()]))
    t_env.create_temporary_view("versions", timed(v, "vms"))
    t_env.create_temporary_view("present", timed(r, "t"))
    events = t_env.sql_query("SELECT `user`, slot, cell, `partition`, `offset`, original, t, slot_end_ms, rt"
                             " FROM present")
    joined = user_class_join(t_env.to_data_stream(t_env.sql_query("SELECT `user`, cls, vms, rt FROM versions")),
                             t_env.to_data_stream(events))
    out: dict[tuple[str, int], str | None] = {}
    with joined.execute_and_collect() as results:
        for row in results:
            assert row[6] == end(row[1])  # the row keeps its own time
            out[(row[0], row[1])] = row[7]
    return out


def test_each_row_takes_the_version_in_force_at_its_slot() -> None:
    versions = [
        ("a", "A1", 0), ("a", "A3", 2 * SLOT_MS),  # a: A1 from slot 1, A3 from slot 3
        ("b", "first", SLOT_MS), ("b", "second", SLOT_MS),  # b: two versions from slot 2, the last wins
        ("s", "S", 0),  # s: registered, never present
    ]
    rows = [("a", 1), ("a", 2), ("a", 3), ("a", 5), ("b", 1), ("b", 2), ("b", 4), ("x", 2)]
    assert run_join(versions, rows) == {
        ("a", 1): "A1", ("a", 2): "A1", ("a", 3): "A3", ("a", 5): "A3",
        ("b", 1): None,  # before its first version
        ("b", 2): "second", ("b", 4): "second",
        ("x", 2): None,  # no version at all: an unknown user downstream
    }
