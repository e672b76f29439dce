package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ValidTime and records from before the origin (docs/streaming.md, "Which records move time"): a
 * requirement record from before the origin is valid (in force from slot 1) but its time is in no
 * slot, so it moves no time and teaches the lead guard nothing; the partition's first record from
 * the origin on is then no jump to confirm.
 */
class ValidTimeOriginTest {
    @Test
    void aRecordFromBeforeTheOriginMovesNoTimeAndTeachesTheLeadGuardNothing() throws Exception {
        long origin = 200 * ValidTimeHarness.LEAD;
        ValidTime operator = new ValidTime(0, ValidTimeHarness.LEAD, 0, origin,
                new ValidTimeHarness.FixedEnds(Map.of(0, 5L)));
        try (OneInputStreamOperatorTestHarness<Row, Row> harness = ValidTimeHarness.harness(operator)) {
            harness.open();
            harness.processElement(ValidTimeHarness.event("u1", 1_000L, 0, 0L));  // 200 h before the origin
            harness.processElement(ValidTimeHarness.event("u2", origin + 30_000L, 0, 1L));
            harness.setProcessingTime(100);
            assertEquals(List.of(List.of(0L, false), List.of(1L, false)),
                    ValidTimeHarness.judged(List.copyOf(harness.getOutput())), "both believed");
            assertEquals(origin + 29_999L, ValidTimeHarness.last(harness), "only the second moved time");
        }
    }
}
