package pwevent.flink.parsing;

import pwevent.flink.time.ValidTime;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * The SQL fast path's verdict on every requirement record, split in one pass, as
 * {@link FastPathSplit} splits the events': a requirement the fast path accepted goes on as
 * {@link ValidTime#FAST} with its {@link RequirementPayload} (the record's bytes as its original, no
 * detail); a record it hands to the reference parser leaves a mark ({@link ValidTime#PENDING},
 * partition and offset only) on the same channel, so in offset order with the accepted ones, and
 * goes to the side output {@link #SLOW}. {@link RequirementOrder} puts the reference parser's rows
 * back in the marks' places.
 *
 * <p>Input: Row(user, time_ms, requested, ledger, partition, offset, value, fast, ts_ms), one per
 * record in offset order (user, time_ms, requested and ledger meaningful where fast holds; ledger
 * then set). Output: {@link ValidTime#IN}. Side output: Row(value, partition, offset, ts_ms), what
 * the reference parser takes.
 */
public final class RequirementSplit extends ProcessFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The records for the reference parser, of the events' {@link FastPathSplit#SLOW} type. */
    public static final OutputTag<Row> SLOW = new OutputTag<>("requirements for the reference parser",
            FastPathSplit.SLOW.getTypeInfo());

    /** `verdicts` split; chained to them. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> verdicts) {
        return verdicts.process(new RequirementSplit(), ValidTime.IN);
    }

    @Override
    public void processElement(Row row, Context context, Collector<Row> out) {
        Object partition = row.getField(4);
        Object offset = row.getField(5);
        byte[] value = (byte[]) row.getField(6);
        if (Boolean.TRUE.equals(row.getField(7))) {
            byte[] payload = new RequirementPayload((String) row.getField(2), (String) row.getField(3), null, value)
                    .encode();
            out.collect(Row.of(row.getField(0), row.getField(1), null, partition, offset, payload, ValidTime.FAST));
        } else {
            out.collect(Row.of(null, null, null, partition, offset, null, ValidTime.PENDING));
            context.output(SLOW, Row.of(value, partition, offset, row.getField(8)));
        }
    }
}
