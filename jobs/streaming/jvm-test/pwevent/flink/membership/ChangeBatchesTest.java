package pwevent.flink.membership;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ChangeBatches (docs/streaming.md, "Topology"): Membership's changes, per slot in groups of one
 * (target, previous, requirement), out before any watermark is forwarded and before a checkpoint
 * barrier, and whenever a batch is full; timed as the changes were.
 */
class ChangeBatchesTest {
    private static final String REQ = "{\"epsilon\":1.0,\"w\":10}";

    static OneInputStreamOperatorTestHarness<Row, Row> harness() throws Exception {
        var harness = new OneInputStreamOperatorTestHarness<Row, Row>(new ChangeBatches());
        harness.setup(ChangeBatches.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        harness.open();
        return harness;
    }

    /** Membership's change of `user` to `cls` (from `previous`) at `slot`, timed at its last ms. */
    static StreamRecord<Row> change(String user, String cls, String previous, long slot) {
        return new StreamRecord<>(Row.of(user, cls, 1000 * (slot - 1), slot, previous, REQ), 1000 * slot - 1);
    }

    @Test
    void changesGoOutInGroupsBeforeTheWatermark() throws Exception {
        try (var batches = harness()) {
            batches.processElement(change("u1", "root", null, 1));
            batches.processElement(change("u\"2", "root", null, 1));
            batches.processElement(change("u3", "fork", "root", 1));
            batches.processElement(change("u4", "root", null, 2));
            assertEquals(List.of(), batches.getOutput().stream().toList(), "held until a watermark");
            batches.processWatermark(new Watermark(999));
            List<Object> out = new ArrayList<>(batches.getOutput());
            assertEquals(List.of(
                    new StreamRecord<>(Row.of(1L, "[{\"target\":\"root\",\"previous\":null,\"requirement\":" + REQ
                            + ",\"users\":[\"u1\",\"u\\\"2\"]},{\"target\":\"fork\",\"previous\":\"root\","
                            + "\"requirement\":" + REQ + ",\"users\":[\"u3\"]}]"), 999),
                    new StreamRecord<>(Row.of(2L, "[{\"target\":\"root\",\"previous\":null,\"requirement\":" + REQ
                            + ",\"users\":[\"u4\"]}]"), 1999),
                    new Watermark(999)), out);
        }
    }

    @Test
    void aFullBatchAndABarrierFlushToo() throws Exception {
        try (var batches = harness()) {
            for (int i = 0; i < ChangeBatches.MAX_CHANGES + 1; i++) {
                batches.processElement(change("u" + i, "root", null, 1));
            }
            assertEquals(1, batches.extractOutputValues().size(), "a full batch at once");
            batches.prepareSnapshotPreBarrier(1L);
            List<Row> rows = batches.extractOutputValues();
            assertEquals(2, rows.size());
            assertEquals("[{\"target\":\"root\",\"previous\":null,\"requirement\":" + REQ + ",\"users\":[\"u"
                    + ChangeBatches.MAX_CHANGES + "\"]}]", rows.get(1).getField(1));
        }
    }
}
