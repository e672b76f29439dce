package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The watermark rule over one input's partitions, with an injected clock (docs/streaming.md, "Time"). */
class PartitionTimesTest {
    private static final long SLOT = 60_000;
    private static final long OUT_OF_ORDERNESS = 1_000;
    private static final long CLOSE_AFTER = 5_000;
    private static final long IDLE_AFTER = 30_000;

    private static PartitionTimes times(Long restoreSeedMs, Map<Integer, Long> backlogEnds) {
        return new PartitionTimes(OUT_OF_ORDERNESS, CLOSE_AFTER, IDLE_AFTER, 0, SLOT, restoreSeedMs, backlogEnds);
    }

    @Test
    void theMarkTrailsTheSlowestActivePartition() {
        PartitionTimes times = times(null, null);
        times.of(0).fast(0, 10_000L, 0);
        times.of(1).fast(0, 20_000L, 0);
        assertEquals(new PartitionTimes.Marks(true, 10_000 - OUT_OF_ORDERNESS - 1, 20_000 - OUT_OF_ORDERNESS - 1),
                times.marks(1_000));
    }

    @Test
    void aQuietPartitionClosesItsSlotAndAnIdleOneStopsHoldingBack() {
        PartitionTimes times = times(null, null);
        times.of(0).fast(0, 10_000L, 0);
        times.of(1).fast(0, 70_000L, 0);
        times.of(1).fast(1, 70_500L, 40_000);  // partition 1 keeps sending; partition 0 went quiet at 0
        assertEquals(SLOT - 1, times.marks(CLOSE_AFTER).lowest(), "quiet for closeAfter: its slot's last ms");
        assertEquals(SLOT - 1, times.marks(IDLE_AFTER - 1).lowest());
        PartitionTimes.Marks idle = times.marks(IDLE_AFTER);
        assertEquals(70_500 - OUT_OF_ORDERNESS - 1, idle.lowest(), "idle: only partition 1 holds back");
        assertEquals(true, idle.active());
    }

    @Test
    void aPendingResultHoldsEveryPartitionBackAndIsNeverQuiet() {
        PartitionTimes times = times(null, null);
        times.of(0).fast(0, 10_000L, 0);
        times.of(1).pending(0);
        assertEquals(new PartitionTimes.Marks(true, Long.MIN_VALUE, SLOT - 1), times.marks(IDLE_AFTER * 10),
                "partition 0, quiet, closed its slot; partition 1 waits for its result");
        times.of(0).pending(1);
        assertEquals(Long.MIN_VALUE, times.marks(IDLE_AFTER * 10).lowest());
    }

    @Test
    void aPartitionAtItsBacklogsEndHoldsNothingBack() {
        PartitionTimes times = times(null, Map.of(0, 3L));
        times.of(0).fast(0, 10_000L, 0);
        times.of(0).fast(1, 11_000L, 0);
        assertEquals(true, times.marks(0).active(), "offset 1 is not the backlog's last (2)");
        times.of(0).fast(2, 12_000L, 0);
        assertEquals(new PartitionTimes.Marks(false, Long.MAX_VALUE, 12_000 - OUT_OF_ORDERNESS - 1), times.marks(0));
    }

    @Test
    void theRestoreSeedsSlotEndIsTheCapBeforeAnyEvent() {
        assertEquals(new PartitionTimes.Marks(false, Long.MAX_VALUE, 2 * SLOT - 1), times(SLOT + 5L, null).marks(0));
        assertEquals(new PartitionTimes.Marks(false, Long.MAX_VALUE, Long.MIN_VALUE), times(null, null).marks(0));
    }
}
