package pwevent.flink.time;

import java.util.HashSet;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One partition's event time in {@link ValidTime} (docs/streaming.md, "Time"), in offset order: the
 * latest time of the valid events up to the fast path's channel's position (every record passes it,
 * as an event or as the mark of one the reference parser takes) and before the first record whose
 * reference-parser result is pending, and how far the channel has got. The two channels do not keep
 * pace: a result may come before or after its mark, and events after the first pending record
 * before its result; their times (offset and time only; the events themselves are not delayed) are
 * held until the fast channel has passed them and nothing before them is pending. Not checkpointed:
 * at an aligned checkpoint every record before the barrier has passed both channels, so nothing is
 * held (after a restore from an unaligned one, a replayed result whose mark came before the
 * checkpoint only leaves its offset in `early`).
 */
public final class OffsetOrder {
    private final TreeSet<Long> pending = new TreeSet<>();
    private final Set<Long> early = new HashSet<>();
    private final TreeMap<Long, Long> held = new TreeMap<>();
    private long frontier = Long.MIN_VALUE;
    private long latest = Long.MIN_VALUE;

    /** The fast path's channel reached the record at `offset`: an event that moves time to
     *  `time` (null: one that does not). */
    public void fast(long offset, Long time) {
        frontier = Math.max(frontier, offset);
        if (time != null) {
            held.put(offset, time);
        }
        settle();
    }

    /** The fast path's channel reached the record at `offset`, which went to the reference parser. */
    public void pending(long offset) {
        frontier = Math.max(frontier, offset);
        if (!early.remove(offset)) {
            pending.add(offset);
        }
        settle();
    }

    /** The reference parser's result for `offset`: the time it moves (null: none). */
    public void resolved(long offset, Long time) {
        if (!pending.remove(offset)) {
            early.add(offset);
        }
        if (time != null) {
            held.put(offset, time);
        }
        settle();
    }

    private void settle() {
        long first = pending.isEmpty() ? Long.MAX_VALUE : pending.first();
        while (!held.isEmpty() && held.firstKey() < first && held.firstKey() <= frontier) {
            latest = Math.max(latest, held.pollFirstEntry().getValue());
        }
    }

    /** The latest time of the settled valid events (Long.MIN_VALUE: none yet). */
    public long latest() {
        return latest;
    }

    /** Whether a time waits: a result pending, or one that came before the fast channel passed it. */
    public boolean waiting() {
        return !pending.isEmpty() || !held.isEmpty();
    }
}
