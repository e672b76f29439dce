package pwevent.flink.parsing;

import pwevent.flink.time.ValidTime;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * The SQL fast path's verdict on every event record, split in one pass (docs/streaming.md,
 * "Parsing"): an event the fast path accepted goes on as {@link ValidTime#FAST}; a record it hands
 * to the reference parser leaves a mark ({@link ValidTime#PENDING}, partition and offset only) on the
 * same channel, so in offset order with the events, and goes to the side output {@link #SLOW}.
 *
 * <p>Input: Row(user, time_ms, cell, partition, offset, value, fast, ts_ms), one per record in
 * offset order (jobs/streaming/event_sql.py; user, time_ms and cell meaningful where fast holds).
 * Output: {@link ValidTime#IN}. Side output: Row(value, partition, offset, ts_ms), what the reference
 * parser takes.
 */
public final class FastPathSplit extends ProcessFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The records for the reference parser. */
    public static final OutputTag<Row> SLOW = new OutputTag<>("for the reference parser", new RowTypeInfo(
            new TypeInformation<?>[] {Types.PRIMITIVE_ARRAY(Types.BYTE), Types.INT, Types.LONG, Types.LONG},
            new String[] {"value", "partition", "offset", "ts_ms"}));

    /** `verdicts` split; chained to them. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> verdicts) {
        return verdicts.process(new FastPathSplit(), ValidTime.IN);
    }

    @Override
    public void processElement(Row row, Context context, Collector<Row> out) {
        Object partition = row.getField(3);
        Object offset = row.getField(4);
        if (Boolean.TRUE.equals(row.getField(6))) {
            out.collect(Row.of(row.getField(0), row.getField(1), row.getField(2), partition, offset, row.getField(5),
                    ValidTime.FAST));
        } else {
            out.collect(Row.of(null, null, null, partition, offset, null, ValidTime.PENDING));
            context.output(SLOW, Row.of(row.getField(5), partition, offset, row.getField(7)));
        }
    }
}
