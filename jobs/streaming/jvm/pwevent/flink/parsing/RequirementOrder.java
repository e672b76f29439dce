package pwevent.flink.parsing;

import pwevent.flink.contract.ParsedRow;
import pwevent.flink.contract.TimePaths;
import pwevent.flink.time.ValidTime;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The requirement records of both parsers in each Kafka partition's offset order, as the
 * requirements' {@link ValidTime} needs them.
 *
 * <p>Input 1: {@link RequirementSplit}'s output ({@link TimePaths#FAST} rows and
 * {@link TimePaths#PENDING} marks). Input 2: the reference parser's rows ({@link ValidTime#IN}:
 * {@link TimePaths#SLOW_ACCEPTED} with user, time_ms and payload, or {@link TimePaths#SLOW_REJECTED}
 * with partition and offset only), one per mark, as late as they come, on the subtask that had the
 * mark. Both per partition in offset order. Output: {@link ValidTime#IN}, per partition in offset
 * order: an accepted record (either parser's) as {@link TimePaths#FAST} with user, time_ms and
 * payload ({@link RequirementPayload}), a refused one as {@link TimePaths#REFUSED} (partition and
 * offset only), with the timestamp of the row it comes from (the reference parser's for a marked
 * record; none if that had none).
 *
 * <p>Per partition, a queue of held rows: a fast row goes out at once if nothing of its partition is
 * held, else waits at the queue's end; a mark waits there until the reference parser's row of its
 * offset takes its place, and then the rows at the head up to the next mark go out. The two inputs
 * are separate channels, so the reference parser's row may also come before its mark: it then
 * waits for the mark, which takes its place at once. With consistent inputs nothing is held once
 * both have ended.
 *
 * <p>Watermarks: Flink's default, the smaller of the two inputs'. A held row leaves right after the
 * reference parser's row it waits for, which input 2's watermark does not pass before it comes, so
 * neither has the output's: as if the marked record had come on input 1 then. (While input 2 is idle
 * by its upstream's status, input 1's watermark alone counts, as for any Flink operator.)
 *
 * <p>State: the held rows and their timestamps, and the reference parser's rows that came before
 * their marks, operator list state in their partitions' order, so
 * a checkpoint restores what it held (with aligned barriers nothing: the reference parser's rows for
 * the marks before a barrier come before it on input 2). At the same parallelism each subtask gets
 * its own rows back; a rescale deals list state out in chunks, which may part a partition's rows from
 * the subtask reading it, so rescaling a checkpoint that holds rows is not supported.
 */
public final class RequirementOrder extends AbstractStreamOperator<Row>
        implements TwoInputStreamOperator<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    /** A held row's fields in {@link #HELD}: {@link ParsedRow}'s, then its timestamp ({@link #TS}) and
     *  whether it is a reference parser's row that came before its mark ({@link #EARLY}). */
    private static final int[] ROW = IntStream.range(0, ParsedRow.ARITY).toArray();
    private static final int TS = ParsedRow.ARITY;
    private static final int EARLY = ParsedRow.ARITY + 1;
    private static final ListStateDescriptor<Row> HELD = new ListStateDescriptor<>("held requirement rows",
            new RowTypeInfo(
                    Stream.concat(Arrays.stream(ParsedRow.TYPE.getFieldTypes()), Stream.of(Types.LONG, Types.BOOLEAN))
                            .toArray(TypeInformation<?>[]::new),
                    Stream.concat(Arrays.stream(ParsedRow.TYPE.getFieldNames()), Stream.of("ts", "early"))
                            .toArray(String[]::new)));

    /** Partition -> its held rows in offset order, the first a placeholder; no entry: none held. */
    private transient Map<Integer, ArrayDeque<Held>> held;
    /** Partition -> offset -> the reference parser's row that came before its mark. */
    private transient Map<Integer, Map<Long, Held>> early;
    private transient ListState<Row> saved;

    /** `split` ({@link RequirementSplit#apply}) and `parsed` (the reference parser's rows), merged. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> split, DataStream<Row> parsed) {
        return split.connect(parsed).transform("requirements in offset order", ValidTime.IN, new RequirementOrder());
    }

    /** A held row ({@link ValidTime#IN}) and its timestamp (null: none); a placeholder until the
     *  reference parser's row replaces it. */
    private static final class Held {
        Row row;
        Long timestamp;

        Held(Row row, Long timestamp) {
            this.row = row;
            this.timestamp = timestamp;
        }

        boolean placeholder() {
            return path(row) == TimePaths.PENDING;
        }
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        saved = context.getOperatorStateStore().getListState(HELD);
        held = new HashMap<>();
        early = new HashMap<>();
        for (Row row : saved.get()) {
            Held entry = new Held(Row.project(row, ROW), (Long) row.getField(TS));
            if (Boolean.TRUE.equals(row.getField(EARLY))) {
                early.computeIfAbsent(partition(row), p -> new HashMap<>()).put(offset(row), entry);
            } else {
                held.computeIfAbsent(partition(row), p -> new ArrayDeque<>()).add(entry);
            }
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        List<Row> rows = new ArrayList<>();
        held.values().forEach(queue -> queue.forEach(entry -> rows.add(Row.join(entry.row,
                Row.of(entry.timestamp, false)))));
        early.values().forEach(results -> results.values().forEach(entry -> rows.add(Row.join(entry.row,
                Row.of(entry.timestamp, true)))));
        saved.update(rows);
    }

    @Override
    public void processElement1(StreamRecord<Row> record) {
        Row row = record.getValue();
        Long timestamp = record.hasTimestamp() ? record.getTimestamp() : null;
        if (path(row) == TimePaths.PENDING) {
            Held result = takeEarly(partition(row), offset(row));
            if (result != null) {
                row = result.row;
                timestamp = result.timestamp;
            }
        }
        if (path(row) == TimePaths.PENDING || held.containsKey(partition(row))) {
            held.computeIfAbsent(partition(row), p -> new ArrayDeque<>()).add(new Held(row, timestamp));
        } else {
            emit(row, timestamp);
        }
    }

    @Override
    public void processElement2(StreamRecord<Row> record) {
        Row row = record.getValue();
        int partition = partition(row);
        Long timestamp = record.hasTimestamp() ? record.getTimestamp() : null;
        Held mark = placeholder(held.get(partition), offset(row));
        if (mark == null) {
            Held before = early.computeIfAbsent(partition, p -> new HashMap<>())
                    .put(offset(row), new Held(row, timestamp));
            if (before != null) {
                throw new IllegalStateException("two reference parser's rows of requirements partition " + partition
                        + ", offset " + offset(row));
            }
            return;
        }
        mark.row = row;
        mark.timestamp = timestamp;
        release(partition);
    }

    /** The reference parser's row of `offset` in `partition` that came before its mark, or null. */
    private Held takeEarly(int partition, long offset) {
        Map<Long, Held> results = early.get(partition);
        Held result = results == null ? null : results.remove(offset);
        if (results != null && results.isEmpty()) {
            early.remove(partition);
        }
        return result;
    }

    /** The placeholder of `offset` in `queue` (null: no queue), or null. */
    private static Held placeholder(ArrayDeque<Held> queue, long offset) {
        if (queue != null) {
            for (Held entry : queue) {
                if (entry.placeholder() && offset(entry.row) == offset) {
                    return entry;
                }
            }
        }
        return null;
    }

    /** The rows at the head of `partition`'s queue up to its first placeholder, out. */
    private void release(int partition) {
        ArrayDeque<Held> queue = held.get(partition);
        while (!queue.isEmpty() && !queue.peekFirst().placeholder()) {
            Held next = queue.pollFirst();
            emit(next.row, next.timestamp);
        }
        if (queue.isEmpty()) {
            held.remove(partition);
        }
    }

    /** `row` out, as accepted (by either parser) or refused. */
    private void emit(Row row, Long timestamp) {
        Object partition = row.getField(ParsedRow.PARTITION);
        Object offset = row.getField(ParsedRow.OFFSET);
        Row out = path(row) == TimePaths.SLOW_REJECTED
                ? FastPathSplit.mark(partition, offset, TimePaths.REFUSED)
                : FastPathSplit.accepted(row.getField(ParsedRow.USER), row.getField(ParsedRow.TIME_MS), null, partition,
                        offset, row.getField(ParsedRow.ORIGINAL));
        output.collect(timed(out, timestamp));
    }

    private static StreamRecord<Row> timed(Row row, Long timestamp) {
        return timestamp == null ? new StreamRecord<>(row) : new StreamRecord<>(row, timestamp);
    }

    private static int path(Row row) {
        return ((Number) row.getField(ParsedRow.PATH)).intValue();
    }

    private static int partition(Row row) {
        return ((Number) row.getField(ParsedRow.PARTITION)).intValue();
    }

    private static long offset(Row row) {
        return ((Number) row.getField(ParsedRow.OFFSET)).longValue();
    }
}
