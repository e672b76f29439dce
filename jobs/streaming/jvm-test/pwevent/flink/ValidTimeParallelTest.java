package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ValidTime as its subtasks run at a parallelism above 1 (docs/streaming.md, "Which records move
 * time" and "Restored jobs"): a subtask needs nothing but its own partitions' rows (no registered
 * users: an event moves time whoever its user is), and a restore at another parallelism gives every
 * subtask the lead guard of every partition.
 */
class ValidTimeParallelTest {
    private static final long SLOT = 60_000L;

    static ValidTime operator() {
        return new ValidTime(0, 3_600_000L, 1_000L, 3_000L, 0, SLOT, null, null, false, null);
    }

    static StreamRecord<Row> event(String user, long time, int partition, long offset) {
        return new StreamRecord<>(Row.of(user, time, 0, partition, offset, new byte[0], ValidTime.FAST), time);
    }

    static List<Long> watermarks(List<Object> output) {
        List<Long> marks = new ArrayList<>();
        for (Object item : output) {
            if (item instanceof Watermark mark) {
                marks.add(mark.getTimestamp());
            }
        }
        return marks;
    }

    @Test
    void anEventOfAUserNobodyRegisteredMovesTime() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = ValidTimeHarness.harness(operator())) {
            harness.open();
            harness.processElement1(event("never-registered", 30_000L, 0, 0L));
            harness.processElement1(event("never-registered", 130_000L, 0, 1L));
            harness.processWatermark1(new Watermark(200_000L));
            assertEquals(List.of(129_999L), watermarks(List.copyOf(harness.getOutput())));
            assertEquals(List.of(List.of(0L, false), List.of(1L, false)),
                    ValidTimeHarness.judged(List.copyOf(harness.getOutput())));
        }
    }

    /** Subtask `index` of 2 reads partition `index`: one event at 30 s; its snapshot. */
    static OperatorSubtaskState subtask(int index) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = ValidTimeHarness.harness(operator(), 2, index)) {
            harness.open();
            harness.processElement1(event("u" + index, 30_000L, index, 0L));
            return harness.snapshot(1L, 1L);
        }
    }

    @Test
    void aRestoreAtParallelismOneKeepsTheGuardOfEveryPartition() throws Exception {
        OperatorSubtaskState both = AbstractStreamOperatorTestHarness.repackageState(subtask(0), subtask(1));
        OperatorSubtaskState one = AbstractStreamOperatorTestHarness.repartitionOperatorState(both, 128, 2, 1, 0);
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = ValidTimeHarness.harness(operator())) {
            harness.initializeState(one);
            harness.open();
            harness.processElement1(event("u1", 300 * SLOT, 1, 1L));  // a lone record 5 hours past partition 1's
            harness.processElement1(event("u0", 300 * SLOT, 0, 1L));  // and past partition 0's
            assertEquals(List.of(List.of(1L, true), List.of(1L, true)),
                    ValidTimeHarness.judged(List.copyOf(harness.getOutput())));
        }
    }
}
