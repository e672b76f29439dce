package pwevent.flink.time;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.types.Row;

/**
 * How far a reader has got: per partition, the highest offset read, kept in a union list state
 * (every subtask's entries given to every subtask on a restore; the highest wins), so that a
 * restored job knows what it had read before the checkpoint whatever the consumer group committed
 * (docs/streaming.md, "Time").
 */
final class ReadOffsets {
    private final Map<Integer, Long> read = new HashMap<>();

    /** The union list state named `name` of (partition, offset) rows. */
    static ListStateDescriptor<Row> descriptor(String name) {
        return new ListStateDescriptor<>(name, new RowTypeInfo(
                new TypeInformation<?>[] {Types.INT, Types.LONG}, new String[] {"partition", "offset"}));
    }

    /** The offsets of a restored state's rows (none: a start without state). */
    static ReadOffsets restore(Iterable<Row> rows) {
        ReadOffsets offsets = new ReadOffsets();
        for (Row row : rows) {
            offsets.read((Integer) row.getField(0), (Long) row.getField(1));
        }
        return offsets;
    }

    /** Writes the offsets into `state`. */
    void snapshot(ListState<Row> state) throws Exception {
        List<Row> rows = new ArrayList<>();
        read.forEach((partition, offset) -> rows.add(Row.of(partition, offset)));
        state.update(rows);
    }

    /** The record at `offset` of `partition` has been read. */
    void read(int partition, long offset) {
        read.merge(partition, offset, Math::max);
    }

    /** Whether an offset of `partition` is at or past the last record before `end` (one past it). */
    static boolean through(Long offset, long end) {
        return offset != null && offset >= end - 1;
    }

    /** Whether `partition` has been read through its last record before `end`. */
    boolean readThrough(int partition, long end) {
        return through(read.get(partition), end);
    }
}
