package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.watermarkstatus.WatermarkStatus;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ValidTime when every events partition is idle (docs/streaming.md, "Time"): the events' instance
 * follows input 2's watermark (the requirements' valid time) and never emits an idle status; the
 * requirements' instance goes idle. Driven by Flink's operator test harness on its test clock.
 */
class ValidTimeIdleTest {
    private static final long SLOT = 60_000L;
    private static final long CLOSE_AFTER = 1_000L;
    private static final long IDLE_AFTER = 3_000L;

    /** What came out after one event at 30 s (slot 1), the source idle, and quiet for longer than
     *  the idleness; then a watermark of input 2 far ahead (its own), and the
     *  requirements' valid time at the end of slot 3; then a second event (slot 4). */
    static List<Object> run(boolean follows) throws Exception {
        ValidTime operator = new ValidTime(0, 3_600_000L, CLOSE_AFTER, IDLE_AFTER, 0, SLOT, null, null, follows, null);
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = new TwoInputStreamOperatorTestHarness<>(operator)) {
            harness.getExecutionConfig().setAutoWatermarkInterval(100);
            harness.setup(ValidTime.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement1(new StreamRecord<>(Row.of("u1", 30_000L, 0, 0, 0L, new byte[0], ValidTime.FAST), 30_000L));
            harness.processWatermark1(new Watermark(29_999L));
            for (long t = 100; t <= CLOSE_AFTER + IDLE_AFTER; t += 100) {
                harness.setProcessingTime(t);
            }
            harness.processWatermarkStatus1(WatermarkStatus.IDLE);
            harness.setProcessingTime(CLOSE_AFTER + IDLE_AFTER + 100);
            harness.processWatermark2(new Watermark(55 * SLOT));  // input 2's own: never read
            harness.processElement2(new StreamRecord<>(Registrations.requirementsTime(3 * SLOT - 1)));  // the requirements' valid time
            harness.setProcessingTime(CLOSE_AFTER + IDLE_AFTER + 200);
            harness.processWatermarkStatus1(WatermarkStatus.ACTIVE);
            harness.processElement1(new StreamRecord<>(Row.of("u1", 200_000L, 0, 0, 1L, new byte[0], ValidTime.FAST), 200_000L));
            harness.processWatermark1(new Watermark(199_999L));
            harness.setProcessingTime(CLOSE_AFTER + IDLE_AFTER + 300);
            return new ArrayList<>(harness.getOutput());
        }
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
    void theEventsInstanceFollowsTheRequirementsTimeAndNeverGoesIdle() throws Exception {
        List<Object> output = run(true);
        assertFalse(output.contains(WatermarkStatus.IDLE), output::toString);
        List<Long> marks = watermarks(output);
        assertFalse(marks.contains(55 * SLOT), () -> "input 2's own watermark is never followed: " + marks);
        assertTrue(marks.contains(SLOT - 1), () -> "slot 1 closed: " + marks);
        assertTrue(marks.contains(3 * SLOT - 1), () -> "followed the requirements to slot 3: " + marks);
        assertEquals(199_999L, marks.get(marks.size() - 1), marks::toString);
        for (int i = 1; i < marks.size(); i++) {
            assertTrue(marks.get(i) > marks.get(i - 1), marks::toString);
        }
    }

    @Test
    void theRequirementsInstanceGoesIdleAndFollowsNothing() throws Exception {
        List<Object> output = run(false);
        assertTrue(output.contains(WatermarkStatus.IDLE), output::toString);
        assertFalse(watermarks(output).contains(3 * SLOT - 1), output::toString);
    }

    /** The requirements' instance (backlog: partition 0 up to offset 7), restored from a checkpoint
     *  whose reader had read partition 0 through `read` (null: a start without state); what came out
     *  in the second after it opened, its source silent (no watermark, not idle yet). */
    static List<Object> restoredRequirements(Long read) throws Exception {
        OperatorSubtaskState snapshot = null;
        if (read != null) {
            try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = requirementsHarness()) {
                harness.open();
                harness.processElement2(new StreamRecord<>(Registrations.read(0, read)));
                snapshot = harness.snapshot(1L, 1L);
            }
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = requirementsHarness()) {
            if (snapshot != null) {
                harness.initializeState(snapshot);
            }
            harness.open();
            for (long t = 0; t <= 1_000; t += 100) {
                harness.setProcessingTime(t);
            }
            return new ArrayList<>(harness.getOutput());
        }
    }

    static TwoInputStreamOperatorTestHarness<Row, Row, Row> requirementsHarness() throws Exception {
        return ValidTimeHarness.harness(new ValidTime(0, 3_600_000L, CLOSE_AFTER, IDLE_AFTER, 0, SLOT, null,
                Map.of(0, 7L), false, null));
    }

    @Test
    void aRestoredRequirementsInstanceWhoseReaderHadReadItsBacklogHoldsNothingBack() throws Exception {
        assertEquals(List.of(WatermarkStatus.IDLE), restoredRequirements(6L));
        assertEquals(List.of(), restoredRequirements(3L));  // offsets 4-6 still to come: waits for its source
        assertEquals(List.of(), restoredRequirements(null));  // a start without state: waits for its source
    }

    /** The events' instance (following the requirements' time; restore seed: 150 s, in slot 3),
     *  restored from a checkpoint whose rows had reached offset `read` of partition 0 (of 0-1 when the
     *  job was built);
     *  the watermarks that came out while its source stayed silent for twice `CLOSE_AFTER`. */
    static List<Long> restoredEvents(long read) throws Exception {
        OperatorSubtaskState snapshot;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = eventsHarness()) {
            harness.open();
            for (long offset = 0; offset <= read; offset++) {
                harness.processElement1(new StreamRecord<>(Row.of("u1", 30_000L, 0, 0, offset, new byte[0],
                        ValidTime.FAST), 30_000L));
            }
            snapshot = harness.snapshot(1L, 1L);
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = eventsHarness()) {
            harness.initializeState(snapshot);
            harness.open();
            for (long t = 0; t <= 2 * CLOSE_AFTER; t += 100) {
                harness.setProcessingTime(t);
            }
            return watermarks(new ArrayList<>(harness.getOutput()));
        }
    }

    static TwoInputStreamOperatorTestHarness<Row, Row, Row> eventsHarness() throws Exception {
        return ValidTimeHarness.harness(new ValidTime(0, 3_600_000L, CLOSE_AFTER, IDLE_AFTER, 0, SLOT, 150_000L,
                null, true, Map.of(0, 2L)));
    }

    @Test
    void aRestoredEventsInstanceWhoseReaderHadReadItsPartitionsClosesTheSeedsSlot() throws Exception {
        assertEquals(List.of(3 * SLOT - 1), restoredEvents(1));  // after close_after, as a committed group's
        assertEquals(List.of(), restoredEvents(0));  // offset 1 still to come: waits for its source
    }
}
