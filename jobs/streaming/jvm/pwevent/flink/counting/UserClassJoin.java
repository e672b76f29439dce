package pwevent.flink.counting;

import pwevent.flink.contract.ChangeRow;
import pwevent.flink.contract.ClassedRow;
import pwevent.flink.contract.PresentRow;
import pwevent.flink.membership.ByUser;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The latest event of each user in each slot, with the user's ledger class at that slot (null: none),
 * keyed by user (docs/streaming.md, "Topology"): what a one-slot window with top-1 per user, then an
 * event-time join, would give, in one operator, so that an event crosses one exchange and arms no
 * timer.
 *
 * <p>The latest event: of a user's events of one slot, the one with the greatest (time, partition,
 * offset); the replay keeps the last of a slot's events in (time, line) order, and a file is one
 * partition in offset order (UserClassJoinTest, and the integration tests against the replay).
 *
 * <p>The class: an event-time temporal join over an upsert table of Membership's versions as it
 * would give it: a slot's row takes the newest version with valid-from time at most the slot's last
 * millisecond (of two with the same time, the one that arrived last), once both inputs' watermark
 * has passed that millisecond. Not Flink's temporal join: it arms a timer for every version it
 * receives (a registration is a version; a million registrations took more than ten minutes for one
 * slot). Here a version costs one state read and write.
 *
 * <p>No timers at all: the events of a slot share its last millisecond, so the operator keeps the
 * users with a waiting slot per millisecond in memory (rebuilt on a restore from the keyed state
 * "latest", per user a map from a slot's last millisecond to its latest event so far) and, when the
 * combined watermark passes it, emits those users' rows before it forwards the watermark.
 *
 * <p>Input 1: versions, Membership's {@link ChangeRow} (user, cls, valid-from ms `vms`). Input 2: the
 * valid events that are neither late nor ahead, {@link PresentRow}. Output: {@link ClassedRow}, one
 * per user and slot, timestamped at the slot's last millisecond.
 */
public final class UserClassJoin extends AbstractStreamOperator<Row> implements TwoInputStreamOperator<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    /** A slot's latest event so far (state): the output row's fields up to {@link ClassedRow#ORIGINAL},
     *  where {@link PresentRow} has the same, then the event's time ({@link #TIME}). */
    private static final RowTypeInfo LATEST = new RowTypeInfo(
            Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG,
            Types.PRIMITIVE_ARRAY(Types.BYTE), Types.LONG);
    private static final int[] LATEST_FROM_EVENT = {PresentRow.USER, PresentRow.SLOT, PresentRow.CELL,
        PresentRow.PARTITION, PresentRow.OFFSET, PresentRow.ORIGINAL, PresentRow.TIME_MS};
    private static final int TIME = LATEST_FROM_EVENT.length - 1;
    /** The output row ({@link ClassedRow}); its time field is what downstream windows read as rowtime. */
    public static final RowTypeInfo OUT = ClassedRow.TYPE;

    private static final String LATEST_STATE = "latest";

    private transient ValueState<Tuple2<long[], String[]>> versions;
    /** Per user: a slot's last millisecond -> the slot's latest event so far. */
    private transient MapState<Long, Row> latest;
    /** A slot's last millisecond -> the users with a row of that slot waiting (in arrival order): a
     *  user is listed under a slot's end exactly when "latest" holds the user's event of that slot. */
    private transient TreeMap<Long, Set<String>> due;

    /** The join of `versions` (input 1) and `rows` (input 2), both keyed by user. */
    public static SingleOutputStreamOperator<Row> join(DataStream<Row> versions, DataStream<Row> rows) {
        return versions.connect(rows).keyBy(new ByUser(), new ByUser())
                .transform("user class", OUT, new UserClassJoin());
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        versions = context.getKeyedStateStore().getState(new ValueStateDescriptor<>("versions",
                Types.TUPLE(Types.PRIMITIVE_ARRAY(Types.LONG), Types.OBJECT_ARRAY(Types.STRING))));
        latest = context.getKeyedStateStore().getMapState(new MapStateDescriptor<>(LATEST_STATE, Types.LONG, LATEST));
        due = new TreeMap<>();
        List<String> users;
        try (var keys = getKeyedStateBackend().<VoidNamespace>getKeys(LATEST_STATE, VoidNamespace.INSTANCE)) {
            users = keys.map(key -> (String) key).toList();
        }
        for (String user : users) {  // a restore: the rows that were waiting at the checkpoint
            setCurrentKey(user);
            for (Long slotEnd : latest.keys()) {
                due.computeIfAbsent(slotEnd, t -> new LinkedHashSet<>()).add(user);
            }
        }
    }

    @Override
    public void processElement1(StreamRecord<Row> record) throws Exception {
        Row version = record.getValue();
        Tuple2<long[], String[]> held = versions.value();
        long from = (Long) version.getField(ChangeRow.VMS);
        String cls = (String) version.getField(ChangeRow.CLS);
        long[] times = held == null ? new long[0] : held.f0;
        String[] classes = held == null ? new String[0] : held.f1;
        int at = 0;
        while (at < times.length && times[at] < from) {
            at++;
        }
        boolean replace = at < times.length && times[at] == from;
        int n = times.length + (replace ? 0 : 1);
        long[] newTimes = new long[n];
        String[] newClasses = new String[n];
        System.arraycopy(times, 0, newTimes, 0, at);
        System.arraycopy(classes, 0, newClasses, 0, at);
        newTimes[at] = from;
        newClasses[at] = cls;
        int rest = times.length - at - (replace ? 1 : 0);
        System.arraycopy(times, times.length - rest, newTimes, at + 1, rest);
        System.arraycopy(classes, classes.length - rest, newClasses, at + 1, rest);
        versions.update(Tuple2.of(newTimes, newClasses));
    }

    /** An event: the slot's latest of this user if it is later than the one kept (or the first). */
    @Override
    public void processElement2(StreamRecord<Row> record) throws Exception {
        Row event = record.getValue();
        long slotEnd = (Long) event.getField(PresentRow.SLOT_END_MS);
        Row candidate = Row.project(event, LATEST_FROM_EVENT);
        if (due.computeIfAbsent(slotEnd, t -> new LinkedHashSet<>()).add((String) event.getField(PresentRow.USER))) {
            latest.put(slotEnd, candidate);  // the user's first of the slot: `due` lists exactly the kept ones
            return;
        }
        Row kept = latest.get(slotEnd);
        if (kept == null || later(candidate, kept)) {
            latest.put(slotEnd, candidate);
        }
    }

    /** Whether `a` is a later event than `b` of the same user and slot: (time, partition, offset). */
    static boolean later(Row a, Row b) {
        int byTime = Long.compare((Long) a.getField(TIME), (Long) b.getField(TIME));
        if (byTime != 0) {
            return byTime > 0;
        }
        int byPartition = Integer.compare((Integer) a.getField(ClassedRow.PARTITION),
                (Integer) b.getField(ClassedRow.PARTITION));
        if (byPartition != 0) {
            return byPartition > 0;
        }
        return (Long) a.getField(ClassedRow.OFFSET) > (Long) b.getField(ClassedRow.OFFSET);
    }

    /** The combined watermark of both inputs: first the rows it passed, then the watermark. */
    @Override
    public void processWatermark(Watermark mark) throws Exception {
        long watermark = mark.getTimestamp();
        for (Iterator<Map.Entry<Long, Set<String>>> times = due.headMap(watermark, true).entrySet().iterator();
                times.hasNext(); ) {
            Map.Entry<Long, Set<String>> at = times.next();
            times.remove();
            for (String user : at.getValue()) {
                setCurrentKey(user);
                emitDue(at.getKey(), watermark);
            }
        }
        super.processWatermark(mark);
    }

    /** The current user's row of the slot that ends at `slotEnd`, with its class; at `watermark`. */
    private void emitDue(long slotEnd, long watermark) throws Exception {
        Row row = latest.get(slotEnd);
        latest.remove(slotEnd);
        Tuple2<long[], String[]> held = versions.value();
        Row out = new Row(ClassedRow.ARITY);
        for (int field = ClassedRow.USER; field <= ClassedRow.ORIGINAL; field++) {
            out.setField(field, row.getField(field));
        }
        out.setField(ClassedRow.RT_MS, slotEnd);
        out.setField(ClassedRow.CLS, classAt(held, slotEnd));
        output.collect(new StreamRecord<>(out, slotEnd));
        if (held != null && held.f0.length > 1) {
            long keepFrom = watermark;
            for (Long waiting : latest.keys()) {
                keepFrom = Math.min(keepFrom, waiting);
            }
            forget(held, keepFrom);
        }
    }

    /** The class valid at `time`: the newest version from at most `time`; null without one. */
    private static String classAt(Tuple2<long[], String[]> held, long time) {
        if (held == null) {
            return null;
        }
        String found = null;
        for (int i = 0; i < held.f0.length && held.f0[i] <= time; i++) {
            found = held.f1[i];
        }
        return found;
    }

    /**
     * Drop the versions no row can need any more: rows to come have times above the watermark, and
     * `keepFrom` is at most the watermark and every waiting row's time, so of the versions from at
     * most `keepFrom` only the newest counts.
     */
    private void forget(Tuple2<long[], String[]> held, long keepFrom) throws Exception {
        long[] times = held.f0;
        String[] classes = held.f1;
        int first = 0;
        while (first + 1 < times.length && times[first + 1] <= keepFrom) {
            first++;
        }
        if (first == 0) {
            return;
        }
        long[] keptTimes = new long[times.length - first];
        String[] keptClasses = new String[classes.length - first];
        System.arraycopy(times, first, keptTimes, 0, keptTimes.length);
        System.arraycopy(classes, first, keptClasses, 0, keptClasses.length);
        versions.update(Tuple2.of(keptTimes, keptClasses));
    }
}
