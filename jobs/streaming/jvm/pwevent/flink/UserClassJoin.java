package pwevent.flink;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
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
 * Each present user's row of a slot, with the user's ledger class at that slot (null: none), keyed
 * by user (docs/streaming.md, "Topology"). The event-time join of the rows with Membership's class
 * versions, as an event-time temporal join over an upsert table of versions would give it: a row at
 * time t takes the newest version with valid-from time at most t (of two with the same time, the one
 * that arrived last), and waits until both inputs' watermark has passed t.
 *
 * <p>Why not Flink's temporal join: it arms a timer for every version it receives and, when the
 * timer fires, iterates its map states. A registration is a version, so a million registrations
 * meant a million timers, each running RocksDB seeks that crawl over the tombstones of the rows
 * already joined (measured: more than ten minutes for one slot of a million registrations). Here a
 * version costs one state read and write.
 *
 * <p>Nor does a row arm a timer: the rows of a slot share its last millisecond, so the operator keeps
 * the users with waiting rows per time in memory (rebuilt from the keyed state "waiting" on a restore)
 * and, when the combined watermark passes a time, emits those users' rows before it forwards the
 * watermark, as their timers would have fired (one heap timer per row cost a fifth of this task's
 * time at full speed, and was written at every checkpoint). State of a release whose rows had timers
 * restores: its rows come out once, its timers are not read (UserClassJoinTest).
 *
 * <p>Input 1: versions, Row(user, class, valid-from ms). Input 2: Row(user, slot, cell, partition,
 * offset, original bytes, ...), the record timestamp its time (a table's rowtime, which must be
 * selected into the DataStream for that). Output: Row(user, slot, cell, partition,
 * offset, original, time ms, class).
 */
public final class UserClassJoin extends AbstractStreamOperator<Row> implements TwoInputStreamOperator<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    /** The rows waiting for the watermark: the input row's fields and its time. */
    private static final RowTypeInfo WAITING = new RowTypeInfo(
            Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG,
            Types.PRIMITIVE_ARRAY(Types.BYTE), Types.LONG);
    /** The output row; its time field is what downstream windows read as rowtime. */
    public static final RowTypeInfo OUT = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.LONG, Types.STRING},
            new String[] {"user", "slot", "cell", "partition", "offset", "original", "rt_ms", "cls"});

    private static final String WAITING_STATE = "waiting";

    private transient ValueState<Tuple2<long[], String[]>> versions;
    private transient ListState<Row> waiting;
    /** Time -> the users with rows of that time waiting (in arrival order). */
    private transient TreeMap<Long, Set<String>> due;

    /** The join of `versions` (input 1) and `rows` (input 2), both keyed by user. */
    public static SingleOutputStreamOperator<Row> join(DataStream<Row> versions, DataStream<Row> rows) {
        return versions.connect(rows).keyBy(new ByUser(), new ByUser()).transform("user class", OUT, new UserClassJoin());
    }

    private static final class ByUser implements KeySelector<Row, String> {
        private static final long serialVersionUID = 1L;

        @Override
        public String getKey(Row row) {
            return (String) row.getField(0);
        }
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        versions = context.getKeyedStateStore().getState(new ValueStateDescriptor<>("versions",
                Types.TUPLE(Types.PRIMITIVE_ARRAY(Types.LONG), Types.OBJECT_ARRAY(Types.STRING))));
        waiting = context.getKeyedStateStore().getListState(new ListStateDescriptor<>(WAITING_STATE, WAITING));
        due = new TreeMap<>();
        List<String> users;
        try (var keys = getKeyedStateBackend().<VoidNamespace>getKeys(WAITING_STATE, VoidNamespace.INSTANCE)) {
            users = keys.map(key -> (String) key).toList();
        }
        for (String user : users) {  // a restore: the rows that were waiting at the checkpoint
            setCurrentKey(user);
            for (Row row : waiting.get()) {
                due.computeIfAbsent((Long) row.getField(6), t -> new LinkedHashSet<>()).add(user);
            }
        }
    }

    @Override
    public void processElement1(StreamRecord<Row> record) throws Exception {
        Row version = record.getValue();
        Tuple2<long[], String[]> held = versions.value();
        long from = (Long) version.getField(2);
        String cls = (String) version.getField(1);
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

    @Override
    public void processElement2(StreamRecord<Row> record) throws Exception {
        Row row = record.getValue();
        long time = record.getTimestamp();
        waiting.add(Row.of(row.getField(0), row.getField(1), row.getField(2), row.getField(3),
                row.getField(4), row.getField(5), time));
        due.computeIfAbsent(time, t -> new LinkedHashSet<>()).add((String) row.getField(0));
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

    /** The current user's rows timed at most `timestamp`, each with its class; at `watermark`. */
    private void emitDue(long timestamp, long watermark) throws Exception {
        Tuple2<long[], String[]> held = versions.value();
        List<Row> later = new ArrayList<>();
        long keepFrom = watermark;
        for (Row row : waiting.get()) {
            long time = (Long) row.getField(6);
            if (time > timestamp) {
                later.add(row);
                keepFrom = Math.min(keepFrom, time);
                continue;
            }
            output.collect(new StreamRecord<>(Row.of(row.getField(0), row.getField(1), row.getField(2),
                    row.getField(3), row.getField(4), row.getField(5), time, classAt(held, time)), time));
        }
        if (later.isEmpty()) {
            waiting.clear();
        } else {
            waiting.update(later);
        }
        if (held != null) {
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
