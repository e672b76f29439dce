package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ValidTime across a restore (docs/streaming.md, "Time"): the first event after the restore is
 * judged against its partition's latest time before it, so a lone far-ahead record is a
 * `too_far_ahead` dead letter right after a restore as at any other time; and a partition the
 * restored state had read through the backlog the restored job found is live at once.
 */
class ValidTimeRestoreTest {
    static final long SLOT = ValidTimeHarness.SLOT;

    /** Whether the event 300 slots ahead, the first after a restore of `state` (null: none), is ahead. */
    static Object farEventAheadAfter(OperatorSubtaskState state) throws Exception {
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(0, Map.of(0, 0L)))) {
            if (state != null) {
                harness.initializeState(state);
            }
            harness.open();
            harness.processElement(ValidTimeHarness.event("u1", 300 * SLOT, 0, 2L));
            return ValidTimeHarness.judged(List.copyOf(harness.getOutput())).get(0).get(1);
        }
    }

    /** Partition 0 read at offsets 0-1 (times 30 s and 40 s), snapshot. */
    static OperatorSubtaskState readTwo() throws Exception {
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(0, Map.of(0, 0L)))) {
            harness.open();
            harness.processElement(ValidTimeHarness.event("u1", 30_000L, 0, 0L));
            harness.processElement(ValidTimeHarness.event("u1", 40_000L, 0, 1L));
            return harness.snapshot(1L, 1L);
        }
    }

    @Test
    void theFirstEventAfterARestoreMeetsTheGuardOfBefore() throws Exception {
        assertEquals(true, farEventAheadAfter(readTwo()));
        assertEquals(false, farEventAheadAfter(null), "without state the guard has nothing to judge by");
    }

    /** The watermark right after a restore of `state` (null: none) at clock 10 slots, delay 1 s,
     *  with partition 0 ending at `end` when the job was built; no record comes. */
    static long watermarkAfterRestore(OperatorSubtaskState state, long end) throws Exception {
        try (OneInputStreamOperatorTestHarness<Row, Row> harness =
                     ValidTimeHarness.harness(ValidTimeHarness.operator(1_000, Map.of(0, end)))) {
            if (state != null) {
                harness.initializeState(state);
            }
            harness.setProcessingTime(10 * SLOT);
            harness.open();
            harness.setProcessingTime(10 * SLOT + 100);
            return ValidTimeHarness.last(harness);
        }
    }

    @Test
    void aPartitionTheRestoredStateHadReadThroughIsLiveAtOnce() throws Exception {
        assertEquals(10 * SLOT + 100 - 1_000, watermarkAfterRestore(readTwo(), 2L), "offsets 0-1 of 0-1: read");
        assertEquals(Long.MIN_VALUE, watermarkAfterRestore(readTwo(), 3L), "offset 2 still to come: it waits");
        assertEquals(Long.MIN_VALUE, watermarkAfterRestore(null, 2L), "a start without state waits for its backlog");
    }
}
