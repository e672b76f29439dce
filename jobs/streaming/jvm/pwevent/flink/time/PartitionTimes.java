package pwevent.flink.time;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;

/**
 * The watermark rule over the partitions one {@link ValidTime} subtask times (docs/streaming.md,
 * "Time"), without Flink. Each partition is in one of two states:
 * <ul>
 *   <li><b>backlog</b>: it has not yet been read through the last record it held when this subtask
 *       (re)started ({@code ends}: partition -> one past that record; 0 for a partition without one).
 *       Its mark trails the latest time of its valid records ({@link OffsetOrder}) by the
 *       out-of-orderness bound; nothing settled yet: it holds everything back. Event time alone
 *       decides the backlog's slots, as the replay does.
 *   <li><b>live</b>: read through (by this run, or by the run a restored state comes from), nothing
 *       of it pending. Its mark is the later of that event time and the clock less {@code liveLagMs},
 *       whether or not anything arrives: for the events the release delay (the public schedule), for
 *       the requirements minus the lead guard's `max_lead`, so that a read requirements topic holds
 *       nothing back (a requirement record then counts if its slot is not decided yet).
 * </ul>
 * The watermark is the smallest mark over the partitions this subtask owns ({@link #owns}: the job's
 * rule that sends a partition's rows to a subtask; {@code ends} lists them) and those it has seen
 * rows of; with none, the clock's. So once every partition is read through, a slot is released when
 * event time has passed its end on every events partition, and a release delay after its end at the
 * latest; no quiet spell closes a slot before its end.
 */
final class PartitionTimes {
    private final long outOfOrdernessMs;
    private final long liveLagMs;
    private final Map<Integer, Long> ends;
    private final ReadOffsets read;
    private final TreeSet<Integer> owned = new TreeSet<>();
    private final Map<Integer, OffsetOrder> partitions = new HashMap<>();

    /** `read`: how far each partition has been read, by this run and the one a restored state comes
     *  from (the operator keeps it up to date); `ends`: the partitions this subtask owns, each with
     *  one past its last record at the (re)start. */
    PartitionTimes(long outOfOrdernessMs, long liveLagMs, ReadOffsets read, Map<Integer, Long> ends) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.liveLagMs = liveLagMs;
        this.ends = ends;
        this.read = read;
        owned.addAll(ends.keySet());
    }

    /** The subtask of `subtasks` that times `partition` (the job routes its rows there). */
    static int owns(int partition, int subtasks) {
        return Math.floorMod(partition, subtasks);
    }

    /** Partition `partition`'s time (created empty on first use). */
    OffsetOrder of(int partition) {
        return partitions.computeIfAbsent(partition, p -> new OffsetOrder());
    }

    /** The watermark at clock `nowMs`. */
    long watermark(long nowMs) {
        long clock = nowMs - liveLagMs;
        long lowest = Long.MAX_VALUE;
        TreeSet<Integer> all = new TreeSet<>(owned);
        all.addAll(partitions.keySet());
        for (int partition : all) {
            long mark = eventMark(partitions.get(partition));
            lowest = Math.min(lowest, live(partition) ? Math.max(mark, clock) : mark);
        }
        return lowest == Long.MAX_VALUE ? clock : lowest;
    }

    /** Whether `partition` has been read through its backlog and nothing of it is pending. */
    boolean live(int partition) {
        OffsetOrder seen = partitions.get(partition);
        if (seen != null && seen.waiting()) {
            return false;
        }
        Long end = ends.get(partition);
        if (end == null || end == 0) {  // a partition without a record at the (re)start, or added since
            return true;
        }
        return read.readThrough(partition, end);
    }

    private long eventMark(OffsetOrder seen) {
        return seen == null || seen.latest() == Long.MIN_VALUE ? Long.MIN_VALUE : seen.latest() - outOfOrdernessMs - 1;
    }
}
