package pwevent.flink;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.watermarkstatus.WatermarkStatus;
import org.apache.flink.types.Row;

/**
 * The event time of valid records (docs/streaming.md, "Time"): the watermark after parsing, so that
 * no record the replay rejects moves it. One instance times the events, one the requirements
 * ({@link ValidTimeStreams}); each runs at the parallelism of its source, connected to it by forward
 * channels, so that each subtask sees the partitions its source subtask reads and no record crosses
 * the network or meets a task at parallelism 1.
 *
 * <p>Input 1: Row(user, time_ms, cell, partition, offset, original, path), the two parsers' rows;
 * its watermark is the source's ({@link SlotWatermarks}, over every record). `path` says what a row
 * is: {@link #FAST} a record the SQL fast path accepted; {@link #PENDING} a record the fast path
 * handed to the reference parser (only partition and offset set), sent on the fast path's channel,
 * so in offset order with its events; {@link #SLOW_ACCEPTED} the reference parser's record for such a
 * mark, {@link #SLOW_REJECTED} its refusal (only partition and offset set; the dead letter goes its
 * own way); {@link #REFUSED} a record its only parser refused. Input 2 (broadcast): the
 * requirements' {@link Registrations} rows (how far each requirements partition is read) or, for the
 * events' instance, the requirements' valid time ({@link ValidTimeStreams#timeOf}). Output: Row(user,
 * time_ms, cell, partition, offset, original, ahead), timed at time_ms.
 *
 * <p>A valid record moves time if {@link SlotWatermarks.LeadGuard} believes its time; one it does not
 * believe comes out with {@code ahead} (a {@code too_far_ahead} dead letter). Whether its user is
 * registered does not matter (docs/streaming.md, "Which records move time": with a default
 * requirement every user is; without one, an event of an unregistered user is an {@code unknown_user}
 * dead letter that has moved time as a registered user's event at the same time would, and the
 * replay counts it the same way). Per partition, time follows the offsets across the two parsers
 * ({@link OffsetOrder}); the partitions' marks are {@link PartitionTimes}'. The output watermark is
 * the smallest over the active partitions, never more than the source's (which holds back for
 * partitions without a record yet); with no active partition it is capped at the highest slot end a
 * partition closed (or the restore seed's); once the source is idle too, the requirements' instance
 * goes idle and the events' instance ({@code followsSecond}) follows the requirements' valid time
 * instead, so that no operator below goes idle with the events and comes back after another one.
 * "Quiet" leaves out the time this operator spent blocked handing records on.
 *
 * <p>Checkpointed ({@link ValidTimeState}): the lead guard's partitions (a forged far-ahead record
 * right after a restore is disbelieved as at any time) and how far each input was read
 * ({@link ReadOffsets}), each a union over the subtasks, so a restore at another parallelism keeps
 * them.
 */
