package pwevent.flink;

import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.eventtime.TimestampAssigner;
import org.apache.flink.api.common.eventtime.TimestampAssignerSupplier;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.types.Row;
import org.apache.flink.util.clock.RelativeClock;

/**
 * Event time of the Kafka sources, per partition (docs/streaming.md, "Time"):
 * <ul>
 *   <li>a record's timestamp is its jtime ({@link PositionedRecords}), unless it lies more than
 *       maxLead ahead of the latest time already seen in its partition and no second record
 *       confirms the jump, or more than maxLead ahead of the wall clock (confirmed or not, first
 *       record of the partition included): then, like a record without a time, it keeps that latest
 *       time and cannot move the watermark (for requirements the job sends it to the dead letters as
 *       too_far_ahead; for events {@link ValidTime} applies the same guard to the valid events and
 *       decides, and the events' watermark never exceeds this one);
 *   <li>a time outside the years 1-9999 (which the reference parser rejects) counts as no time;
 *   <li>the watermark trails the latest time by the out-of-orderness bound;
 *   <li>a partition quiet for closeAfter (input-activity time, which pauses under backpressure)
 *       closes the slot of its latest record, so the last slot of a quiet stream is released;
 *   <li>a partition quiet for idleAfter stops holding the watermark back; one that has not given a
 *       single record yet only after startGrace as well (a first fetch slowed by start-up or load
 *       must not let the other partitions close slots without it);
 *   <li>with {@code backlogEnd} (partition -> one past its last committed record when the job was
 *       built, so neither a transaction marker nor an aborted record; given for the
 *       requirements source only): a partition whose latest record is the last one it held then
 *       has read its whole backlog and stops holding the watermark back at once, instead of after
 *       idleAfter. Its records are all ahead of the idle status in the stream, so none can be
 *       overtaken by it; a later record makes the partition active again under the rules above.
 *       An end of 0 says the partition held no record at all; when every partition of the topic
 *       held none (an events-only job's empty requirements topic), each partition has read its
 *       backlog from the start and goes idle at once, instead of after startGrace;
 *   <li>with {@code restoreSeedMs} (a restored job: the latest event time of the topic's partitions
 *       when the job was built, the smallest over them): a partition that gives no record within
 *       closeAfter and startGrace (a restored reader already at its end; its own latest time was
 *       not part of any state) closes the slot of that time before it goes idle, as closeAfter
 *       would have done had it remembered its latest record. Without it, a job restored after
 *       reading its whole input never closed its last open slots;
 *   <li>with {@code readToEnd} (a restored job whose consumer group had committed, for every
 *       partition of the topic, the offset past its last committed record when the job was built):
 *       a partition that gives no record has nothing left to give, so no start grace applies to it
 *       (the restore seed closes its slot after closeAfter, it goes idle after idleAfter), and with
 *       {@code backlogEnd} it has read its backlog (idle at once). Without it, such a restore
 *       waited startGrace (60 s by default) before the last slots closed.
 * </ul>
 */
public final class SlotWatermarks implements WatermarkStrategy<Row> {
    private static final long serialVersionUID = 1L;
    private final long outOfOrdernessMs;
    private final long maxLeadMs;
    private final long closeAfterMs;
    private final long idleAfterMs;
    private final long startGraceMs;
    private final long originMs;
    private final long slotMs;
    private final HashMap<Integer, Long> backlogEnd;
    private final Long restoreSeedMs;
    private final boolean readToEnd;

