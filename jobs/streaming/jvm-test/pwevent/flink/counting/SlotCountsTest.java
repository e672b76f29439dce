package pwevent.flink.counting;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Queue;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * SlotCounts (docs/streaming.md, "Topology"): the class join's rows of a slot become one count per
 * (class, cell) when the watermark reaches the slot's last millisecond, in first-come order; rows
 * without a class go to the side output at once; counts pending at a checkpoint survive a restore.
 */
class SlotCountsTest {
    private static final long SLOT = 60_000;

    static OneInputStreamOperatorTestHarness<Row, Row> harness(OperatorSubtaskState state) throws Exception {
        OneInputStreamOperatorTestHarness<Row, Row> harness = new OneInputStreamOperatorTestHarness<>(new SlotCounts());
        harness.setup(SlotCounts.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        if (state != null) {
            harness.initializeState(state);
        }
        harness.open();
        return harness;
    }

    /** The join's row of `user` in `slot` (its last ms SLOT * slot - 1) at `cell`, of class `cls`. */
    static StreamRecord<Row> joined(String user, long slot, int cell, String cls) {
        long end = SLOT * slot - 1;
        return new StreamRecord<>(Row.of(user, slot, cell, 0, 7L, new byte[] {1}, end, cls), end);
    }

    static List<Row> counts(OneInputStreamOperatorTestHarness<Row, Row> harness) {
        return harness.extractOutputValues();
    }

    @Test
    void aSlotsRowsBecomeOneCountPerClassAndCellAtItsEnd() throws Exception {
        var count = harness(null);
        count.processElement(joined("u1", 1, 3, "a"));
        count.processElement(joined("u2", 1, 4, "a"));
        count.processElement(joined("u3", 1, 3, "a"));
        count.processElement(joined("u4", 1, 3, "b"));
        count.processElement(joined("u5", 1, 3, null));
        count.processElement(joined("u1", 2, 3, "a"));
        Queue<StreamRecord<Row>> unknown = count.getSideOutput(SlotCounts.UNKNOWN);
        assertEquals(List.of("u5"), unknown.stream().map(r -> r.getValue().getField(0)).toList(), "at once");
        count.processWatermark(new Watermark(SLOT - 2));
        assertEquals(List.of(), counts(count), "before the slot's last millisecond");
        count.processWatermark(new Watermark(SLOT - 1));
        assertEquals(List.of(Row.of(1L, "a", 3, 2L, SLOT - 1), Row.of(1L, "a", 4, 1L, SLOT - 1),
                Row.of(1L, "b", 3, 1L, SLOT - 1)), counts(count));
        count.processWatermark(new Watermark(Long.MAX_VALUE));
        assertEquals(Row.of(2L, "a", 3, 1L, 2 * SLOT - 1), counts(count).get(3));
        assertEquals(4, counts(count).size());
        count.close();
    }

    @Test
    void countsPendingAtACheckpointAreRestored() throws Exception {
        var count = harness(null);
        count.processElement(joined("u1", 1, 3, "a"));
        count.processElement(joined("u2", 1, 3, "a"));
        OperatorSubtaskState state = count.snapshot(1, 1);
        count.close();
        var restored = harness(state);
        restored.processElement(joined("u3", 1, 3, "a"));
        restored.processWatermark(new Watermark(SLOT - 1));
        assertEquals(List.of(Row.of(1L, "a", 3, 3L, SLOT - 1)), counts(restored));
        restored.close();
    }
}
