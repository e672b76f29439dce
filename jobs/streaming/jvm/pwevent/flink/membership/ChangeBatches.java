package pwevent.flink.membership;

import pwevent.flink.contract.ChangeBatchRow;
import pwevent.flink.contract.ChangeRow;
import pwevent.flink.parsing.Json;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.TreeMap;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * {@link Membership}'s changes, many to a row, for the Population (docs/streaming.md, "Topology"):
 * {@link ChangeBatchRow}, `changes` a JSON array of groups, each the changes of one (target, previous,
 * requirement) at `slot`: {"target", "previous", "requirement", "users": [..]}
 * (jobs/streaming/rows.py, `population_row`, reads them), timed as the changes were (the slot's
 * last millisecond). Chained behind
 * Membership: a batch goes out when it holds {@link #MAX_CHANGES} changes, and whatever is held goes
 * out before a watermark is forwarded (so every change of a slot reaches the Population before the
 * watermark that closes it) and before a checkpoint barrier (so nothing is ever held in a
 * checkpoint, and the operator has no state).
 */
public final class ChangeBatches extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final RowTypeInfo OUT = ChangeBatchRow.TYPE;
    static final int MAX_CHANGES = 4096;

    /** Per slot: its rows' time and its changes so far, by group. */
    private transient TreeMap<Long, Batch> held;

    /** One slot's rows' time and its changes so far, by group. */
    private static final class Batch {
        final long time;
        /** (target, previous, requirement) -> the users' JSON strings, comma-separated. */
        final LinkedHashMap<List<String>, StringBuilder> groups = new LinkedHashMap<>();
        int n;

        Batch(long time) {
            this.time = time;
        }
    }

    /** `changes` (Membership's output) in batches; chained to it. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> changes) {
        return changes.transform("membership changes in batches", OUT, new ChangeBatches());
    }

    @Override
    public void open() throws Exception {
        super.open();
        held = new TreeMap<>();
    }

    @Override
    public void processElement(StreamRecord<Row> record) {
        Batch batch = add(record.getValue(), record.getTimestamp());
        if (batch.n >= MAX_CHANGES) {
            flush((Long) record.getValue().getField(ChangeRow.SLOT));
        }
    }

    private Batch add(Row change, long time) {
        long slot = (Long) change.getField(ChangeRow.SLOT);
        Batch batch = held.computeIfAbsent(slot, s -> new Batch(time));
        StringBuilder users = batch.groups.computeIfAbsent(
                Arrays.asList((String) change.getField(ChangeRow.CLS), (String) change.getField(ChangeRow.PREVIOUS),
                        (String) change.getField(ChangeRow.REQUIREMENT)),
                group -> new StringBuilder());
        if (users.length() > 0) {
            users.append(',');
        }
        users.append(Json.string((String) change.getField(ChangeRow.USER)));
        batch.n++;
        return batch;
    }

    private void flush(long slot) {
        Batch batch = held.remove(slot);
        StringBuilder json = new StringBuilder("[");
        batch.groups.forEach((group, users) -> {
            if (json.length() > 1) {
                json.append(',');
            }
            json.append("{\"target\":").append(Json.string(group.get(0))).append(",\"previous\":")
                    .append(group.get(1) == null ? "null" : Json.string(group.get(1))).append(",\"requirement\":")
                    .append(group.get(2)).append(",\"users\":[").append(users).append("]}");
        });
        Row out = new Row(ChangeBatchRow.ARITY);
        out.setField(ChangeBatchRow.SLOT, slot);
        out.setField(ChangeBatchRow.CHANGES, json.append(']').toString());
        output.collect(new StreamRecord<>(out, batch.time));
    }

    private void flushAll() {
        for (Long slot : new ArrayList<>(held.keySet())) {
            flush(slot);
        }
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        flushAll();
        super.processWatermark(mark);
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) {
        flushAll();
    }
}