public final class ValidTime extends AbstractStreamOperator<Row> implements TwoInputStreamOperator<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    /** Values of input 1's `path`. */
    public static final int FAST = 0;
    public static final int PENDING = 1;
    public static final int SLOW_ACCEPTED = 2;
    public static final int SLOW_REJECTED = 3;
    /** A record its only parser refused, on the in-order channel (the requirements' rows: only
     *  partition and offset set); it moves nothing but the channel's position. */
    public static final int REFUSED = 4;
    public static final RowTypeInfo OUT = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.BOOLEAN},
            new String[] {"user", "time_ms", "cell", "partition", "offset", "original", "ahead"});
    /** Input 1's rows (the two parsers' rows, see above). */
    public static final RowTypeInfo IN = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.INT},
            new String[] {"user", "time_ms", "cell", "partition", "offset", "original", "path"});
    private static final long DEFAULT_INTERVAL_MS = 200;

    private final long outOfOrdernessMs;
    private final long maxLeadMs;
    private final long closeAfterMs;
    private final long idleAfterMs;
    private final long originMs;
    private final long slotMs;
    private final Long restoreSeedMs;
    private final HashMap<Integer, Long> backlogEnds;
    private final boolean followsSecond;
    private final HashMap<Integer, Long> restoredEnds;

    private transient ValidTimeState state;
    /** How far the requirement records have been read, before the checkpoint too. */
    private transient ReadOffsets requirementsRead;
    /** How far input 1's rows have been read, before the checkpoint too. */
    private transient ReadOffsets inputRead;
    /** Rows an earlier release's registration gate held at its checkpoint, judged first. */
    private transient List<Row> heldBefore;
    private transient SlotWatermarks.LeadGuard guard;
    private transient PartitionTimes partitions;
    private transient long upstreamMs;
    private transient boolean upstreamIdle;
    /** Restored, with a reader that had read every partition before the checkpoint (the
     *  requirements' instance: through `backlogEnds`, by input 2; the events': through
     *  `restoredEnds`, by input 1), so a source that gives no watermark holds nothing back. */
    private transient boolean readBeforeRestore;
    /** How long after opening a silent source counts as idle when `readBeforeRestore`. */
    private transient long readBeforeRestoreQuietMs;
    private transient long openedMs;
    private transient long emittedMs;
    private transient long secondMs;
    private transient boolean idle;
    private transient long blockedMs;

    /** `restoredEnds` (a restored events instance; partition -> one past its last record when the
     *  job was built): if the restored state had read every partition through it, a silent source
     *  closes the restore seed's slot after `closeAfterMs`, as a source whose consumer group had
     *  committed its ends does, whatever the group committed. */
    public ValidTime(long outOfOrdernessMs, long maxLeadMs, long closeAfterMs, long idleAfterMs, long originMs,
                     long slotMs, Number restoreSeedMs, Map<?, ?> backlogEnds, boolean followsSecond,
                     Map<?, ?> restoredEnds) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.maxLeadMs = maxLeadMs;
        this.closeAfterMs = closeAfterMs;
        this.idleAfterMs = idleAfterMs;
        this.originMs = originMs;
        this.slotMs = slotMs;
        this.restoreSeedMs = restoreSeedMs == null ? null : restoreSeedMs.longValue();
        this.backlogEnds = backlogEnds == null ? null : SlotWatermarks.offsets(backlogEnds);
        this.followsSecond = followsSecond;
        this.restoredEnds = restoredEnds == null ? null : SlotWatermarks.offsets(restoredEnds);
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        state = new ValidTimeState(context.getOperatorStateStore());
        guard = state.guard(maxLeadMs);
        requirementsRead = state.requirementsRead();
        inputRead = state.inputRead();
        heldBefore = state.heldBefore();
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        state.snapshot(heldBefore, guard, requirementsRead, inputRead);
    }

    @Override
    public void open() throws Exception {
        super.open();
        partitions = new PartitionTimes(outOfOrdernessMs, closeAfterMs, idleAfterMs, originMs, slotMs, restoreSeedMs,
                backlogEnds);
        upstreamMs = Long.MIN_VALUE;
        emittedMs = Long.MIN_VALUE;
        secondMs = Long.MIN_VALUE;
        long interval = getExecutionConfig().getAutoWatermarkInterval();
        interval = interval > 0 ? interval : DEFAULT_INTERVAL_MS;
        long start = getProcessingTimeService().getCurrentProcessingTime();
        boolean requirementsReadThrough = requirementsRead.readThroughAll(backlogEnds);
        readBeforeRestore = requirementsReadThrough || inputRead.readThroughAll(restoredEnds);
        readBeforeRestoreQuietMs = requirementsReadThrough ? 0 : closeAfterMs;
        openedMs = start;
        getProcessingTimeService().scheduleWithFixedDelay(time -> advance(), interval, interval);
    }

    private long now() {
        return getProcessingTimeService().getCurrentProcessingTime() - blockedMs;
    }

    @Override
    public void processElement1(StreamRecord<Row> record) throws Exception {
        judgeHeldBefore();
        inputRead.read((Integer) record.getValue().getField(3), (Long) record.getValue().getField(4));
        judge(record.getValue());
    }

    /** The rows an earlier release's gate held at the restored checkpoint, in their order. */
    private void judgeHeldBefore() throws Exception {
        if (heldBefore.isEmpty()) {
            return;
        }
        List<Row> rows = heldBefore;
        heldBefore = List.of();
        LOG.info("valid event time: judging the {} events an earlier release held at its checkpoint", rows.size());
        for (Row row : rows) {
            judge(row);
        }
    }

    /** An input-1 row, in its partition's offset order. */
    private void judge(Row row) throws Exception {
        int path = (Integer) row.getField(6);
        int partition = (Integer) row.getField(3);
        long offset = (Long) row.getField(4);
        OffsetOrder order = partitions.of(partition);
        if (path == PENDING) {
            order.pending(offset);
            return;
        }
        if (path == REFUSED) {
            order.fast(offset, null, now());
            return;
        }
        if (path == SLOW_REJECTED) {
            order.resolved(offset, null, now());
            return;
        }
        long time = (Long) row.getField(1);
        boolean ahead = !guard.believe(partition, time, System.currentTimeMillis());
        Long moves = ahead ? null : time;
        if (path == SLOW_ACCEPTED) {
            order.resolved(offset, moves, now());
        } else {
            order.fast(offset, moves, now());
        }
        Row out = Row.of(row.getField(0), time, row.getField(2), partition, offset, row.getField(5), ahead);
        long began = System.nanoTime();
        output.collect(new StreamRecord<>(out, time));
        blockedMs += (System.nanoTime() - began) / 1_000_000;
    }

    /** How far the requirements are read (the requirements' instance), or their valid time (the
     *  events' instance, which follows it while its own partitions are idle). */
    @Override
    public void processElement2(StreamRecord<Row> record) throws Exception {
        Row row = record.getValue();
        Long requirementsMs = Registrations.requirementsMs(row);
        if (requirementsMs != null) {  // ValidTimeStreams.timeOf
            if (followsSecond) {
                secondMs = Math.max(secondMs, requirementsMs);
                advance();
            }
            return;
        }
        requirementsRead.read(Registrations.partition(row), Registrations.offset(row));
    }

    @Override
    public void processWatermark1(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE) {  // the end of a bounded input
            judgeHeldBefore();
            emit(Long.MAX_VALUE);
            return;
        }
        upstreamMs = Math.max(upstreamMs, mark.getTimestamp());
        advance();
    }

    @Override
    public void processWatermark2(Watermark mark) {
        // input 2's own watermark is that of every requirement record, valid or not: never read
    }

    @Override
    protected void processWatermarkStatus(WatermarkStatus status, int index) throws Exception {
        if (index == 0) {
            upstreamIdle = status.isIdle();
            advance();
        }
    }

    private void advance() throws Exception {
        judgeHeldBefore();
        // a source whose partitions a restored reader had read through gives no watermark until its
        // start grace has passed: until it gives one, it is as good as idle
        boolean quietUpstream = upstreamIdle || (readBeforeRestore && upstreamMs == Long.MIN_VALUE
                && getProcessingTimeService().getCurrentProcessingTime() - openedMs >= readBeforeRestoreQuietMs);
        PartitionTimes.Marks marks = partitions.marks(now());
        if (marks.active()) {
            emit(quietUpstream ? marks.lowest() : Math.min(upstreamMs, marks.lowest()));
        } else if (quietUpstream) {
            if (followsSecond) {
                emit(Math.max(marks.cap(), secondMs));
            } else if (!idle && emittedMs != Long.MAX_VALUE) {
                output.emitWatermarkStatus(WatermarkStatus.IDLE);
                idle = true;
            }
        } else if (marks.cap() != Long.MIN_VALUE) {
            emit(Math.min(upstreamMs, marks.cap()));
        }
    }

    private void emit(long mark) {
        if (idle) {
            output.emitWatermarkStatus(WatermarkStatus.ACTIVE);
            idle = false;
        }
        if (mark > emittedMs) {
            emittedMs = mark;
            output.emitWatermark(new Watermark(mark));
        }
    }
}
