package pwevent.flink.membership;

import pwevent.flink.contract.PresenceRow;
import pwevent.flink.contract.PresentRow;
import java.util.HashMap;
import java.util.List;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The (user, slot) presences Membership can still need, keyed by user (docs/streaming.md, "Users
 * without a requirement record"). With a default requirement Membership hears of every user present
 * in a slot's events; this passes a presence on only when the user's `UserMembership.seen` could
 * answer true, so that Python is crossed about once per user instead of once per (user, slot).
 *
 * <p>The rule ({@link #forward}): a presence at slot s is passed on when no presence of the user was
 * passed on before, or only ones of slots after s. Once Membership has heard of a presence at slot m,
 * the user has a class or a pending presence of a slot at most m, and the pending presence
 * registers the user when its slot closes; a class is never taken away. So `seen` is false, without
 * effect, for every later presence at a slot at least m: dropping it changes nothing.
 *
 * <p>That holds while the default stays on. A run with the default off (the same graph; no presence
 * reaches this operator) closes a pending presence without registering the user, so what was passed
 * on before it no longer counts. Every start of this operator with the default off therefore raises
 * an epoch (operator state, the highest of all subtasks' on restore); a user's remembered slot
 * counts only in the epoch it was passed on in (tests/streaming/data/first-presence.tsv, read by
 * FirstPresenceTest and by tests/jobs/test_first_presence.py against `UserMembership`).
 *
 * <p>In front of the exchange by user, chained to the present events (neither late nor ahead),
 * {@link Unheard} drops the presences this subtask has already sent on at a slot at most theirs
 * since it started: the keyed operator would drop them too (it received the earlier one first, on
 * the same channel, in the current epoch), so most rows never cross the network. It keeps nothing
 * in state (a restart starts it empty) and forgets everything when it holds {@link #UNHEARD_LIMIT}
 * users.
 *
 * <p>Input: the present events ({@link PresentRow}), any number per (user, slot). Output:
 * {@link PresenceRow} (k = user, v = slot), with the input's timestamps; watermarks pass as they are. With
 * the default off nothing is passed on.
 */
public final class FirstPresence extends KeyedProcessFunction<String, Row, Row> implements CheckpointedFunction {
    private static final long serialVersionUID = 1L;

    private final boolean defaultOn;
    private long epoch;
    private transient ListState<Long> epochs;
    /** The user's earliest passed-on slot and the epoch it was passed on in. */
    private transient ValueState<long[]> passed;

    public FirstPresence(boolean defaultOn) {
        this.defaultOn = defaultOn;
    }

    /** The output: Row(k = user, v = slot), what Membership's second input takes. */
    public static final RowTypeInfo PRESENCE = PresenceRow.TYPE;
    /** How many users {@link Unheard} remembers before it forgets them all. */
    static final int UNHEARD_LIMIT = 1 << 18;

    /** Of the present events (Row(user, slot, ...)), the presences Membership can still need, by user. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> present, boolean defaultOn) {
        return present.flatMap(new Unheard(defaultOn), PRESENCE).uid("presences-unheard")
                .name("presences not sent on yet")
                .keyBy(new ByUser()).process(new FirstPresence(defaultOn), PRESENCE);
    }

    /** The per-subtask filter in front of the exchange (see the class comment); the same rule in one epoch. */
    static final class Unheard extends RichFlatMapFunction<Row, Row> {
        private static final long serialVersionUID = 1L;
        private final boolean defaultOn;
        private transient HashMap<String, long[]> sent;

        Unheard(boolean defaultOn) {
            this.defaultOn = defaultOn;
        }

        @Override
        public void open(OpenContext context) {
            sent = new HashMap<>();
        }

        @Override
        public void flatMap(Row row, Collector<Row> out) {
            if (!defaultOn) {
                return;
            }
            String user = (String) row.getField(PresentRow.USER);
            long slot = (Long) row.getField(PresentRow.SLOT);
            if (pass(sent, user, slot)) {
                Row presence = new Row(PresenceRow.ARITY);
                presence.setField(PresenceRow.K, user);
                presence.setField(PresenceRow.V, slot);
                out.collect(presence);
            }
        }

        /** Whether a presence of `user` at `slot` goes on, remembering it in `sent` if so. */
        static boolean pass(HashMap<String, long[]> sent, String user, long slot) {
            long[] next = forward(sent.get(user), slot, 0);
            if (next == null) {
                return false;
            }
            if (sent.size() >= UNHEARD_LIMIT) {
                sent.clear();
            }
            sent.put(user, next);
            return true;
        }
    }

    /**
     * What to remember after a presence at `slot` in `epoch`, given what is remembered (`held`:
     * {slot, epoch}, or null): the new {slot, epoch} when the presence is passed on, null when it is
     * dropped.
     */
    static long[] forward(long[] held, long slot, long epoch) {
        if (held == null || held[1] != epoch || slot < held[0]) {
            return new long[] {slot, epoch};
        }
        return null;
    }

    /** The epoch a start runs in: the highest restored one (0 without), raised when the default is off. */
    static long startEpoch(Iterable<Long> restored, boolean defaultOn) {
        long highest = 0;
        for (Long e : restored) {
            highest = Math.max(highest, e);
        }
        return defaultOn ? highest : highest + 1;
    }

    @Override
    public void initializeState(FunctionInitializationContext context) throws Exception {
        epochs = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("epoch", Types.LONG));
        epoch = startEpoch(context.isRestored() ? epochs.get() : List.of(), defaultOn);
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) throws Exception {
        epochs.update(List.of(epoch));
    }

    @Override
    public void open(OpenContext context) {
        passed = getRuntimeContext().getState(new ValueStateDescriptor<>("passed",
                PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement(Row presence, Context ctx, Collector<Row> out) throws Exception {
        long[] next = forward(passed.value(), (Long) presence.getField(PresenceRow.V), epoch);
        if (next != null) {
            passed.update(next);
            out.collect(presence);
        }
    }
}
