package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ValidTime's lead guard across a restore (docs/streaming.md, "Time"): the first event after the
 * restore is judged against its partition's latest time before it, so a lone far-ahead record is a
 * `too_far_ahead` dead letter right after a restore as at any other time. Driven by Flink's operator
 * test harness.
 */
class ValidTimeRestoreTest {
    private static final long SLOT = 60_000L;

    static ValidTime operator() {
        return new ValidTime(0, 3_600_000L, 1_000L, 3_000L, 0, SLOT, null, null, false, null);
    }

    static Row event(long time, long offset) {
        return Row.of("u1", time, 0, 0, offset, new byte[0], ValidTime.FAST);
    }

    /** Whether the event 300 slots ahead, the first after a restore of `state` (null: none), is ahead. */
    static Object farEventAheadAfter(OperatorSubtaskState state) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = ValidTimeHarness.harness(operator())) {
            if (state != null) {
                harness.initializeState(state);
            }
            harness.open();
            harness.processElement1(new StreamRecord<>(event(300 * SLOT, 2L), 300 * SLOT));
            List<List<Object>> rows = ValidTimeHarness.judged(List.copyOf(harness.getOutput()));
            return rows.get(0).get(1);
        }
    }

    @Test
    void theFirstEventAfterARestoreMeetsTheGuardOfBefore() throws Exception {
        OperatorSubtaskState state;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = ValidTimeHarness.harness(operator())) {
            harness.open();
            harness.processElement1(new StreamRecord<>(event(30_000L, 0L), 30_000L));
            harness.processElement1(new StreamRecord<>(event(40_000L, 1L), 40_000L));
            state = harness.snapshot(1L, 1L);
        }
        assertEquals(true, farEventAheadAfter(state));
        assertEquals(false, farEventAheadAfter(null), "without state the guard has nothing to judge by");
    }
}
