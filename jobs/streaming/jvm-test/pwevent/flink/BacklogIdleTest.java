package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.util.clock.ManualClock;
import org.junit.jupiter.api.Test;

/** SlotWatermarks' backlog rule for a requirements topic that held no record (docs/streaming.md, "Time"). */
class BacklogIdleTest {
    private static final long GRACE = 60_000L;

    static final class Output implements WatermarkOutput {
        int idle;

        @Override
        public void emitWatermark(Watermark watermark) {
        }

        @Override
        public void markIdle() {
            idle++;
        }

        @Override
        public void markActive() {
        }
    }

    static boolean idleAtOnce(Map<Integer, Long> backlogEnd) {
        SlotWatermarks strategy = new SlotWatermarks(0, 0, 0, 10_000, GRACE, 0, 60_000, backlogEnd, null, false);
        ManualClock clock = new ManualClock();
        SlotWatermarks.Generator generator = strategy.new Generator(clock);
        Output output = new Output();
        clock.advanceTime(java.time.Duration.ofMillis(100));
        generator.onPeriodicEmit(output);
        return output.idle == 1;
    }

    @Test
    void aTopicWhosePartitionsAllHeldNothingIsReadAtOnce() {
        assertTrue(idleAtOnce(Map.of(0, 0L)));
        assertTrue(idleAtOnce(Map.of(0, 0L, 1, 0L)));
    }

    @Test
    void aPartitionWithRecordsOrAnUnknownTopicWaitsAsBefore() {
        assertFalse(idleAtOnce(Map.of(0, 0L, 1, 5L)), "one partition has records: which one is this?");
        assertFalse(idleAtOnce(Map.of()), "no partition had a committed record in the look-back: unknown");
        assertFalse(idleAtOnce(null));
        assertEquals(true, SlotWatermarks.heldNothing(Map.of(3, 0L)));
    }
}
