package pwevent.flink.parsing;

import pwevent.flink.contract.EventVerdictRow;
import pwevent.flink.contract.ParsedRow;
import pwevent.flink.contract.SlowRecordRow;
import pwevent.flink.contract.TimePaths;
import pwevent.flink.time.ValidTime;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * The SQL fast path's verdict on every event record, split in one pass (docs/streaming.md,
 * "Parsing"): an event the fast path accepted goes on as {@link TimePaths#FAST}; a record it hands
 * to the reference parser leaves a mark ({@link TimePaths#PENDING}, partition and offset only) on the
 * same channel, so in offset order with the events, and goes to the side output {@link #SLOW}. The
 * accepted event's user id is named by {@link Pseudonyms} (a pseudonym under {@code pseudonymise:}).
 *
 * <p>Input: {@link EventVerdictRow}, one per record in offset order (jobs/streaming/event_sql.py).
 * Output: {@link ValidTime#IN}. Side output: {@link SlowRecordRow}, what the reference parser takes.
 */
public final class FastPathSplit extends ProcessFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The records for the reference parser. */
    public static final OutputTag<Row> SLOW = new OutputTag<>("for the reference parser", SlowRecordRow.TYPE);

    private final Pseudonyms pseudonyms;

    /** A split whose accepted events' users are named by {@code pseudonyms}. */
    public FastPathSplit(Pseudonyms pseudonyms) {
        this.pseudonyms = pseudonyms;
    }

    /** `verdicts` split; chained to them. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> verdicts, Pseudonyms pseudonyms) {
        return verdicts.process(new FastPathSplit(pseudonyms), ValidTime.IN);
    }

    @Override
    public void processElement(Row row, Context context, Collector<Row> out) {
        Object partition = row.getField(EventVerdictRow.PARTITION);
        Object offset = row.getField(EventVerdictRow.OFFSET);
        if (Boolean.TRUE.equals(row.getField(EventVerdictRow.FAST))) {
            out.collect(accepted(pseudonyms.name((String) row.getField(EventVerdictRow.USER)),
                    row.getField(EventVerdictRow.TIME_MS),
                    row.getField(EventVerdictRow.CELL), partition, offset, row.getField(EventVerdictRow.VALUE)));
        } else {
            out.collect(mark(partition, offset, TimePaths.PENDING));
            context.output(SLOW, slow(row.getField(EventVerdictRow.VALUE), partition, offset,
                    row.getField(EventVerdictRow.TS_MS)));
        }
    }

    /** A record accepted on the in-order channel ({@link TimePaths#FAST}). */
    static Row accepted(Object user, Object timeMs, Object cell, Object partition, Object offset, Object original) {
        Row parsed = mark(partition, offset, TimePaths.FAST);
        parsed.setField(ParsedRow.USER, user);
        parsed.setField(ParsedRow.TIME_MS, timeMs);
        parsed.setField(ParsedRow.CELL, cell);
        parsed.setField(ParsedRow.ORIGINAL, original);
        return parsed;
    }

    /** A record for the reference parser ({@link SlowRecordRow}). */
    static Row slow(Object value, Object partition, Object offset, Object tsMs) {
        Row slow = new Row(SlowRecordRow.ARITY);
        slow.setField(SlowRecordRow.VALUE, value);
        slow.setField(SlowRecordRow.PARTITION, partition);
        slow.setField(SlowRecordRow.OFFSET, offset);
        slow.setField(SlowRecordRow.TS_MS, tsMs);
        return slow;
    }

    /** A {@link ParsedRow} of `path` with partition and offset only: a mark of a record handed to the
     *  reference parser ({@link TimePaths#PENDING}) or a refused one ({@link TimePaths#REFUSED}). */
    static Row mark(Object partition, Object offset, int path) {
        Row mark = new Row(ParsedRow.ARITY);
        mark.setField(ParsedRow.PARTITION, partition);
        mark.setField(ParsedRow.OFFSET, offset);
        mark.setField(ParsedRow.PATH, path);
        return mark;
    }
}
