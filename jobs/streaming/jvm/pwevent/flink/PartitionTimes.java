package pwevent.flink;

import java.util.HashMap;
import java.util.Map;

/**
 * The watermark rule over one input's partitions in {@link ValidTime} (docs/streaming.md, "Time"),
 * without Flink: per partition ({@link OffsetOrder}, over the events that moved time), the mark
 * trails the latest time by the out-of-orderness bound; a partition quiet for `closeAfterMs` closes
 * the slot of its latest time; one quiet for `idleAfterMs`, or whose latest record is the last one
 * its backlog held (`backlogEnds`), stops holding the others back. A partition whose result is
 * pending is never quiet. Clock: the `now` each call is given.
 */
final class PartitionTimes {
    /**
     * The partitions' marks: `active` whether any partition holds the others back, `lowest` the
     * smallest mark over those (Long.MIN_VALUE while one has nothing settled yet), `cap` the highest
     * mark any partition gives (at least the restore seed's slot end; Long.MIN_VALUE with neither).
     */
    record Marks(boolean active, long lowest, long cap) {
    }

    private final long outOfOrdernessMs;
    private final long closeAfterMs;
    private final long idleAfterMs;
    private final long originMs;
    private final long slotMs;
    private final Long restoreSeedMs;
    private final Map<Integer, Long> backlogEnds;
    private final Map<Integer, OffsetOrder> partitions = new HashMap<>();

    /** `restoreSeedMs` and `backlogEnds` (partition -> one past its backlog's last record) may be null. */
    PartitionTimes(long outOfOrdernessMs, long closeAfterMs, long idleAfterMs, long originMs, long slotMs,
                   Long restoreSeedMs, Map<Integer, Long> backlogEnds) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.closeAfterMs = closeAfterMs;
        this.idleAfterMs = idleAfterMs;
        this.originMs = originMs;
        this.slotMs = slotMs;
        this.restoreSeedMs = restoreSeedMs;
        this.backlogEnds = backlogEnds;
    }

    /** Partition `partition`'s time (created empty on first use). */
    OffsetOrder of(int partition) {
        return partitions.computeIfAbsent(partition, p -> new OffsetOrder());
    }

    /** The marks at `now` (the clock {@link OffsetOrder}'s activity times were given in). */
    Marks marks(long now) {
        boolean active = false;
        long lowest = Long.MAX_VALUE;
        long cap = restoreSeedMs == null ? Long.MIN_VALUE : SlotRules.slotLastMs(originMs, slotMs, restoreSeedMs);
        for (Map.Entry<Integer, OffsetOrder> entry : partitions.entrySet()) {
            OffsetOrder seen = entry.getValue();
            if (seen.latest() == Long.MIN_VALUE) {  // nothing settled: holds the others back while it waits
                if (seen.waiting()) {
                    active = true;
                    lowest = Long.MIN_VALUE;
                }
                continue;
            }
            long quiet = seen.waiting() ? 0 : now - seen.lastActivity();
            long mark = mark(seen.latest(), quiet, outOfOrdernessMs, closeAfterMs, originMs, slotMs);
            cap = Math.max(cap, mark);
            if (!drained(entry.getKey(), seen) && (idleAfterMs <= 0 || quiet < idleAfterMs)) {
                active = true;
                lowest = Math.min(lowest, mark);
            }
        }
        return new Marks(active, lowest, cap);
    }

    /** One partition's mark, also the source's ({@link SlotWatermarks}): its `latest` time less the
     *  out-of-orderness bound, or, once it has been quiet for `closeAfterMs` (> 0), at least the last
     *  millisecond of the slot of `latest`. */
    static long mark(long latest, long quietMs, long outOfOrdernessMs, long closeAfterMs, long originMs, long slotMs) {
        long mark = latest - outOfOrdernessMs - 1;
        if (closeAfterMs > 0 && quietMs >= closeAfterMs) {
            mark = Math.max(mark, SlotRules.slotLastMs(originMs, slotMs, latest));
        }
        return mark;
    }

    /** Whether partition `partition`'s latest record is the last one its backlog held, and nothing
     *  of it waits ({@link SlotWatermarks}' `backlogEnd` rule, by the rows' offsets). */
    private boolean drained(int partition, OffsetOrder seen) {
        if (backlogEnds == null || seen.waiting()) {
            return false;
        }
        Long end = backlogEnds.get(partition);
        return end != null && seen.frontier() == end - 1;
    }
}
