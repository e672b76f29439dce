package pwevent.flink.time;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Which record times {@link ValidTime} believes, per partition (docs/streaming.md, "Time", the
 * `max_lead` row): a time outside the years 1-9999, or more than `maxLead` past the wall clock, never;
 * a jump of more than `maxLead` past the partition's latest time only once a second record confirms
 * it (within `maxLead` of the first), so that a stream that really moved on is followed and a lone
 * far-future record is not. It learns from the valid records only; checkpointed by ValidTime.
 */
public final class LeadGuard {
    /** The reference parser's time range (jobs/common/records.py): 0001-01-01 to 9999-12-31. */
    private static final long MIN_TIME_MS = -62_135_596_800_000L;
    private static final long MAX_TIME_MS = 253_402_300_799_999L;
    private final long maxLeadMs;
    private final Map<Integer, Long> latest = new HashMap<>();
    private final Map<Integer, Long> jump = new HashMap<>();

    LeadGuard(long maxLeadMs) {
        this.maxLeadMs = maxLeadMs;
    }

    /** Whether `time` of a record of `partition` is believed (then it is that partition's latest
     *  time if later): not null, within the years 1-9999, not more than maxLead past `nowMs`, and
     *  not more than maxLead past the partition's latest time unless a second record confirms the
     *  jump (within maxLead of the first): a stream that really moved on is followed, a lone
     *  far-future record is not. */
    boolean believe(int partition, Long time, long nowMs) {
        Long seen = latest.get(partition);
        boolean future = time != null && maxLeadMs > 0 && time > nowMs + maxLeadMs;
        if (time == null || time < MIN_TIME_MS || time > MAX_TIME_MS || future) {
            return false;
        }
        if (seen != null && maxLeadMs > 0 && time > seen + maxLeadMs) {
            Long first = jump.get(partition);
            if (first == null || Math.abs(time - first) > maxLeadMs) {
                jump.put(partition, time);
                return false;
            }
        }
        jump.remove(partition);
        if (seen == null || time > seen) {
            latest.put(partition, time);
        }
        return true;
    }

    /** Each partition's state as {partition, latest time, pending jump or Long.MIN_VALUE}: what
     *  {@link #restore} takes back (ValidTime checkpoints it). */
    List<long[]> snapshot() {
        List<long[]> out = new ArrayList<>();
        latest.forEach((partition, time) -> out.add(new long[] {partition, time,
                jump.getOrDefault(partition, Long.MIN_VALUE)}));
        return out;
    }

    /** Partitions' states from {@link #snapshot}s (of one or more instances); a partition given
     *  twice keeps its later latest time, and that state's pending jump. */
    void restore(Iterable<long[]> states) {
        for (long[] state : states) {
            int partition = (int) state[0];
            Long seen = latest.get(partition);
            if (seen == null || state[1] > seen) {
                latest.put(partition, state[1]);
                if (state[2] == Long.MIN_VALUE) {
                    jump.remove(partition);
                } else {
                    jump.put(partition, state[2]);
                }
            }
        }
    }
}