    public SlotWatermarks(long outOfOrdernessMs, long maxLeadMs, long closeAfterMs, long idleAfterMs,
                          long startGraceMs, long originMs, long slotMs, Map<?, ?> backlogEnd,
                          Number restoreSeedMs, boolean readToEnd) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.maxLeadMs = maxLeadMs;
        this.closeAfterMs = closeAfterMs;
        this.idleAfterMs = idleAfterMs;
        this.startGraceMs = startGraceMs;
        this.originMs = originMs;
        this.slotMs = slotMs;
        this.backlogEnd = backlogEnd == null ? null : offsets(backlogEnd);
        this.restoreSeedMs = restoreSeedMs == null ? null : restoreSeedMs.longValue();
        this.readToEnd = readToEnd;
    }

    /** Partition -> offset from whatever numbers the caller passed (py4j hands Python ints over as
     *  Integer or Long depending on their size). */
    static HashMap<Integer, Long> offsets(Map<?, ?> given) {
        HashMap<Integer, Long> out = new HashMap<>();
        for (Map.Entry<?, ?> entry : given.entrySet()) {
            out.put(((Number) entry.getKey()).intValue(), ((Number) entry.getValue()).longValue());
        }
        return out;
    }

    @Override
    public TimestampAssigner<Row> createTimestampAssigner(TimestampAssignerSupplier.Context context) {
        return new LeadGuard(maxLeadMs);
    }

    @Override
    public WatermarkGenerator<Row> createWatermarkGenerator(WatermarkGeneratorSupplier.Context context) {
        return new Generator(context.getInputActivityClock());
    }

    /** The last millisecond of the slot holding {@code time}. */
    long slotLastMs(long time) {
        return SlotRules.slotLastMs(originMs, slotMs, time);
    }

    /** The lead guard of one reader (per partition); also {@link ValidTime}'s, over valid events. */
    static final class LeadGuard implements TimestampAssigner<Row> {
        /** The reference parser's time range (jobs/common/records.py): 0001-01-01 to 9999-12-31. */
        private static final long MIN_TIME_MS = -62_135_596_800_000L;
        private static final long MAX_TIME_MS = 253_402_300_799_999L;
        private final long maxLeadMs;
        private final Map<Integer, Long> latest = new HashMap<>();
        private final Map<Integer, Long> jump = new HashMap<>();

        LeadGuard(long maxLeadMs) {
            this.maxLeadMs = maxLeadMs;
        }

        @Override
        public long extractTimestamp(Row row, long recordTimestamp) {
            Long time = (Long) row.getField(4);
            Integer partition = (Integer) row.getField(1);
            if (believe(partition, time, System.currentTimeMillis())) {
                return time;
            }
            Long seen = latest.get(partition);
            return seen == null ? 0L : seen;
        }

        /** Whether `time` of a record of `partition` is believed (then it is that partition's latest
         *  time if later): not null, within the years 1-9999, not more than maxLead past `nowMs`, and
         *  not more than maxLead past the partition's latest time unless a second record confirms the
         *  jump (within maxLead of the first): a stream that really moved on is followed, a lone
         *  far-future record is not. */
        boolean believe(int partition, Long time, long nowMs) {
            return check(partition, time, nowMs, true);
        }

        /** Whether {@link #believe} would believe `time` now; changes nothing (neither the latest
         *  time nor a pending jump). */
        boolean plausible(int partition, Long time, long nowMs) {
            return check(partition, time, nowMs, false);
        }

        /** Each partition's state as {partition, latest time, pending jump or Long.MIN_VALUE}: what
         *  {@link #restore} takes back (ValidTime checkpoints it). */
        java.util.List<long[]> snapshot() {
            java.util.List<long[]> out = new java.util.ArrayList<>();
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

        private boolean check(int partition, Long time, long nowMs, boolean record) {
            Long seen = latest.get(partition);
            boolean future = time != null && maxLeadMs > 0 && time > nowMs + maxLeadMs;
            if (time == null || time < MIN_TIME_MS || time > MAX_TIME_MS || future) {
                return false;
            }
            if (seen != null && maxLeadMs > 0 && time > seen + maxLeadMs) {
                Long first = jump.get(partition);
                if (first == null || Math.abs(time - first) > maxLeadMs) {
                    if (record) {
                        jump.put(partition, time);
                    }
                    return false;
                }
            }
            if (record) {
                jump.remove(partition);
                if (seen == null || time > seen) {
                    latest.put(partition, time);
                }
            }
            return true;
        }
    }

    /** Every partition of `ends` (partition -> one past its last record; 0: none) held no record. */
    static boolean heldNothing(Map<Integer, Long> ends) {
        return !ends.isEmpty() && ends.values().stream().allMatch(end -> end == 0L);
    }

    final class Generator implements WatermarkGenerator<Row> {
        private final RelativeClock clock;
        private final long start;
        private long latest = Long.MIN_VALUE;
        private long lastActivity;
        private boolean idle;
        private boolean backlogRead;
        /** How long a partition that has given no record yet waits before it counts as quiet. */
        private final long graceMs;

        Generator(RelativeClock clock) {
            this.clock = clock;
            this.start = clock.relativeTimeMillis();
            this.lastActivity = start;
            this.backlogRead = backlogEnd != null && (readToEnd || heldNothing(backlogEnd));
            this.graceMs = readToEnd ? 0 : startGraceMs;
        }

        @Override
        public void onEvent(Row event, long timestamp, WatermarkOutput output) {
            latest = Math.max(latest, timestamp);
            lastActivity = clock.relativeTimeMillis();
            idle = false;
            if (backlogEnd != null) {
                Long end = backlogEnd.get((Integer) event.getField(1));
                Long offset = (Long) event.getField(2);
                backlogRead = end != null && offset != null && offset == end - 1;
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            if (idle) {
                return;  // until the next record: emitting would mark the partition active again
            }
            long quiet = clock.relativeTimeMillis() - lastActivity;
            if (latest != Long.MIN_VALUE) {
                output.emitWatermark(new Watermark(
                        PartitionTimes.mark(latest, quiet, outOfOrdernessMs, closeAfterMs, originMs, slotMs)));
            }
            if (latest == Long.MIN_VALUE && restoreSeedMs != null && closeAfterMs > 0
                    && quiet >= Math.max(closeAfterMs, graceMs)) {
                output.emitWatermark(new Watermark(slotLastMs(restoreSeedMs)));
            }
            long idleAt = latest == Long.MIN_VALUE ? Math.max(idleAfterMs, graceMs) : idleAfterMs;
            if (backlogRead || (idleAfterMs > 0 && quiet >= idleAt)) {
                output.markIdle();
                idle = true;
            }
        }
    }
}
