package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import pwevent.flink.contract.Reasons;
import java.util.List;
import java.util.Queue;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * SlotJudge (docs/streaming.md, "Time"): on the Python rule's vectors, an event counts for its slot
 * until a watermark at the slot's last millisecond, and is `late` from then on; a resumed job's
 * decided slots are late whatever the watermark; `too_far_ahead` comes first; the rows carry what
 * the class join and the Population's dead letters read.
 */
class SlotJudgeTest {
    private static final byte[] ORIGINAL = {1, 2, 3};

    static OneInputStreamOperatorTestHarness<Row, Row> harness(long origin, long length, long lateThrough)
            throws Exception {
        OneInputStreamOperatorTestHarness<Row, Row> harness =
                new OneInputStreamOperatorTestHarness<>(new SlotJudge(origin, length, lateThrough));
        harness.setup(SlotJudge.PRESENT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        harness.open();
        return harness;
    }

    static StreamRecord<Row> event(long time, boolean ahead) {
        return new StreamRecord<>(Row.of("u1", time, 7, 1, 42L, ORIGINAL, ahead), time);
    }

    static List<Row> present(OneInputStreamOperatorTestHarness<Row, Row> harness) {
        return harness.extractOutputValues();
    }

    static List<Row> rejected(OneInputStreamOperatorTestHarness<Row, Row> harness) {
        Queue<StreamRecord<Row>> side = harness.getSideOutput(SlotJudge.REJECTED);
        return side == null ? List.of() : side.stream().map(StreamRecord::getValue).toList();
    }

    @Test
    void anEventIsLateExactlyFromItsSlotsLastMillisecond() throws Exception {
        List<long[]> vectors = SlotRulesTest.vectors();
        assertTrue(vectors.size() >= 100);
        for (long[] v : vectors) {
            long origin = v[0];
            long length = v[1];
            long time = v[2];
            long slot = v[3];
            long last = v[4];
            var open = harness(origin, length, Long.MIN_VALUE);
            open.processElement(event(time, false));  // no watermark yet
            open.processWatermark(new Watermark(last - 1));
            open.processElement(event(time, false));
            assertEquals(List.of(Row.of("u1", slot, 7, 1, 42L, ORIGINAL, time, last),
                    Row.of("u1", slot, 7, 1, 42L, ORIGINAL, time, last)), present(open), () -> "present at " + time);
            assertEquals(List.of(), rejected(open));
            open.processWatermark(new Watermark(last));
            open.processElement(event(time, false));
            assertEquals(List.of(Row.of(slot, Reasons.LATE, "u1", 1, 42L, ORIGINAL)), rejected(open),
                    () -> "late " + time);
            assertEquals(2, present(open).size());
            open.close();
        }
    }

    @Test
    void theSlotsAResumedJobDecidedAreLateAndAheadComesFirst() throws Exception {
        var judge = harness(0, 60_000, 3);
        judge.processElement(event(3 * 60_000 - 1, false));  // slot 3
        judge.processElement(event(3 * 60_000, false));  // slot 4
        judge.processElement(event(4 * 60_000, true));  // slot 5, past the lead guard
        judge.processWatermark(new Watermark(5 * 60_000 - 1));
        judge.processElement(event(5 * 60_000 - 2, true));  // slot 5, closed: still too far ahead
        assertEquals(List.of(Row.of(3L, Reasons.LATE, "u1", 1, 42L, ORIGINAL),
                Row.of(5L, Reasons.TOO_FAR_AHEAD, "u1", 1, 42L, ORIGINAL),
                Row.of(5L, Reasons.TOO_FAR_AHEAD, "u1", 1, 42L, ORIGINAL)), rejected(judge));
        assertEquals(List.of(Row.of("u1", 4L, 7, 1, 42L, ORIGINAL, 3 * 60_000L, 4 * 60_000L - 1)), present(judge));
        judge.close();
    }
}
