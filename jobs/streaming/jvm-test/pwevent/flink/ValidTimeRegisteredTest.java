package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * The events' ValidTime keeps its registered users in keyed state (docs/streaming.md, "Time";
 * {@link ValidTime#applyToEvents}): a checkpoint's operator state does not grow with them, and the
 * registered users of an earlier release's state (broadcast state) still count after a restore.
 * Driven by Flink's operator test harness.
 */
class ValidTimeRegisteredTest {
    private static final long SLOT = 60_000L;
    private static final int USERS = 20_000;

    /** The bytes of a snapshot's operator state (managed), all handles. */
    static long operatorStateBytes(OperatorSubtaskState state) {
        long bytes = 0;
        for (OperatorStateHandle handle : state.getManagedOperatorState()) {
            bytes += handle.getStateSize();
        }
        return bytes;
    }

    @Test
    void aCheckpointsOperatorStateDoesNotGrowWithTheRegisteredUsers() throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness =
                     RegistrationGateTest.harness(LateRegistrationTest.operator())) {
            harness.open();
            for (int i = 0; i < USERS; i++) {
                harness.processElement2(new StreamRecord<>(Registrations.registration("user-" + i, 1, 0, i)));
            }
            OperatorSubtaskState state = harness.snapshot(1L, 1L);
            // 20,000 users as broadcast state were about 500 KB
            assertTrue(operatorStateBytes(state) < 10_000, () -> operatorStateBytes(state) + " bytes");
            assertTrue(state.getManagedKeyedState().iterator().next().getStateSize() > 10L * USERS,
                    () -> state.getManagedKeyedState().iterator().next().getStateSize() + " bytes of keyed state");
        }
    }

    /** What a release before the keyed state wrote: the registered users as broadcast state, here
     *  `user` from slot 1 (null: nobody). */
    static final class EarlierRelease extends AbstractStreamOperator<Row> implements TwoInputStreamOperator<Row, Row, Row> {
        private static final long serialVersionUID = 1L;
        private final String user;

        EarlierRelease(String user) {
            this.user = user;
        }

        @Override
        public void initializeState(StateInitializationContext context) throws Exception {
            super.initializeState(context);
            BroadcastState<String, Long> registered = context.getOperatorStateStore().getBroadcastState(
                    new MapStateDescriptor<>("registered", Types.STRING, Types.LONG));
            if (user != null) {
                registered.put(user, 1L);
            }
        }

        @Override
        public void processElement1(StreamRecord<Row> element) {
        }

        @Override
        public void processElement2(StreamRecord<Row> element) {
        }
    }

    /** Watermarks after u1's events of slots 1 and 2 (the source's watermark at 89,999), restored
     *  from `state`. */
    static List<Long> eventsAfterRestoring(OperatorSubtaskState state) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness =
                     RegistrationGateTest.harness(LateRegistrationTest.operator())) {
            harness.initializeState(state);
            harness.open();
            harness.setProcessingTime(0);
            harness.processElement1(new StreamRecord<>(Row.of("u1", 30_000L, 0, 0, 0L, new byte[0], ValidTime.FAST), 30_000L));
            harness.processElement1(new StreamRecord<>(Row.of("u1", 90_000L, 0, 0, 1L, new byte[0], ValidTime.FAST), 90_000L));
            harness.processWatermark1(new Watermark(89_999L));
            harness.setProcessingTime(200);
            return ValidTimeIdleTest.watermarks(List.copyOf(harness.getOutput()));
        }
    }

    static OperatorSubtaskState earlierState(String user) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness = new TwoInputStreamOperatorTestHarness<>(
                new EarlierRelease(user))) {
            harness.open();
            return harness.snapshot(1L, 1L);
        }
    }

    /** The operator state of a snapshot taken right after restoring `state`. */
    static long operatorStateBytesAfterRestoring(OperatorSubtaskState state) throws Exception {
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> harness =
                     RegistrationGateTest.harness(LateRegistrationTest.operator())) {
            harness.initializeState(state);
            harness.open();
            return operatorStateBytes(harness.snapshot(2L, 2L));
        }
    }

    @Test
    void theRegisteredUsersOfAnEarlierReleasesStateCountAfterARestore() throws Exception {
        List<Long> marks = eventsAfterRestoring(earlierState("u1"));
        assertEquals(89_999L, marks.get(marks.size() - 1), marks::toString);
        assertTrue(eventsAfterRestoring(earlierState("u2")).isEmpty(), "another user's registration moves no time");
        assertTrue(operatorStateBytes(earlierState("u1")) > operatorStateBytes(earlierState(null)));
        assertEquals(operatorStateBytesAfterRestoring(earlierState(null)),
                operatorStateBytesAfterRestoring(earlierState("u1")), "the broadcast state is left empty");
    }
}
