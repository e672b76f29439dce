package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ValidTime as its subtasks run at a parallelism above 1 (docs/streaming.md, "Which records move
 * time" and "Parallel"): a subtask needs nothing but its own partitions' rows (an event moves time
 * whoever its user is), a subtask waits for the backlog of the partitions it owns (p mod n) before
 * any row of theirs has come, and a restore at another parallelism gives every subtask the lead
 * guard of every partition.
 */
class ValidTimeParallelTest {
    private static final long SLOT = ValidTimeHarness.SLOT;

    @Test
    void anEventOfAUserNobodyRegisteredMovesTime() throws Exception {
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(0, Map.of(0, 5L)))) {
            harness.open();
            harness.processElement(ValidTimeHarness.event("never-registered", 30_000L, 0, 0L));
            harness.processElement(ValidTimeHarness.event("never-registered", 130_000L, 0, 1L));
            harness.setProcessingTime(100);
            assertEquals(129_999L, ValidTimeHarness.last(harness));
            assertEquals(List.of(List.of(0L, false), List.of(1L, false)),
                    ValidTimeHarness.judged(List.copyOf(harness.getOutput())));
        }
    }

    @Test
    void aSubtaskWaitsForTheBacklogOfThePartitionsItOwnsOnly() throws Exception {
        Map<Integer, Long> ends = Map.of(0, 3L, 1, 3L, 2, 0L, 3, 0L);  // 0 and 1 hold records, 2 and 3 none
        try (OneInputStreamOperatorTestHarness<Row, Row> owner =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(1_000, ends), 2, 1);
             OneInputStreamOperatorTestHarness<Row, Row> other =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(1_000, ends), 2, 0)) {
            owner.open();
            other.open();
            owner.setProcessingTime(5 * SLOT);
            assertEquals(Long.MIN_VALUE, ValidTimeHarness.last(owner), "partition 1's backlog has not come yet");
            owner.processElement(ValidTimeHarness.event("u", 30_000L, 1, 0L));
            owner.processElement(ValidTimeHarness.event("u", 90_000L, 1, 1L));
            owner.setProcessingTime(5 * SLOT + 100);
            assertEquals(89_999L, ValidTimeHarness.last(owner), "event time over the backlog");
            owner.processElement(ValidTimeHarness.event("u", 95_000L, 1, 2L));
            owner.setProcessingTime(5 * SLOT + 200);
            assertEquals(5 * SLOT + 200 - 1_000, ValidTimeHarness.last(owner), "read through: the schedule");
            other.processElement(ValidTimeHarness.event("u", 10_000L, 0, 0L));
            other.setProcessingTime(5 * SLOT + 200);
            assertEquals(9_999L, ValidTimeHarness.last(other), "partition 0 is still in its backlog");
        }
    }

    /** Subtask `index` of 2 reads partition `index`: one event at 30 s; its snapshot. */
    static OperatorSubtaskState subtask(int index) throws Exception {
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(0, Map.of(0, 0L, 1, 0L)), 2, index)) {
            harness.open();
            harness.processElement(ValidTimeHarness.event("u" + index, 30_000L, index, 0L));
            return harness.snapshot(1L, 1L);
        }
    }

    @Test
    void aRestoreAtParallelismOneKeepsTheGuardOfEveryPartition() throws Exception {
        OperatorSubtaskState both = AbstractStreamOperatorTestHarness.repackageState(subtask(0), subtask(1));
        OperatorSubtaskState one = AbstractStreamOperatorTestHarness.repartitionOperatorState(both, 128, 2, 1, 0);
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(0, Map.of(0, 0L, 1, 0L)))) {
            harness.initializeState(one);
            harness.open();
            // a lone record 5 h past partition 1's
            harness.processElement(ValidTimeHarness.event("u1", 300 * SLOT, 1, 1L));
            // and past partition 0's
            harness.processElement(ValidTimeHarness.event("u0", 300 * SLOT, 0, 1L));
            assertEquals(List.of(List.of(1L, true), List.of(1L, true)),
                    ValidTimeHarness.judged(List.copyOf(harness.getOutput())));
        }
    }

    @Test
    void theEndOfABoundedInputPassesAndOtherWatermarksDoNot() throws Exception {
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(0, Map.of(0, 9L)))) {
            harness.open();
            harness.processWatermark(new Watermark(50 * SLOT));
            assertEquals(Long.MIN_VALUE, ValidTimeHarness.last(harness), "the upstream's watermark is not read");
            harness.processWatermark(new Watermark(Long.MAX_VALUE));
            assertEquals(Long.MAX_VALUE, ValidTimeHarness.last(harness));
        }
    }
}
