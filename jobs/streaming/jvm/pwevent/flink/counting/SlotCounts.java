package pwevent.flink.counting;

import pwevent.flink.contract.ClassedRow;
import pwevent.flink.contract.SlotCountRow;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.OutputTag;

/**
 * The class join's rows counted per (slot, class, cell), chained behind {@link UserClassJoin}
 * (docs/streaming.md, "Topology"): a row per user and slot comes in, a count per class and cell
 * goes out once the watermark has passed the slot's last millisecond, so that the SQL window that
 * sums the subtasks' counts for the Population sees a few rows per slot, not one per user. A row
 * without a class goes to the side output {@link #UNKNOWN} as it comes (an `unknown_user` dead
 * letter).
 *
 * <p>Input: {@link UserClassJoin#OUT}. Output: {@link SlotCountRow}, timed at the slot's
 * last millisecond, in the order the slot's (class, cell) pairs first came. The join emits a slot's
 * rows right before it forwards the watermark that passes the slot's end, so nothing is pending
 * between two calls; what is (none, by that order) is kept in operator state all the same.
 */
public final class SlotCounts extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final RowTypeInfo OUT = SlotCountRow.TYPE;
    /** The rows of users without a class at their slot, as the join gave them. */
    public static final OutputTag<Row> UNKNOWN = new OutputTag<>("without a class", UserClassJoin.OUT);
    private static final ListStateDescriptor<Row> PENDING = new ListStateDescriptor<>("pending counts", OUT);

    /** A slot's last millisecond -> its counts so far, by (class, cell). */
    private transient TreeMap<Long, Slot> pending;
    private transient ListState<Row> saved;

    /** `joined` (the class join's output), counted; chained to it. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> joined) {
        return joined.transform("count per slot, class and cell", OUT, new SlotCounts());
    }

    /** One slot's counts, in the order its (class, cell) pairs first came. */
    private static final class Slot {
        final long slot;
        final Map<Key, long[]> counts = new HashMap<>();
        final List<Key> order = new ArrayList<>();

        Slot(long slot) {
            this.slot = slot;
        }

        void add(String cls, int cell, long n) {
            Key key = new Key(cls, cell);
            long[] count = counts.get(key);
            if (count == null) {
                counts.put(key, new long[] {n});
                order.add(key);
            } else {
                count[0] += n;
            }
        }

        /** The count of `key` ({@link SlotCountRow}), the slot's last millisecond `end`. */
        Row count(Key key, long end) {
            Row row = new Row(SlotCountRow.ARITY);
            row.setField(SlotCountRow.SLOT, slot);
            row.setField(SlotCountRow.CLS, key.cls());
            row.setField(SlotCountRow.CELL, key.cell());
            row.setField(SlotCountRow.N, counts.get(key)[0]);
            row.setField(SlotCountRow.RT_MS, end);
            return row;
        }
    }

    /** A count's key within a slot: the class and the cell. */
    private record Key(String cls, int cell) {
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        saved = context.getOperatorStateStore().getListState(PENDING);
        pending = new TreeMap<>();
        for (Row row : saved.get()) {
            add((Long) row.getField(SlotCountRow.RT_MS), (Long) row.getField(SlotCountRow.SLOT),
                    (String) row.getField(SlotCountRow.CLS), (Integer) row.getField(SlotCountRow.CELL),
                    (Long) row.getField(SlotCountRow.N));
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        List<Row> rows = new ArrayList<>();
        pending.forEach((end, slot) -> slot.order.forEach(
                key -> rows.add(slot.count(key, end))));
        saved.update(rows);
    }

    private void add(long end, long slot, String cls, int cell, long n) {
        pending.computeIfAbsent(end, e -> new Slot(slot)).add(cls, cell, n);
    }

    @Override
    public void processElement(StreamRecord<Row> record) {
        Row row = record.getValue();
        String cls = (String) row.getField(ClassedRow.CLS);
        if (cls == null) {
            output.collect(UNKNOWN, record);
        } else {
            add((Long) row.getField(ClassedRow.RT_MS), (Long) row.getField(ClassedRow.SLOT), cls,
                    (Integer) row.getField(ClassedRow.CELL), 1);
        }
    }

    /** The counts of every slot whose last millisecond `mark` has reached, then the watermark. */
    @Override
    public void processWatermark(Watermark mark) throws Exception {
        for (Iterator<Map.Entry<Long, Slot>> ends = pending.headMap(mark.getTimestamp(), true).entrySet().iterator();
                ends.hasNext(); ) {
            Map.Entry<Long, Slot> at = ends.next();
            ends.remove();
            Slot slot = at.getValue();
            for (Key key : slot.order) {
                output.collect(new StreamRecord<>(slot.count(key, at.getKey()), at.getKey()));
            }
        }
        super.processWatermark(mark);
    }
}
