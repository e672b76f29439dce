package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** ValidTime's partition time in offset order across the two parsers (docs/streaming.md, "Time"). */
class OffsetOrderTest {
    private static final long NONE = Long.MIN_VALUE;

    @Test
    void fastEventsAfterAPendingRecordWaitForItsResult() {
        OffsetOrder order = new OffsetOrder();
        order.fast(0, 1_000L);
        order.pending(1);
        order.fast(2, 9_000L);
        order.fast(3, 9_500L);
        assertEquals(1_000, order.latest(), "offsets 2 and 3 come after the pending record 1");
        assertTrue(order.waiting());
        order.resolved(1, 2_000L);
        assertEquals(9_500, order.latest());
        assertFalse(order.waiting());
    }

    @Test
    void aRejectedRecordReleasesWhatWaitedBehindIt() {
        OffsetOrder order = new OffsetOrder();
        order.pending(5);
        order.fast(6, 7_000L);
        assertEquals(NONE, order.latest());
        order.resolved(5, null);
        assertEquals(7_000, order.latest());
    }

    @Test
    void resultsSettleInOffsetOrderWhateverOrderTheyArriveIn() {
        OffsetOrder order = new OffsetOrder();
        order.pending(1);
        order.pending(2);
        order.fast(3, 30L);
        order.resolved(2, 20L);
        assertEquals(NONE, order.latest(), "record 1 is still pending");
        order.resolved(1, 10L);
        assertEquals(30, order.latest());
        assertFalse(order.waiting());
    }

    @Test
    void aResultBeforeTheFastChannelReachedItsRecordWaitsForIt() {
        OffsetOrder order = new OffsetOrder();
        order.fast(2, 20L);
        order.resolved(4, 40L);
        assertEquals(20, order.latest(), "offset 3 has not come yet: it may be an event of an earlier slot");
        assertTrue(order.waiting());
        order.fast(3, null);
        assertEquals(20, order.latest());
        order.pending(4);
        assertEquals(40, order.latest());
        assertFalse(order.waiting(), "the mark of an offset already resolved");
        order.fast(5, 50L);
        assertEquals(50, order.latest());
    }

    @Test
    void theLatestTimeNeverGoesBack() {
        OffsetOrder order = new OffsetOrder();
        order.fast(0, 5_000L);
        order.pending(1);
        order.resolved(1, 1_000L);
        assertEquals(5_000, order.latest());
    }
}
