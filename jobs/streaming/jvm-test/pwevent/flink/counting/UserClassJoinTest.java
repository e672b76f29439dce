package pwevent.flink.counting;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * UserClassJoin (docs/streaming.md, "Topology"): of a user's events of a slot only the latest by
 * (time, partition, offset) comes out, once the watermark of both inputs has passed the slot's
 * last millisecond, with the class in force then; no timers; also after a restore.
 */
class UserClassJoinTest {
    private static final long SLOT = 60_000;

    static TwoInputStreamOperatorTestHarness<Row, Row, Row> harness(TwoInputStreamOperator<Row, Row, Row> operator)
            throws Exception {
        TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = new KeyedTwoInputStreamOperatorTestHarness<>(
                operator, row -> (String) row.getField(0), row -> (String) row.getField(0), Types.STRING);
        harness.setup(UserClassJoin.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        return harness;
    }

    /** A UserClassJoin restored from `state`, open. */
    static TwoInputStreamOperatorTestHarness<Row, Row, Row> restored(OperatorSubtaskState state) throws Exception {
        TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(new UserClassJoin());
        harness.initializeState(state);
        harness.open();
        return harness;
    }

    /** An event of `user` at the first millisecond of `slot`, offset = slot. */
    static StreamRecord<Row> present(String user, long slot) {
        return event(user, slot, 3, 0, slot, (slot - 1) * SLOT);
    }

    /** An event of `user` in `slot` at `time`, in cell `cell`, read at (`partition`, `offset`). */
    static StreamRecord<Row> event(String user, long slot, int cell, int partition, long offset, long time) {
        return new StreamRecord<>(Row.of(user, slot, cell, partition, offset, new byte[0], time, slot * SLOT - 1),
                time);
    }

    static StreamRecord<Row> version(String user, String cls, long slot) {
        return new StreamRecord<>(Row.of(user, cls, (slot - 1) * SLOT));
    }

    /** (user, slot, class) of what came out, in order. */
    static List<String> out(TwoInputStreamOperatorTestHarness<Row, Row, Row> harness) {
        List<String> rows = new ArrayList<>();
        for (Object element : harness.getOutput()) {
            if (element instanceof StreamRecord<?> record) {
                Row row = (Row) record.getValue();
                rows.add(row.getField(0) + "@" + row.getField(1) + "=" + row.getField(7));
            }
        }
        return rows;
    }

    static List<String> sorted(List<String> rows) {
        return rows.stream().sorted().toList();
    }

    static void watermark(TwoInputStreamOperatorTestHarness<Row, Row, Row> harness, long ms) throws Exception {
        harness.processWatermark1(new Watermark(ms));
        harness.processWatermark2(new Watermark(ms));
    }

    @Test
    void aRowWaitsForBothWatermarksAndTakesTheVersionInForce() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(new UserClassJoin())) {
            harness.open();
            harness.processElement1(version("u1", "a", 1));
            harness.processElement2(present("u1", 1));
            harness.processElement2(present("u1", 2));
            harness.processElement2(present("u2", 2));
            harness.processWatermark2(new Watermark(2 * SLOT - 1));
            assertEquals(List.of(), out(harness), "the versions' watermark has not passed slot 1");
            harness.processElement1(version("u1", "b", 2));
            harness.processElement1(version("u2", "c", 3));
            harness.processWatermark1(new Watermark(SLOT - 1));
            assertEquals(List.of("u1@1=a"), out(harness));
            harness.processWatermark1(new Watermark(2 * SLOT - 1));
            assertEquals(List.of("u1@1=a", "u1@2=b", "u2@2=null"), out(harness));
        }
    }

    @Test
    void aRestoreEmitsTheRowsThatWereWaiting() throws Exception {
        OperatorSubtaskState state;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(new UserClassJoin())) {
            harness.open();
            harness.processElement1(version("u1", "a", 1));
            harness.processElement2(present("u1", 1));
            harness.processElement2(present("u2", 1));
            harness.processElement2(present("u1", 2));
            state = harness.snapshot(1L, 1L);
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> restored = restored(state)) {
            watermark(restored, SLOT - 1);
            assertEquals(List.of("u1@1=a", "u2@1=null"), sorted(out(restored)), "the order of users may differ");
            watermark(restored, 2 * SLOT - 1);
            assertEquals(List.of("u1@1=a", "u1@2=a", "u2@1=null"), sorted(out(restored)));
            watermark(restored, 3 * SLOT - 1);
            assertEquals(3, out(restored).size(), "each row once");
        }
    }

    /** (user, slot, cell, partition, offset) of what came out, in order. */
    static List<String> cells(TwoInputStreamOperatorTestHarness<Row, Row, Row> harness) {
        List<String> rows = new ArrayList<>();
        for (Object element : harness.getOutput()) {
            if (element instanceof StreamRecord<?> record) {
                Row row = (Row) record.getValue();
                rows.add(row.getField(0) + "@" + row.getField(1) + ":" + row.getField(2) + " p" + row.getField(3)
                        + " o" + row.getField(4));
                assertEquals((Long) row.getField(1) * SLOT - 1, record.getTimestamp(), "timed at the slot's end");
                assertEquals((Long) row.getField(1) * SLOT - 1, row.getField(6));
            }
        }
        return rows;
    }

    @Test
    void ofAUsersEventsOfASlotTheLatestByTimePartitionAndOffsetComesOutOnce() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(new UserClassJoin())) {
            harness.open();
            harness.processElement2(event("u1", 1, 1, 0, 10, 5_000));
            harness.processElement2(event("u1", 1, 2, 0, 11, 9_000));  // later time: wins
            harness.processElement2(event("u1", 1, 3, 1, 12, 7_000));  // earlier time, any position: loses
            harness.processElement2(event("u1", 2, 4, 0, 13, SLOT));
            harness.processElement2(event("u2", 1, 5, 1, 3, 8_000));
            harness.processElement2(event("u2", 1, 6, 0, 20, 8_000));  // same time, lower partition: loses
            harness.processElement2(event("u2", 1, 7, 1, 2, 8_000));   // same time and partition, lower offset: loses
            harness.processElement2(event("u2", 1, 8, 1, 4, 8_000));   // higher offset: wins
            watermark(harness, SLOT - 2);
            assertEquals(List.of(), cells(harness), "slot 1 has not ended");
            watermark(harness, SLOT - 1);
            assertEquals(List.of("u1@1:2 p0 o11", "u2@1:8 p1 o4"), sorted(cells(harness)));
            harness.processElement2(event("u1", 2, 9, 0, 14, SLOT + 1));
            watermark(harness, 2 * SLOT - 1);
            assertEquals(List.of("u1@1:2 p0 o11", "u1@2:9 p0 o14", "u2@1:8 p1 o4"), sorted(cells(harness)));
        }
    }

    @Test
    void aRestoreKeepsTheLatestSoFarAndComparesLaterEventsWithIt() throws Exception {
        OperatorSubtaskState state;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(new UserClassJoin())) {
            harness.open();
            harness.processElement2(event("u1", 1, 1, 0, 10, 9_000));
            state = harness.snapshot(1L, 1L);
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> restored = restored(state)) {
            restored.processElement2(event("u1", 1, 2, 0, 11, 8_000));  // earlier than the kept one
            restored.processElement2(event("u1", 1, 3, 0, 9, 9_000));   // same time, lower offset
            watermark(restored, SLOT - 1);
            assertEquals(List.of("u1@1:1 p0 o10"), cells(restored));
        }
    }
}
