package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.operators.co.KeyedCoProcessOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.Test;

/**
 * UserClassJoin's waiting rows without timers (docs/streaming.md, "Topology"): a row comes out once
 * the watermark of both inputs has passed its time, with the class in force then, also after a
 * restore, and after a restore of an earlier release's state, whose rows each had a timer.
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

    /** A (user, slot) row as `latest` gives it, timed at the slot's last millisecond. */
    static StreamRecord<Row> present(String user, long slot) {
        return new StreamRecord<>(Row.of(user, slot, 3, 0, slot, new byte[0]), slot * SLOT - 1);
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

    /** The state layout of releases before (a keyed co-process function): the same "versions" and
     *  "waiting" states, and one timer per row in the timer service "user-timers". */
    static final class EarlierRelease extends KeyedCoProcessFunction<String, Row, Row, Row> {
        private static final long serialVersionUID = 1L;
        private transient ListState<Row> waiting;

        @Override
        public void open(org.apache.flink.api.common.functions.OpenContext context) {
            waiting = getRuntimeContext().getListState(new ListStateDescriptor<>("waiting", new RowTypeInfo(
                    Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE),
                    Types.LONG)));
        }

        @Override
        public void processElement1(Row version, Context ctx, Collector<Row> out) {
        }

        @Override
        public void processElement2(Row row, Context ctx, Collector<Row> out) throws Exception {
            waiting.add(Row.of(row.getField(0), row.getField(1), row.getField(2), row.getField(3), row.getField(4),
                    row.getField(5), ctx.timestamp()));
            ctx.timerService().registerEventTimeTimer(ctx.timestamp());
        }
    }

    @Test
    void anEarlierReleasesWaitingRowsComeOutOnceAndItsTimersFireIntoNothing() throws Exception {
        OperatorSubtaskState state;
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> earlier = harness(new KeyedCoProcessOperator<>(
                new EarlierRelease()))) {
            earlier.open();
            earlier.processElement2(present("u1", 1));
            earlier.processElement2(present("u2", 2));
            state = earlier.snapshot(1L, 1L);
        }
        try (TwoInputStreamOperatorTestHarness<Row, Row, Row> restored = restored(state)) {
            restored.processElement1(version("u1", "a", 1));
            watermark(restored, 2 * SLOT - 1);
            assertEquals(List.of("u1@1=a", "u2@2=null"), sorted(out(restored)));
        }
    }
}
