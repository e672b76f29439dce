package pwevent.flink.parsing;

import pwevent.flink.contract.TimePaths;
import pwevent.flink.time.ValidTime;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * RequirementOrder: the requirement records of both parsers come out in each partition's offset
 * order, each right after its registration row; a fast row waits only behind a mark of its own
 * partition, until the reference parser's row for the mark comes; rows held at a checkpoint survive
 * a restore; a reference parser's row without its mark is refused loudly.
 */
class RequirementOrderTest {
    private static final String REQUESTED = "{\"epsilon\":1.0,\"w\":10}";

    static TwoInputStreamOperatorTestHarness<Row, Row, Row> harness(OperatorSubtaskState state) throws Exception {
        var harness = new TwoInputStreamOperatorTestHarness<Row, Row, Row>(new RequirementOrder());
        harness.setup(ValidTime.IN.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        if (state != null) {
            harness.initializeState(state);
        }
        harness.open();
        return harness;
    }

    /** A payload whose requirement registers its user, or (a detail, no ledger) registers nobody. */
    static byte[] payload(boolean registers) {
        return (registers ? new RequirementPayload(REQUESTED, REQUESTED, null, new byte[] {1})
                : new RequirementPayload(REQUESTED, null, "refused by the rules", new byte[] {2})).encode();
    }

    /** `user`'s requirement at `time`, at `offset` of `partition`, with the path `path`; timed at `time`. */
    static StreamRecord<Row> accepted(int path, String user, long time, int partition, long offset, boolean registers) {
        return new StreamRecord<>(Row.of(user, time, null, partition, offset, payload(registers), path), time);
    }

    static StreamRecord<Row> fast(String user, long time, int partition, long offset, boolean registers) {
        return accepted(TimePaths.FAST, user, time, partition, offset, registers);
    }

    static StreamRecord<Row> slow(String user, long time, int partition, long offset, boolean registers) {
        return accepted(TimePaths.SLOW_ACCEPTED, user, time, partition, offset, registers);
    }

    /** A record of `partition` at `offset` without its fields (a mark or a refusal), untimed. */
    static StreamRecord<Row> only(int partition, long offset, int path) {
        return new StreamRecord<>(Row.of(null, null, null, partition, offset, null, path));
    }

    /** The output rows as (partition, offset, path, user). */
    static List<List<Object>> out(TwoInputStreamOperatorTestHarness<Row, Row, Row> harness) {
        return harness.extractOutputValues().stream()
                .map(r -> Arrays.asList(r.getField(3), r.getField(4), r.getField(6), r.getField(0))).toList();
    }

    @Test
    void rowsInOrderGoOutAtOnce() throws Exception {
        try (var order = harness(null)) {
            order.processElement1(fast("u1", 90_000L, 0, 0L, true));
            order.processElement1(fast("u2", 30_000L, 0, 1L, false));
            byte[] registers = payload(true);
            assertEquals(List.of(
                    new StreamRecord<>(Row.of("u1", 90_000L, null, 0, 0L, registers, TimePaths.FAST), 90_000L),
                    new StreamRecord<>(Row.of("u2", 30_000L, null, 0, 1L, payload(false), TimePaths.FAST), 30_000L)),
                    List.copyOf(order.getOutput()));
        }
    }

    @Test
    void aMarkHoldsItsPartitionUntilTheReferenceParsersRowComes() throws Exception {
        try (var order = harness(null)) {
            order.processElement1(fast("u1", 1_000L, 0, 0L, true));
            order.processElement1(only(0, 1L, TimePaths.PENDING));
            order.processElement1(fast("u3", 3_000L, 0, 2L, true));
            order.processElement1(fast("u9", 1_000L, 1, 0L, true));
            order.processElement1(only(0, 3L, TimePaths.PENDING));
            order.processElement1(fast("u5", 125_000L, 0, 4L, true));
            assertEquals(List.of(List.of(0, 0L, TimePaths.FAST, "u1"), List.of(1, 0L, TimePaths.FAST, "u9")),
                    out(order), "partition 1 is not held behind partition 0's mark");
            order.processElement2(slow("u2", 2_000L, 0, 1L, false));
            assertEquals(List.of(List.of(0, 1L, TimePaths.FAST, "u2"), List.of(0, 2L, TimePaths.FAST, "u3")),
                    out(order).subList(2, 4), "up to the next mark");
            assertEquals(4, out(order).size());
            order.processElement2(only(0, 3L, TimePaths.SLOW_REJECTED));
            assertEquals(List.of(Row.of(null, null, null, 0, 3L, null, TimePaths.REFUSED)),
                    order.extractOutputValues().subList(4, 5));
            assertEquals(List.of(0, 4L, TimePaths.FAST, "u5"), out(order).get(5));
        }
    }

    /** Partition 0: fast, mark, fast, mark, fast; the reference parser's rows come after them all. */
    static final List<StreamRecord<Row>> FIRST = List.of(fast("u1", 1_000L, 0, 0L, true),
            only(0, 1L, TimePaths.PENDING), fast("u3", 3_000L, 0, 2L, true), only(0, 3L, TimePaths.PENDING),
            fast("u5", 5_000L, 0, 4L, false));
    static final List<StreamRecord<Row>> SECOND = List.of(slow("u2", 2_000L, 0, 1L, true),
            only(0, 3L, TimePaths.SLOW_REJECTED));

    /** The output (records and watermarks) of FIRST on input 1 and SECOND on input 2, then both
     *  inputs' end; with a restart before SECOND's last row if `restart`. */
    static List<Object> run(boolean restart) throws Exception {
        List<Object> output = new ArrayList<>();
        var order = harness(null);
        for (var record : FIRST) {
            order.processElement1(record);
        }
        order.processElement2(SECOND.get(0));
        if (restart) {
            OperatorSubtaskState state = order.snapshot(1L, 1L);
            output.addAll(order.getOutput());
            order.close();
            order = harness(state);
        }
        order.processElement2(SECOND.get(1));
        order.processWatermark1(new Watermark(Long.MAX_VALUE));
        order.processWatermark2(new Watermark(Long.MAX_VALUE));
        output.addAll(order.getOutput());
        order.close();
        return output;
    }

    @Test
    void rowsHeldAtACheckpointComeOutAfterARestoreAsWithoutIt() throws Exception {
        List<Object> straight = run(false);
        assertEquals(List.of(0L, 1L, 2L, 3L, 4L), straight.subList(0, 5).stream()
                .map(r -> ((StreamRecord<?>) r).getValue()).map(r -> ((Row) r).getField(4)).toList());
        assertEquals(List.of(new Watermark(Long.MAX_VALUE)), straight.subList(5, 6), "nothing held at the end");
        assertEquals(6, straight.size());
        assertEquals(straight, run(true));
    }

    @Test
    void aReferenceParsersRowBeforeItsMarkWaitsForItAlsoAcrossARestore() throws Exception {
        OperatorSubtaskState state;
        try (var order = harness(null)) {
            order.processElement1(only(0, 1L, TimePaths.PENDING));
            order.processElement2(only(0, 2L, TimePaths.SLOW_REJECTED));  // before its mark: waits
            assertThrows(IllegalStateException.class, () -> order.processElement2(only(0, 2L, TimePaths.SLOW_REJECTED)),
                    "one reference parser's row per record");
            assertEquals(List.of(), out(order));
            state = order.snapshot(1L, 1L);
        }
        try (var order = harness(state)) {
            order.processElement2(slow("u1", 0L, 0, 1L, true));
            order.processElement1(only(0, 2L, TimePaths.PENDING));  // takes the row that came first, at once
            order.processElement1(fast("u3", 0L, 0, 3L, true));
            assertEquals(List.of(Arrays.asList(0, 1L, TimePaths.FAST, "u1"),
                    Arrays.asList(0, 2L, TimePaths.REFUSED, null), Arrays.asList(0, 3L, TimePaths.FAST, "u3")),
                    out(order));
        }
    }
}
