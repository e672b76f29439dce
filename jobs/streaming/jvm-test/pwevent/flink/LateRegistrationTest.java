package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * A registration that reaches ValidTime after its user's events (docs/streaming.md, "Time";
 * {@link Unregistered}): the events move time once it comes, as if it had come first; events of
 * slots before the registration's slot, or of a slot already closed, do not. Driven by Flink's
 * operator test harness on its test clock.
 */
class LateRegistrationTest {
    private static final long SLOT = 60_000L;

    /** Events of u1 at 30 s (slot 1, offset 0) and 90 s (slot 2, offset 1) on partition 0, the
     *  source's watermark at 89,999; the registration of u1 from slot `since` before the events
     *  (`first`) or after them (null: none). Returns the watermarks that came out. */
    static List<Long> run(Long since, boolean first) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = RegistrationGateTest.harness(operator())) {
            harness.open();
            harness.setProcessingTime(0);
            if (since != null && first) {
                harness.processElement2(new StreamRecord<>(Registrations.registration("u1", since, 0, 0)));
            }
            harness.processElement1(new StreamRecord<>(Row.of("u1", 30_000L, 0, 0, 0L, new byte[0], ValidTime.FAST), 30_000L));
            harness.processElement1(new StreamRecord<>(Row.of("u1", 90_000L, 0, 0, 1L, new byte[0], ValidTime.FAST), 90_000L));
            harness.processWatermark1(new Watermark(89_999L));
            harness.setProcessingTime(100);
            if (since != null && !first) {
                harness.processElement2(new StreamRecord<>(Registrations.registration("u1", since, 0, 0)));
            }
            harness.setProcessingTime(200);
            return ValidTimeIdleTest.watermarks(List.copyOf(harness.getOutput()));
        }
    }

    @Test
    void eventsBeforeTheirUsersRegistrationMoveTimeOnceItComes() throws Exception {
        List<Long> before = run(1L, true);
        List<Long> after = run(1L, false);
        assertEquals(89_999L, before.get(before.size() - 1), before::toString);
        assertEquals(before.get(before.size() - 1), after.get(after.size() - 1), after::toString);
    }

    @Test
    void withoutARegistrationTheEventsMoveNoTime() throws Exception {
        List<Long> marks = run(null, false);
        assertTrue(marks.isEmpty(), marks::toString);
    }

    @Test
    void aRegistrationFromALaterSlotMovesOnlyTheEventsOfThatSlotAndLater() throws Exception {
        List<Long> marks = run(2L, false);
        assertEquals(89_999L, marks.get(marks.size() - 1), marks::toString);
        List<Long> none = run(3L, false);
        assertFalse(none.stream().anyMatch(mark -> mark >= 29_999L), none::toString);
    }

    @Test
    void eventsPassedBeforeACheckpointMoveTimeWhenTheirUserRegistersAfterTheRestore() throws Exception {
        org.apache.flink.runtime.checkpoint.OperatorSubtaskState state;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = RegistrationGateTest.harness(operator())) {
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement1(new StreamRecord<>(Row.of("u1", 30_000L, 0, 0, 0L, new byte[0], ValidTime.FAST), 30_000L));
            harness.processElement1(new StreamRecord<>(Row.of("u1", 90_000L, 0, 0, 1L, new byte[0], ValidTime.FAST), 90_000L));
            state = harness.snapshot(1L, 1L);
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = RegistrationGateTest.harness(operator())) {
            harness.initializeState(state);
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement1(new StreamRecord<>(Row.of("u2", 95_000L, 0, 0, 2L, new byte[0], ValidTime.FAST), 95_000L));
            harness.processWatermark1(new Watermark(89_999L));
            harness.processElement2(new StreamRecord<>(Registrations.registration("u1", 1, 0, 0)));
            harness.setProcessingTime(100);
            List<Long> marks = ValidTimeIdleTest.watermarks(List.copyOf(harness.getOutput()));
            assertEquals(89_999L, marks.get(marks.size() - 1), marks::toString);
        }
    }

    static ValidTime operator() {
        return new ValidTime(0, 3_600_000L, 1_000L, 3_000L, 0, SLOT, false, null, null, false, null, 0, null);
    }

    @Test
    void aClosedSlotIsForgotten() {
        Unregistered unregistered = new Unregistered();
        unregistered.add("u1", 1, 0, 0, 30_000L);
        unregistered.add("u1", 1, 0, 3, 20_000L);  // an earlier time: the latest of the slot stays
        unregistered.add("u2", 2, 1, 1, 90_000L);
        unregistered.closeThrough(1);
        assertEquals(1, unregistered.slots());
        assertTrue(unregistered.claim("u1", 1).isEmpty());
        List<long[]> claimed = unregistered.claim("u2", 1);
        assertEquals(1, claimed.size());
        assertEquals(List.of(1L, 1L, 90_000L), List.of(claimed.get(0)[0], claimed.get(0)[1], claimed.get(0)[2]));
        assertTrue(unregistered.claim("u2", 1).isEmpty(), "claimed once");
    }
}
