package pwevent.flink.time;

import java.util.List;
import pwevent.flink.contract.ParsedRow;
import pwevent.flink.contract.TimePaths;
import pwevent.flink.contract.TimedRow;
import org.apache.flink.api.common.functions.Partitioner;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.watermarkstatus.WatermarkStatus;
import org.apache.flink.types.Row;

/**
 * The event time of valid records and the public release schedule (docs/streaming.md, "Time"): the
 * watermark after parsing, so that no record the replay rejects moves it. One instance times the
 * events, one the requirements. Each runs at the job's parallelism, its rows routed by Kafka
 * partition ({@link #apply}: partition p to subtask p mod n, {@link PartitionTimes#owns}), so each
 * subtask knows which partitions it times and no record meets a task at parallelism 1.
 *
 * <p>Input: {@link ParsedRow}, the two parsers' rows. `path` ({@link TimePaths}) says what a row
 * is: {@link TimePaths#FAST} a record the SQL fast path accepted; {@link TimePaths#PENDING} a record
 * the fast path handed to the reference parser (only partition and offset set), sent on the fast
 * path's channel, so in offset order with its records; {@link TimePaths#SLOW_ACCEPTED} the reference
 * parser's record for such a mark, {@link TimePaths#SLOW_REJECTED} its refusal (only partition and
 * offset set; the dead letter goes its own way); {@link TimePaths#REFUSED} a record its only parser
 * refused (the requirements' rows: only partition and offset set; it moves nothing but the channel's
 * position). Output: {@link TimedRow}, timed at time_ms.
 *
 * <p>A valid record moves time if the {@link LeadGuard} believes its time; one it does not believe
 * comes out with {@code ahead} (a {@code too_far_ahead} dead letter). A valid record from before the
 * origin (only requirement records, in force from slot 1: jobs/common/slots.py, {@code in_force_from})
 * moves no time and teaches the guard nothing: its time is in no slot, as an invalid record's.
 * Whether an event's user is registered does not matter (docs/streaming.md, "Which records move
 * time"). Per partition, time
 * follows the offsets across the two parsers ({@link OffsetOrder}). The watermark is
 * {@link PartitionTimes}': event time over a partition's backlog (what it held when this subtask
 * last (re)started, {@link PartitionEnds}: a failover's restored subtask reads what was written
 * while it was down as a backlog too); once it is read through, the later of event time and the
 * clock less {@code liveLagMs} (the events: `flink.release_delay`; the requirements: minus
 * `flink.max_lead`, so that a read requirements topic holds nothing back). The
 * upstream's watermarks and idle statuses are not read (the sources give none but the end of a
 * bounded input, which is passed on); this operator never goes idle.
 *
 * <p>Checkpointed ({@link ValidTimeState}): the lead guard's partitions (a forged far-ahead record
 * right after a restore is disbelieved as at any time) and how far each partition was read
 * ({@link ReadOffsets}: a restored job's partitions its reader had read through are live at once),
 * each a union over the subtasks, so a restore at another parallelism keeps them.
 */
