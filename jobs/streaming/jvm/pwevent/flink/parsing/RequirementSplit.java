package pwevent.flink.parsing;

import pwevent.flink.contract.RequirementVerdictRow;
import pwevent.flink.contract.TimePaths;
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
 * {@link TimePaths#FAST} with its {@link RequirementPayload} (the record's bytes as its original, no
 * detail); a record it hands to the reference parser leaves a mark ({@link TimePaths#PENDING},
 * partition and offset only) on the same channel, so in offset order with the accepted ones, and
 * goes to the side output {@link #SLOW}. {@link RequirementOrder} puts the reference parser's rows
 * back in the marks' places. The accepted record's user id is named by {@link Pseudonyms}.
 *
 * <p>Input: {@link RequirementVerdictRow}, one per record in offset order (ledger set where fast
 * holds). Output: {@link ValidTime#IN}. Side output: {@link FastPathSplit#SLOW}'s rows, what the
 * reference parser takes.
 */
public final class RequirementSplit extends ProcessFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The records for the reference parser, of the events' {@link FastPathSplit#SLOW} type. */
    public static final OutputTag<Row> SLOW = new OutputTag<>("requirements for the reference parser",
            FastPathSplit.SLOW.getTypeInfo());

    private final Pseudonyms pseudonyms;

    /** A split whose accepted records' users are named by {@code pseudonyms}. */
    public RequirementSplit(Pseudonyms pseudonyms) {
        this.pseudonyms = pseudonyms;
    }

    /** `verdicts` split; chained to them. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> verdicts, Pseudonyms pseudonyms) {
        return verdicts.process(new RequirementSplit(pseudonyms), ValidTime.IN);
    }

    @Override
    public void processElement(Row row, Context context, Collector<Row> out) {
        Object partition = row.getField(RequirementVerdictRow.PARTITION);
        Object offset = row.getField(RequirementVerdictRow.OFFSET);
        byte[] value = (byte[]) row.getField(RequirementVerdictRow.VALUE);
        if (Boolean.TRUE.equals(row.getField(RequirementVerdictRow.FAST))) {
            byte[] payload = new RequirementPayload((String) row.getField(RequirementVerdictRow.REQUESTED),
                    (String) row.getField(RequirementVerdictRow.LEDGER), null, value).encode();
            out.collect(FastPathSplit.accepted(pseudonyms.name((String) row.getField(RequirementVerdictRow.USER)),
                    row.getField(RequirementVerdictRow.TIME_MS), null, partition, offset, payload));
        } else {
            out.collect(FastPathSplit.mark(partition, offset, TimePaths.PENDING));
            context.output(SLOW,
                    FastPathSplit.slow(value, partition, offset, row.getField(RequirementVerdictRow.TS_MS)));
        }
    }
}
