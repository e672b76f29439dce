package pwevent.flink;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
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
 * parsing, so that no record the replay rejects moves it.
 *
 * <p>Input 1: Row(user, time_ms, cell, partition, offset, original, path), one stream of the two
 * parsers' rows; its watermark is the source's ({@link SlotWatermarks}, over every record). `path`
 * says what a row is: {@link #FAST} an event the SQL fast path accepted; {@link #PENDING} a record
 * the fast path handed to the reference parser (only partition and offset set), sent on the fast
 * path's channel, so in offset order with its events; {@link #SLOW_ACCEPTED} the reference parser's
 * event for such a record, {@link #SLOW_REJECTED} its refusal (only partition and offset set; the
 * dead letter goes its own way). Accepted events are timed at or after the origin. Input 2:
 * one row per requirement record, with its partition and offset, and its user and slot if its
 * requirement registers its user when it is the user's first (jobs/common/requirement_rules.py,
 * {@code RequirementRules.registers}; {@link #registration}, {@link #read}), the registrations and how
 * far the requirements' reader has got both kept in checkpointed state; and the requirements' valid
 * time ({@link #requirementsTime}). The events' instance is keyed, both inputs by the one key
 * {@link #KEY} ({@link ValidTimeStreams#applyToEvents}), so that its registered users are keyed state: with RocksDB
 * a checkpoint writes only the users registered since the one before, not all of them (a million
 * registered users are about 16 MB). State of a release that kept them as broadcast state is
 * moved into the keyed state on a restore. Output: Row(user, time_ms, cell, partition, offset, original,
 * ahead), timed at time_ms.
 *
 * <p>With `registrationBacklog` (the requirements partitions whose backlog a start reads, without
 * a default requirement), the events' instance judges no event before that backlog is registered
 * ({@link RegistrationGate}): the rows read meanwhile are held, in checkpointed state, and judged
 * in their order once it is. A partition's backlog is registered once a record at or past its last
 * offset has come, now or before the checkpoint a restore resumes from ({@link ReadOffsets}). The
 * lead guard's partitions are checkpointed too: after a restore, a
 * partition's first event is judged against the partition's latest time before it, as if the job
 * had not stopped (a forged far-ahead record right after a restore is disbelieved as at any time).
 *
 * <p>An event moves time only if its user is known at its slot (a registration of that slot or an
 * earlier one was read before the event and before its slot closed; with a default requirement
 * every user is) and {@link SlotWatermarks.LeadGuard}, which sees only such events, believes its
 * time; an event the guard does not believe comes out with {@code ahead} (a {@code too_far_ahead}
 * dead letter). An event of a user not known (yet) is checked too, without changing the guard:
 * its user may register later, before its slot closes (then it counts, and moves time from then on,
 * in its place in offset order: {@link Unregistered}). Per partition, over the events that moved time: the
 * watermark trails the latest time by the out-of-orderness bound, a partition quiet for closeAfter
 * closes the slot of its latest time, and one quiet for idleAfter stops holding the others back.
 * Within a partition, time follows the offsets, although the reference parser's results come after
 * later fast-path events: while a record's result is pending, its partition's time is that of the
 * records before it ({@link OffsetOrder}; also while a result has come before the fast path's
 * channel reached its record), the partition counts as active and is never quiet, so an event of
 * either path is judged late only against the events before it in its partition.
 * The output watermark is the smallest over the active partitions, and never more than the
 * source's (which holds back for partitions that have not given a record yet, and whose quiet
 * periods pause under back-pressure); with no active partition it is capped at the highest slot
 * end a partition closed (or, before the first event, the restore seed's slot end); once the source
 * is idle too, the requirements' instance goes idle, and the events' instance ({@code followsSecond},
 * run at parallelism 1, input 2 unioned with {@link ValidTimeStreams#timeOf} the requirements' timed rows)
 * follows the requirements' valid time instead, so that no operator below goes idle with the events and
 * comes back after another one (docs/streaming.md, "Time"). "Quiet" leaves out the time this
 * operator spent blocked handing records on. A registration counts unless its slot closed on the
 * watermark of this input's own partitions.
 *
 * <p>The requirements' time is kept by a second instance, in the same way
 * ({@link ValidTimeStreams#apply}).
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
    /** The fields of input 2's rows: `partition` and `offset` of a requirement record, with `user`
     *  and `slot` if it registers; or `requirements_ms` alone (jobs/streaming/rows.py, `REGISTRATIONS`). */
    private static final int USER = 0;
    private static final int SLOT = 1;
    private static final int REQUIREMENTS_MS = 2;
    private static final int PARTITION = 3;
    private static final int OFFSET = 4;
    /** The events' instance's one key ({@link ValidTimeStreams#applyToEvents}). */
    public static final Integer KEY = 0;
    /** User -> the slot it is registered from (keyed state of the events' instance). */
    private static final MapStateDescriptor<String, Long> REGISTERED =
            new MapStateDescriptor<>("registered users", Types.STRING, Types.LONG);
    /** Where earlier releases kept the registered users: broadcast state, written whole at every
     *  checkpoint; moved into {@link #REGISTERED} on a restore. */
    private static final MapStateDescriptor<String, Long> REGISTERED_BROADCAST =
            new MapStateDescriptor<>("registered", Types.STRING, Types.LONG);
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

    /** The events' instance's registered users; null in the requirements' instance (everyone known). */
    private transient MapState<String, Long> registered;
    private transient ValidTimeState state;
    /** How far the requirement records have been read, before the checkpoint too. */
    private transient ReadOffsets requirementsRead;
    /** How far input 1's rows have been read, before the checkpoint too. */
    private transient ReadOffsets inputRead;
    /** The input-1 rows read while the gate is closed, in their order; null once it is open. */
    private transient List<Row> held;
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

    /** Input 2: the requirement record at `offset` of requirements partition `partition` registers
     *  `user` from `slot` on. */
    public static Row registration(String user, long slot, int partition, long offset) {
        return Row.of(user, slot, null, partition, offset);
    }

    /** Input 2: the requirement record at `offset` of requirements partition `partition`, which
     *  registers nobody. */
    public static Row read(int partition, long offset) {
        return Row.of(null, null, null, partition, offset);
    }

    /** Input 2: the requirements' valid time is `ms` ({@link ValidTimeStreams#timeOf}). */
    public static Row requirementsTime(long ms) {
        return Row.of(null, null, ms, null, null);
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        if (getKeyedStateBackend() != null) {
            registered = context.getKeyedStateStore().getMapState(REGISTERED);
        } else if (!everyoneKnown) {
            throw new IllegalStateException("the events' ValidTime keeps its registered users in keyed state: "
                    + "build it with ValidTimeStreams.applyToEvents");
        }
        if (context.getOperatorStateStore().getRegisteredBroadcastStateNames().contains(REGISTERED_BROADCAST.getName())) {
            moveRegistered(context.getOperatorStateStore().getBroadcastState(REGISTERED_BROADCAST));
        }
        state = new ValidTimeState(context.getOperatorStateStore());
        held = state.held();
        guard = state.guard(maxLeadMs);
        unregistered = state.unregistered();
        requirementsRead = state.requirementsRead();
        inputRead = state.inputRead();
    }

    /** The registered users of an earlier release's broadcast state, into the keyed state (the
     *  earliest slot of a user wins, as for a registration); `before` is left empty. */
    private void moveRegistered(BroadcastState<String, Long> before) throws Exception {
        int moved = 0;
        if (registered != null) {
            for (Map.Entry<String, Long> entry : before.entries()) {
                register(entry.getKey(), entry.getValue());
                moved++;
            }
        }
        before.clear();
        if (moved > 0) {
            LOG.info("valid event time: moved {} registered users from an earlier release's broadcast state "
                    + "into keyed state", moved);
        }
    }

    /** `user` registered from `slot`, unless it already is from an earlier one. */
    private void register(String user, long slot) throws Exception {
        setCurrentKey(KEY);
        Long since = registered.get(user);
        if (since == null || slot < since) {
            registered.put(user, slot);
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        state.snapshot(held, guard, unregistered, requirementsRead, inputRead);
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
        Set<Integer> unread = new HashSet<>();
        if (registrationBacklog != null && !everyoneKnown) {
            registrationBacklog.forEach((partition, end) -> {
                if (!requirementsRead.readThrough(partition, end)) {
                    unread.add(partition);
                }
            });
        }
        if (!unread.isEmpty()) {
            gate = new RegistrationGate(unread, gateSilenceMs, MAX_HELD, start);
        }
        getProcessingTimeService().scheduleWithFixedDelay(time -> advance(), interval, interval);
    }

    /** Whether the gate holds input 1 back; opening it judges the rows it held, in their order. */
    private boolean gated() throws Exception {
        if (held == null) {
            return false;
        }
        if (gate != null) {
            RegistrationGate.Opened opened = gate.opened(getProcessingTimeService().getCurrentProcessingTime(),
                    held.size());
            if (opened == RegistrationGate.Opened.NOT_YET) {
                return true;
            }
            if (opened != RegistrationGate.Opened.BACKLOG_REGISTERED) {
                LOG.warn("valid event time: {} before the end of the requirements' backlog on partitions {}; "
                        + "judging the {} events held so far, and the next ones as they come",
                        opened == RegistrationGate.Opened.SILENCE ? "no registration for " + gateSilenceMs + " ms"
                                : "the most events it holds read", gate.waitingFor(), held.size());
            }
            gate = null;
        }
        List<Row> rows = held;
        held = null;
        for (Row row : rows) {
            judge(row);
        }
        return false;
    }

    /** Whether a user registered from slot `since` (null: never) is known at the slot of `time`:
     *  the replay's rule (jobs/offline/replay.py, `_last_known_slot`), tested against it. */
    public static boolean knownAt(Long since, long time, long originMs, long slotMs) {
        return since != null && since <= SlotWatermarks.slotOf(originMs, slotMs, time);
    }

    /** Whether a registration of `slot` comes after its slot closed at `watermarkMs`: Membership's
     *  rule for a late requirement record (jobs/common/membership.py, `UserMembership.receive`). */
    public static boolean closed(long slot, long watermarkMs, long originMs, long slotMs) {
        return originMs + slot * slotMs - 1 <= watermarkMs;
    }

    private long now() {
        return getProcessingTimeService().getCurrentProcessingTime() - blockedMs;
    }

    @Override
    public void processElement1(StreamRecord<Row> record) throws Exception {
        inputRead.read((Integer) record.getValue().getField(3), (Long) record.getValue().getField(4));
        if (gated()) {
            Row row = record.getValue();
            Row copy = new Row(row.getArity());
            for (int i = 0; i < row.getArity(); i++) {
                copy.setField(i, row.getField(i));
            }
            held.add(copy);
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
            unregistered.add(user, SlotWatermarks.slotOf(originMs, slotMs, time), partition, offset, time);
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
        setCurrentKey(KEY);  // also when the gate opens, outside any element
        return knownAt(registered.get(user), time, originMs, slotMs);
    }

    /** A registration counts unless its slot has closed (Membership would refuse it as late). */
    @Override
    public void processElement2(StreamRecord<Row> record) throws Exception {
        Row row = record.getValue();
        String user = (String) row.getField(USER);
        if (row.getField(REQUIREMENTS_MS) != null) {  // ValidTimeStreams.timeOf
            if (followsSecond) {
                secondMs = Math.max(secondMs, ((Number) row.getField(REQUIREMENTS_MS)).longValue());
                advance();
            }
            return;
        }
        long now = getProcessingTimeService().getCurrentProcessingTime();
        int read = ((Number) row.getField(PARTITION)).intValue();
        long offset = ((Number) row.getField(OFFSET)).longValue();
        requirementsRead.read(read, offset);
        if (gate != null && registrationBacklog.containsKey(read)) {
            if (ReadOffsets.through(offset, registrationBacklog.get(read))) {
                gate.backlogRead(read, now);
                advance();
            } else {
                gate.registration(now);  // the backlog is being read
            }
        }
        if (user == null || everyoneKnown) {
            return;
        }
        long slot = ((Number) row.getField(SLOT)).longValue();
        if (closed(slot, ownMs, originMs, slotMs)) {
            return;
        }
        register(user, slot);
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
            gate = null;
            gated();
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
            // the last slot the mark closed (SlotClock.closed_by): the one before the slot of mark + 1
            unregistered.closeThrough(mark == Long.MAX_VALUE ? Long.MAX_VALUE
                    : SlotWatermarks.slotOf(originMs, slotMs, mark + 1) - 1);
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
