package pwevent.flink;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
 * The events' event time, from valid events only (docs/streaming.md, "Time"): the watermark after
 * parsing, so that no record the replay rejects moves it. The requirements' time is kept by a
 * second instance, in the same way, with every user known ({@link ValidTimeStreams#apply}).
 *
 * <p>Input 1: Row(user, time_ms, cell, partition, offset, original, path), one stream of the two
 * parsers' rows; its watermark is the source's ({@link SlotWatermarks}, over every record). `path`
 * says what a row is: {@link #FAST} an event the SQL fast path accepted; {@link #PENDING} a record
 * the fast path handed to the reference parser (only partition and offset set), sent on the fast
 * path's channel, so in offset order with its events; {@link #SLOW_ACCEPTED} the reference parser's
 * event for such a record, {@link #SLOW_REJECTED} its refusal (only partition and offset set; the
 * dead letter goes its own way). Input 2: one row per requirement record, with its partition and
 * offset and the user it registers, if any, and the requirements' valid time ({@link Registrations}).
 * The events' instance is keyed, both inputs by the one key {@link #KEY}, so that its registered
 * users are keyed state ({@link RegisteredUsers}). Output: Row(user, time_ms, cell, partition,
 * offset, original, ahead), timed at time_ms.
 *
 * <p>An event moves time only if its user is known at its slot ({@link SlotRules#knownAt}: a
 * registration of that slot or an earlier one was read before the event and before its slot closed
 * on this input's own watermark; with a default requirement every user is) and
 * {@link SlotWatermarks.LeadGuard}, which sees only such events, believes its time; one it does not
 * believe comes out with {@code ahead} (a {@code too_far_ahead} dead letter). An event of a user not
 * known yet is checked too, without changing the guard, and moves time in its place in offset order
 * if its user registers before its slot closes ({@link Unregistered}). Per partition, time follows
 * the offsets across the two parsers ({@link OffsetOrder}); the partitions' marks are
 * {@link PartitionTimes}'. The output watermark is the smallest over the active partitions, never
 * more than the source's (which holds back for partitions without a record yet); with no active
 * partition it is capped at the highest slot end a partition closed (or the restore seed's); once
 * the source is idle too, the requirements' instance goes idle and the events' instance
 * ({@code followsSecond}, parallelism 1) follows the requirements' valid time instead
 * ({@link ValidTimeStreams#timeOf}), so that no operator below goes idle with the events and comes
 * back after another one. "Quiet" leaves out the time this operator spent blocked handing records on.
 *
 * <p>With `registrationBacklog` (the requirements partitions whose backlog a start reads, without a
 * default requirement), no event is judged before that backlog is registered ({@link RegistrationGate}):
 * the rows read meanwhile are held and judged in their order once it is. What a restore needs is
 * checkpointed ({@link ValidTimeState}): the held rows, the lead guard's partitions (a forged
 * far-ahead record right after a restore is disbelieved as at any time), the events passed before
 * their user registered, and how far each input was read ({@link ReadOffsets}).
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
    /** The events' instance's one key ({@link ValidTimeStreams#applyToEvents}). */
    public static final Integer KEY = 0;
    /** The most input-1 rows the gate holds (operator state, on the heap whatever the state backend):
     *  at about 200 bytes plus the record each, a few hundred MB. */
    static final int MAX_HELD = 1_000_000;
    private static final long DEFAULT_INTERVAL_MS = 200;

    private final long outOfOrdernessMs;
    private final long maxLeadMs;
    private final long closeAfterMs;
    private final long idleAfterMs;
    private final long originMs;
    private final long slotMs;
    private final boolean everyoneKnown;
    private final Long restoreSeedMs;
    private final HashMap<Integer, Long> backlogEnds;
    private final boolean followsSecond;
    private final HashMap<Integer, Long> registrationBacklog;
    private final long gateSilenceMs;
    private final HashMap<Integer, Long> restoredEnds;

    /** The events' instance's registered users (the requirements' instance knows everyone). */
    private transient RegisteredUsers registered;
    private transient ValidTimeState state;
    /** How far the requirement records have been read, before the checkpoint too. */
    private transient ReadOffsets requirementsRead;
    /** How far input 1's rows have been read, before the checkpoint too. */
    private transient ReadOffsets inputRead;
    /** Holds input 1 until the requirements' backlog is registered; null once it is open. */
    private transient RegistrationGate gate;
    private transient SlotWatermarks.LeadGuard guard;
    private transient PartitionTimes partitions;
    private transient Unregistered unregistered;
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
    /** The highest watermark emitted from this input's own partitions (not the followed time). */
    private transient long ownMs;
    private transient long secondMs;
    private transient boolean idle;
    private transient long blockedMs;

    /** `registrationBacklog` (partition -> one past its backlog's last record; null: judge at once)
     *  and `gateSilenceMs` (the gate's silence valve): {@link RegistrationGate}. `restoredEnds` (a
     *  restored events instance; partition -> one past its last record when the job was built): if
     *  the restored state had read every partition through it, a silent source closes the restore
     *  seed's slot after `closeAfterMs`, as a source whose consumer group had committed its ends
     *  does, whatever the group committed. */
    public ValidTime(long outOfOrdernessMs, long maxLeadMs, long closeAfterMs, long idleAfterMs, long originMs,
                     long slotMs, boolean everyoneKnown, Number restoreSeedMs, Map<?, ?> backlogEnds,
                     boolean followsSecond, Map<?, ?> registrationBacklog, long gateSilenceMs,
                     Map<?, ?> restoredEnds) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.maxLeadMs = maxLeadMs;
        this.closeAfterMs = closeAfterMs;
        this.idleAfterMs = idleAfterMs;
        this.originMs = originMs;
        this.slotMs = slotMs;
        this.everyoneKnown = everyoneKnown;
        this.restoreSeedMs = restoreSeedMs == null ? null : restoreSeedMs.longValue();
        this.backlogEnds = backlogEnds == null ? null : SlotWatermarks.offsets(backlogEnds);
        this.followsSecond = followsSecond;
        this.registrationBacklog = registrationBacklog == null ? null : SlotWatermarks.offsets(registrationBacklog);
        this.gateSilenceMs = gateSilenceMs;
        this.restoredEnds = restoredEnds == null ? null : SlotWatermarks.offsets(restoredEnds);
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        if (getKeyedStateBackend() == null && !everyoneKnown) {
            throw new IllegalStateException("the events' ValidTime keeps its registered users in keyed state: "
                    + "build it with ValidTimeStreams.applyToEvents");
        }
        registered = RegisteredUsers.restore(context, getKeyedStateBackend() != null, () -> setCurrentKey(KEY));
        state = new ValidTimeState(context.getOperatorStateStore());
        guard = state.guard(maxLeadMs);
        unregistered = state.unregistered();
        requirementsRead = state.requirementsRead();
        inputRead = state.inputRead();
        Set<Integer> unread = new HashSet<>();
        if (registrationBacklog != null && !everyoneKnown) {
            registrationBacklog.forEach((partition, end) -> {
                if (!requirementsRead.readThrough(partition, end)) {
                    unread.add(partition);
                }
            });
        }
        gate = new RegistrationGate(unread, gateSilenceMs, MAX_HELD, getProcessingTimeService().getCurrentProcessingTime(),
                state.held());
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        state.snapshot(gate == null ? null : gate.held(), guard, unregistered, requirementsRead, inputRead);
    }

    @Override
    public void open() throws Exception {
        super.open();
        partitions = new PartitionTimes(outOfOrdernessMs, closeAfterMs, idleAfterMs, originMs, slotMs, restoreSeedMs,
                backlogEnds);
        upstreamMs = Long.MIN_VALUE;
        emittedMs = Long.MIN_VALUE;
        ownMs = Long.MIN_VALUE;
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

    /** Whether the gate holds input 1 back; once it opens, the rows it held are judged in their order. */
    private boolean gated() throws Exception {
        if (gate == null) {
            return false;
        }
        RegistrationGate.Opened opened = gate.opened(getProcessingTimeService().getCurrentProcessingTime());
        if (opened == RegistrationGate.Opened.NOT_YET) {
            return true;
        }
        if (opened != RegistrationGate.Opened.BACKLOG_REGISTERED) {
            LOG.warn("valid event time: {} before the end of the requirements' backlog on partitions {}; "
                    + "judging the {} events held so far, and the next ones as they come",
                    opened == RegistrationGate.Opened.SILENCE ? "no registration for " + gateSilenceMs + " ms"
                            : "the most events it holds read", gate.waitingFor(), gate.held().size());
        } else {
            LOG.info("valid event time: the requirements' backlog is registered; judging the {} events held",
                    gate.held().size());
        }
        openGate();
        return false;
    }

    private void openGate() throws Exception {
        List<Row> rows = gate.held();
        gate = null;
        for (Row row : rows) {
            judge(row);
        }
    }

    private long now() {
        return getProcessingTimeService().getCurrentProcessingTime() - blockedMs;
    }

    @Override
    public void processElement1(StreamRecord<Row> record) throws Exception {
        inputRead.read((Integer) record.getValue().getField(3), (Long) record.getValue().getField(4));
        if (gated()) {
            gate.hold(record.getValue());
            return;
        }
        judge(record.getValue());
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
        String user = (String) row.getField(0);
        long time = (Long) row.getField(1);
        boolean known = known(user, time);
        long wall = System.currentTimeMillis();
        boolean ahead = !(known ? guard.believe(partition, time, wall) : guard.plausible(partition, time, wall));
        Long moves = known && !ahead ? time : null;
        if (!known && !ahead) {
            unregistered.add(user, SlotRules.slotOf(originMs, slotMs, time), partition, offset, time);
        }
        if (path == SLOW_ACCEPTED) {
            order.resolved(offset, moves, now());
        } else {
            order.fast(offset, moves, now());
        }
        Row out = Row.of(user, time, row.getField(2), partition, offset, row.getField(5), ahead);
        long began = System.nanoTime();
        output.collect(new StreamRecord<>(out, time));
        blockedMs += (System.nanoTime() - began) / 1_000_000;
    }

    private boolean known(String user, long time) throws Exception {
        if (everyoneKnown) {
            return true;
        }
        return SlotRules.knownAt(registered.since(user), time, originMs, slotMs);
    }

    /** A registration counts unless its slot has closed (Membership would refuse it as late). */
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
        long now = getProcessingTimeService().getCurrentProcessingTime();
        int read = Registrations.partition(row);
        long offset = Registrations.offset(row);
        requirementsRead.read(read, offset);
        if (gate != null && registrationBacklog != null && registrationBacklog.containsKey(read)) {
            if (ReadOffsets.through(offset, registrationBacklog.get(read))) {
                gate.backlogRead(read, now);
                advance();
            } else {
                gate.registration(now);  // the backlog is being read
            }
        }
        String user = Registrations.user(row);
        if (user == null || everyoneKnown) {
            return;
        }
        long slot = Registrations.slot(row);
        if (SlotRules.closed(slot, ownMs, originMs, slotMs)) {
            return;
        }
        registered.register(user, slot);
        long wall = System.currentTimeMillis();
        boolean credited = false;
        for (long[] event : unregistered.claim(user, slot)) {
            int partition = (int) event[0];
            if (guard.believe(partition, event[2], wall)) {
                partitions.of(partition).credit(event[1], event[2], now());
                credited = true;
            }
        }
        if (credited) {
            advance();
        }
    }

    @Override
    public void processWatermark1(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE) {  // the end of a bounded input
            if (gate != null) {
                openGate();
            }
            emitOwn(Long.MAX_VALUE);
            return;
        }
        upstreamMs = Math.max(upstreamMs, mark.getTimestamp());
        advance();
    }

    @Override
    public void processWatermark2(Watermark mark) {
        // the registrations' own watermark is that of every requirement record, valid or not: never read
    }

    @Override
    protected void processWatermarkStatus(WatermarkStatus status, int index) throws Exception {
        if (index == 0) {
            upstreamIdle = status.isIdle();
            advance();
        }
    }

    private void advance() throws Exception {
        if (gated()) {
            return;
        }
        // a source whose partitions a restored reader had read through gives no watermark until its
        // start grace has passed: until it gives one, it is as good as idle
        boolean quietUpstream = upstreamIdle || (readBeforeRestore && upstreamMs == Long.MIN_VALUE
                && getProcessingTimeService().getCurrentProcessingTime() - openedMs >= readBeforeRestoreQuietMs);
        PartitionTimes.Marks marks = partitions.marks(now());
        if (marks.active()) {
            emitOwn(quietUpstream ? marks.lowest() : Math.min(upstreamMs, marks.lowest()));
        } else if (quietUpstream) {
            if (followsSecond) {
                emitOwn(marks.cap());
                emit(secondMs);
            } else if (!idle && emittedMs != Long.MAX_VALUE) {
                output.emitWatermarkStatus(WatermarkStatus.IDLE);
                idle = true;
            }
        } else if (marks.cap() != Long.MIN_VALUE) {
            emitOwn(Math.min(upstreamMs, marks.cap()));
        }
    }

    /** A watermark from this input's own partitions. */
    private void emitOwn(long mark) {
        if (mark > ownMs) {
            ownMs = mark;
            unregistered.closeThrough(SlotRules.closedBy(originMs, slotMs, mark));
        }
        emit(mark);
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
