package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The release schedule over one subtask's partitions, with an injected clock (docs/streaming.md,
 * "Time"): event time over the backlog, the clock less the delay once read through; no quiet spell
 * closes anything.
 */
class PartitionTimesTest {
    private static final long SLOT = 60_000;
    private static final long OUT_OF_ORDERNESS = 1_000;
    private static final long DELAY = 10_000;
    private static final long NOW = 100 * SLOT;

    /** One subtask of one: it owns every partition of `ends`; `read` what it has read. */
    private static PartitionTimes times(Map<Integer, Long> ends, ReadOffsets read) {
        return new PartitionTimes(OUT_OF_ORDERNESS, DELAY, read, ends);
    }

    /** `times` reading `offset` of `partition` at `time` (null: a refused record). */
    private static void read(PartitionTimes times, ReadOffsets read, int partition, long offset, Long time) {
        read.read(partition, offset);
        times.of(partition).fast(offset, time);
    }

    @Test
    void theBacklogIsEventTimeTheSlowestPartitionFirst() {
        ReadOffsets read = new ReadOffsets();
        PartitionTimes times = times(Map.of(0, 5L, 1, 5L), read);
        assertEquals(Long.MIN_VALUE, times.watermark(NOW), "nothing read: every partition with a backlog waits");
        read(times, read, 0, 0, 10_000L);
        assertEquals(Long.MIN_VALUE, times.watermark(NOW), "partition 1 has not started");
        read(times, read, 1, 0, 20_000L);
        assertEquals(10_000 - OUT_OF_ORDERNESS - 1, times.watermark(NOW));
    }

    @Test
    void aReadThroughPartitionFollowsEventTimeOrTheScheduleAndAQuietOneClosesNothingEarlier() {
        ReadOffsets read = new ReadOffsets();
        PartitionTimes times = times(Map.of(0, 2L), read);
        read(times, read, 0, 0, 10_000L);
        assertEquals(10_000 - OUT_OF_ORDERNESS - 1, times.watermark(NOW), "offset 1 still to come");
        read(times, read, 0, 1, 30_000L);
        assertEquals(NOW - DELAY, times.watermark(NOW), "read through: the clock less the delay");
        read(times, read, 0, 2, NOW + 500L);  // a live record: event time ahead of the schedule
        assertEquals(NOW + 500 - OUT_OF_ORDERNESS - 1, times.watermark(NOW + 1));
        assertEquals(NOW + 10 * SLOT - DELAY, times.watermark(NOW + 10 * SLOT), "quiet for 10 slots: the schedule");
    }

    @Test
    void aPendingResultHoldsItsPartitionInItsBacklog() {
        ReadOffsets read = new ReadOffsets();
        PartitionTimes times = times(Map.of(0, 1L), read);
        read(times, read, 0, 0, 10_000L);
        read.read(0, 1);
        times.of(0).pending(1);
        assertEquals(10_000 - OUT_OF_ORDERNESS - 1, times.watermark(NOW), "offset 1's result is pending");
        times.of(0).resolved(1, 20_000L);
        assertEquals(NOW - DELAY, times.watermark(NOW));
    }

    @Test
    void emptyOrNewPartitionsAndNoneAtAllFollowTheSchedule() {
        ReadOffsets read = new ReadOffsets();
        assertEquals(NOW - DELAY, times(Map.of(0, 0L, 1, 0L), read).watermark(NOW), "empty when built");
        assertEquals(NOW - DELAY, times(Map.of(), read).watermark(NOW), "no partition at all");
        PartitionTimes times = times(Map.of(0, 0L), read);
        read(times, read, 7, 0, 10_000L);
        assertEquals(NOW - DELAY, times.watermark(NOW), "a partition added since the build");
    }

    @Test
    void aSubtaskOwnsThePartitionsItsRowsAreRoutedTo() {
        assertEquals(1, PartitionTimes.owns(5, 2));
        assertEquals(0, PartitionTimes.owns(4, 2));
        ReadOffsets read = new ReadOffsets();
        Map<Integer, Long> ends = Map.of(0, 5L, 1, 0L);
        PartitionTimes second = new PartitionTimes(OUT_OF_ORDERNESS, DELAY, read,
                new ValidTimeHarness.FixedEnds(ends).owned(1, 2, false));
        assertEquals(NOW - DELAY, second.watermark(NOW), "partition 0's backlog is subtask 0's");
        PartitionTimes first = new PartitionTimes(OUT_OF_ORDERNESS, DELAY, read,
                new ValidTimeHarness.FixedEnds(ends).owned(0, 2, false));
        assertEquals(Long.MIN_VALUE, first.watermark(NOW));
    }
}
