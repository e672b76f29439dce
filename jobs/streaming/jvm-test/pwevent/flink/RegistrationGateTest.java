package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * The events' ValidTime waits for the requirements' backlog to be registered (docs/streaming.md,
 * "Time"; {@link RegistrationGate}): events read before their users' registrations are judged as
 * if the registrations had come first, whichever reader started first. Driven by Flink's operator
 * test harness on its test clock.
 */
class RegistrationGateTest {
    private static final long SLOT = 60_000L;
    private static final long MAX_LEAD = 3_600_000L;
    private static final long SILENCE = 5_000L;
    /** u1's events on partition 0: slot 1 at 30 s and 40 s, one 300 slots ahead, slot 1 at 50 s. */
    private static final long[] TIMES = {30_000L, 40_000L, 300 * SLOT, 50_000L};

    static ValidTime operator(Map<Integer, Long> backlog) {
        return new ValidTime(0, MAX_LEAD, 1_000L, 3_000L, 0, SLOT, false, null, null, false, backlog, SILENCE, null);
    }

    /** `operator` keyed as the job keys the events' instance ({@link ValidTimeStreams#applyToEvents}). */
    static TwoInputStreamOperatorTestHarness<Row, Row, Row> harness(ValidTime operator) throws Exception {
        TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = new KeyedTwoInputStreamOperatorTestHarness<>(
                operator, row -> ValidTime.KEY, row -> ValidTime.KEY, Types.INT);
        harness.getExecutionConfig().setAutoWatermarkInterval(100);
        harness.setup(ValidTime.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        return harness;
    }

    static void events(TwoInputStreamOperatorTestHarness<Row, Row, Row> harness) throws Exception {
        for (int i = 0; i < TIMES.length; i++) {
            harness.processElement1(new StreamRecord<>(Row.of("u1", TIMES[i], 0, 0, (long) i, new byte[0], ValidTime.FAST),
                    TIMES[i]));
        }
        harness.processWatermark1(new Watermark(49_999L));
    }

    /** Opened at processing time 0: u1's registration (offset 0 of partition 0), then its events. */
    static void registeredThenEvents(TwoInputStreamOperatorTestHarness<Row, Row, Row> harness) throws Exception {
        harness.open();
        harness.setProcessingTime(0);
        harness.processElement2(new StreamRecord<>(Registrations.registration("u1", 1, 0, 0)));
        events(harness);
    }

    /** (offset, ahead) of each row that came out, in order. */
    static List<List<Object>> judged(List<Object> output) {
        List<List<Object>> rows = new ArrayList<>();
        for (Object item : output) {
            if (item instanceof StreamRecord<?> record) {
                Row row = (Row) record.getValue();
                rows.add(List.of(row.getField(4), row.getField(6)));
            }
        }
        return rows;
    }

    static final List<List<Object>> AS_IF_REGISTERED_FIRST =
            List.of(List.of(0L, false), List.of(1L, false), List.of(2L, true), List.of(3L, false));

    @Test
    void eventsReadBeforeTheBacklogsRegistrationsAreJudgedAsIfTheyHadComeFirst() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            harness.open();
            harness.setProcessingTime(0);
            events(harness);
            harness.setProcessingTime(1_000);
            assertTrue(harness.getOutput().isEmpty(), () -> "held until the backlog is registered: " + harness.getOutput());
            harness.processElement2(new StreamRecord<>(Registrations.registration("u1", 1, 0, 0)));
            harness.processElement2(new StreamRecord<>(Registrations.read(0, 6)));
            harness.setProcessingTime(1_100);
            List<Object> output = List.copyOf(harness.getOutput());
            assertEquals(AS_IF_REGISTERED_FIRST, judged(output), output::toString);
            List<Long> marks = ValidTimeIdleTest.watermarks(output);
            assertEquals(49_999L, marks.get(marks.size() - 1), marks::toString);
        }
    }

    @Test
    void withoutTheGateTheFarEventOfAnUnregisteredUserPasses() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(null))) {
            harness.open();
            harness.setProcessingTime(0);
            events(harness);
            harness.processElement2(new StreamRecord<>(Registrations.registration("u1", 1, 0, 0)));
            List<List<Object>> rows = judged(List.copyOf(harness.getOutput()));
            assertEquals(List.of(2L, false), rows.get(2), rows::toString);  // what the gate is for
        }
    }

    @Test
    void registrationsComingFirstWaitForTheRestOfTheBacklog() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L, 1, 3L)))) {
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement2(new StreamRecord<>(Registrations.registration("u1", 1, 0, 0)));
            harness.processElement2(new StreamRecord<>(Registrations.read(1, 2)));
            events(harness);
            harness.setProcessingTime(1_000);
            assertTrue(harness.getOutput().isEmpty(), () -> "partition 0's backlog not read through yet: " + harness.getOutput());
            harness.processElement2(new StreamRecord<>(Registrations.read(0, 6)));
            assertEquals(AS_IF_REGISTERED_FIRST, judged(List.copyOf(harness.getOutput())));
        }
    }

    @Test
    void aSilentBacklogOpensTheGateAfterTheSilence() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            registeredThenEvents(harness);
            harness.setProcessingTime(SILENCE - 100);
            assertTrue(harness.getOutput().isEmpty(), () -> "still waiting: " + harness.getOutput());
            harness.setProcessingTime(SILENCE + 100);
            assertEquals(AS_IF_REGISTERED_FIRST, judged(List.copyOf(harness.getOutput())));
        }
    }

    @Test
    void heldEventsSurviveACheckpointAndAreJudgedAfterTheRestore() throws Exception {
        OperatorSubtaskState snapshot;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            registeredThenEvents(harness);
            snapshot = harness.snapshot(1L, 1L);
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            harness.initializeState(snapshot);
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement2(new StreamRecord<>(Registrations.read(0, 6)));
            assertEquals(AS_IF_REGISTERED_FIRST, judged(List.copyOf(harness.getOutput())));
        }
    }

    @Test
    void aRecordPastTheBacklogsEndOpensTheGate() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            registeredThenEvents(harness);
            harness.processElement2(new StreamRecord<>(Registrations.read(0, 5)));
            assertTrue(harness.getOutput().isEmpty(), () -> "offset 6 not read yet: " + harness.getOutput());
            harness.processElement2(new StreamRecord<>(Registrations.read(0, 9)));  // offset 6 was, e.g., compacted away
            assertEquals(AS_IF_REGISTERED_FIRST, judged(List.copyOf(harness.getOutput())));
        }
    }

    /** A snapshot of a job whose requirements reader read partition 0 through `offset` (u1 registered). */
    static OperatorSubtaskState readThrough(long offset) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement2(new StreamRecord<>(Registrations.registration("u1", 1, 0, offset)));
            return harness.snapshot(1L, 1L);
        }
    }

    @Test
    void aRestoredReaderThatHadReadTheBacklogWaitsForNothing() throws Exception {
        OperatorSubtaskState snapshot = readThrough(6);
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            harness.initializeState(snapshot);
            harness.open();
            harness.setProcessingTime(0);
            events(harness);  // its reader, past the backlog, reads nothing more from partition 0
            assertEquals(AS_IF_REGISTERED_FIRST, judged(List.copyOf(harness.getOutput())));
        }
    }

    @Test
    void aRestoredReaderWaitsForWhatItHadNotRead() throws Exception {
        for (long[] readAndEnd : new long[][] {{3, 7}, {6, 9}}) {  // part of the backlog; a backlog grown since
            OperatorSubtaskState snapshot = readThrough(readAndEnd[0]);
            long end = readAndEnd[1];
            try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, end)))) {
                harness.initializeState(snapshot);
                harness.open();
                harness.setProcessingTime(0);
                events(harness);
                assertTrue(harness.getOutput().isEmpty(), () -> "waiting for offset " + (end - 1) + ": "
                        + harness.getOutput());
                harness.processElement2(new StreamRecord<>(Registrations.read(0, end - 1)));
                assertEquals(AS_IF_REGISTERED_FIRST, judged(List.copyOf(harness.getOutput())));
            }
        }
    }

    @Test
    void theEndOfABoundedInputOpensTheGate() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = harness(operator(Map.of(0, 7L)))) {
            registeredThenEvents(harness);
            harness.processWatermark1(new Watermark(Long.MAX_VALUE));
            List<Object> output = List.copyOf(harness.getOutput());
            assertEquals(AS_IF_REGISTERED_FIRST, judged(output));
            assertEquals(Long.MAX_VALUE, (long) ValidTimeIdleTest.watermarks(output).get(0), output::toString);
        }
    }

    @Test
    void theGateOpensOnceEveryAwaitedPartitionIsRead() {
        RegistrationGate gate = new RegistrationGate(Set.of(0, 2), 0, 10, 0, List.of());
        gate.backlogRead(0, 10);
        assertEquals(RegistrationGate.Opened.NOT_YET, gate.opened(1_000_000, 9));  // no valve: silence 0
        gate.backlogRead(1, 20);  // not awaited: changes nothing
        assertEquals(Set.of(2), gate.waitingFor());
        gate.backlogRead(2, 30);
        assertEquals(RegistrationGate.Opened.BACKLOG_REGISTERED, gate.opened(30, 9));
    }

    @Test
    void silenceOrAFullHoldOpensTheGateEarly() {
        RegistrationGate valve = new RegistrationGate(Set.of(0), 100, 10, 0, List.of());
        valve.registration(50);
        assertEquals(RegistrationGate.Opened.NOT_YET, valve.opened(149, 9));
        assertEquals(RegistrationGate.Opened.SILENCE, valve.opened(150, 0));
        assertEquals(RegistrationGate.Opened.FULL, valve.opened(149, 10));
    }
}