public final class ValidTime extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The output's rows: {@link TimedRow}. */
    public static final RowTypeInfo OUT = TimedRow.TYPE;
    /** The input's rows (the two parsers' rows, see above): {@link ParsedRow}. */
    public static final RowTypeInfo IN = ParsedRow.TYPE;
    private static final long DEFAULT_INTERVAL_MS = 200;

    private final long outOfOrdernessMs;
    private final long maxLeadMs;
    private final long liveLagMs;
    private final long originMs;
    private final PartitionEnds ends;

    private transient ValidTimeState state;
    /** How far the input's rows have been read, before the checkpoint too. */
    private transient ReadOffsets inputRead;
    /** Rows an earlier release's registration gate held at its checkpoint, judged first. */
    private transient List<Row> heldBefore;
    private transient LeadGuard guard;
    private transient PartitionTimes partitions;
    private transient long emittedMs;
    private transient boolean restored;

    /** `liveLagMs`: how far behind the clock a read-through partition's time is at most (see above);
     *  `originMs`: where slot 1 starts; `ends`: where the topic's partitions end, asked at every
     *  (re)start of a subtask. */
    public ValidTime(long outOfOrdernessMs, long maxLeadMs, long liveLagMs, long originMs, PartitionEnds ends) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.maxLeadMs = maxLeadMs;
        this.liveLagMs = liveLagMs;
        this.originMs = originMs;
        this.ends = ends;
    }

    /** `rows` timed by `operator`, each partition's rows routed to the subtask that owns it. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> rows, ValidTime operator, String name) {
        return rows.partitionCustom(new ByOwner(), new KafkaPartition()).transform(name, OUT, operator);
    }

    /** {@link PartitionTimes#owns} as Flink's partitioner. */
    static final class ByOwner implements Partitioner<Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public int partition(Integer partition, int subtasks) {
            return PartitionTimes.owns(partition, subtasks);
        }
    }

    /** A row's Kafka partition. */
    static final class KafkaPartition implements KeySelector<Row, Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public Integer getKey(Row row) {
            return (Integer) row.getField(ParsedRow.PARTITION);
        }
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        state = new ValidTimeState(context.getOperatorStateStore());
        guard = state.guard(maxLeadMs);
        inputRead = state.inputRead();
        heldBefore = state.heldBefore();
        restored = context.isRestored();
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        state.snapshot(heldBefore, guard, inputRead);
    }

    @Override
    public void open() throws Exception {
        super.open();
        partitions = new PartitionTimes(outOfOrdernessMs, liveLagMs, inputRead,
                ends.owned(getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                        getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks(), restored));
        emittedMs = Long.MIN_VALUE;
        long interval = getExecutionConfig().getAutoWatermarkInterval();
        interval = interval > 0 ? interval : DEFAULT_INTERVAL_MS;
        getProcessingTimeService().scheduleWithFixedDelay(time -> advance(), 0, interval);
    }

    @Override
    public void processElement(StreamRecord<Row> record) throws Exception {
        judgeHeldBefore();
        inputRead.read((Integer) record.getValue().getField(ParsedRow.PARTITION),
                (Long) record.getValue().getField(ParsedRow.OFFSET));
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

    /** An input row, in its partition's offset order. */
    private void judge(Row row) {
        int path = (Integer) row.getField(ParsedRow.PATH);
        int partition = (Integer) row.getField(ParsedRow.PARTITION);
        long offset = (Long) row.getField(ParsedRow.OFFSET);
        OffsetOrder order = partitions.of(partition);
        if (path == TimePaths.PENDING) {
            order.pending(offset);
            return;
        }
        if (path == TimePaths.REFUSED) {
            order.fast(offset, null);
            return;
        }
        if (path == TimePaths.SLOW_REJECTED) {
            order.resolved(offset, null);
            return;
        }
        long time = (Long) row.getField(ParsedRow.TIME_MS);
        boolean early = time < originMs;  // a requirement from before the origin: in no slot's time
        boolean ahead = !early && !guard.believe(partition, time, System.currentTimeMillis());
        Long moves = ahead || early ? null : time;
        if (path == TimePaths.SLOW_ACCEPTED) {
            order.resolved(offset, moves);
        } else {
            order.fast(offset, moves);
        }
        Row out = new Row(TimedRow.ARITY);
        out.setField(TimedRow.USER, row.getField(ParsedRow.USER));
        out.setField(TimedRow.TIME_MS, time);
        out.setField(TimedRow.CELL, row.getField(ParsedRow.CELL));
        out.setField(TimedRow.PARTITION, partition);
        out.setField(TimedRow.OFFSET, offset);
        out.setField(TimedRow.ORIGINAL, row.getField(ParsedRow.ORIGINAL));
        out.setField(TimedRow.AHEAD, ahead);
        output.collect(new StreamRecord<>(out, time));
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE) {  // the end of a bounded input
            judgeHeldBefore();
            emit(Long.MAX_VALUE);
        }
    }

    @Override
    public void processWatermarkStatus(WatermarkStatus status) {
        // the sources give no watermark, so no idleness either: this operator's watermark is its own
    }

    private void advance() throws Exception {
        judgeHeldBefore();
        emit(partitions.watermark(getProcessingTimeService().getCurrentProcessingTime()));
    }

    private void emit(long mark) {
        if (mark > emittedMs) {
            emittedMs = mark;
            output.emitWatermark(new Watermark(mark));
        }
    }
}
