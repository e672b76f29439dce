package pwevent.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.TwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;

/** Flink's operator test harness around a {@link ValidTime} subtask (of `parallelism`, index `index`). */
final class ValidTimeHarness {
    private ValidTimeHarness() {
    }

    static TwoInputStreamOperatorTestHarness<Row, Row, Row> harness(ValidTime operator) throws Exception {
        return harness(operator, 1, 0);
    }

    static TwoInputStreamOperatorTestHarness<Row, Row, Row> harness(ValidTime operator, int parallelism, int index)
            throws Exception {
        TwoInputStreamOperatorTestHarness<Row, Row, Row> harness =
                new TwoInputStreamOperatorTestHarness<>(operator, 128, parallelism, index);
        harness.getExecutionConfig().setAutoWatermarkInterval(100);
        harness.setup(ValidTime.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        return harness;
    }

    /** (offset, ahead) of each row that came out, in order. */
    static List<List<Object>> judged(List<Object> output) {
        List<List<Object>> rows = new ArrayList<>();
        for (Object item : output) {
            if (item instanceof StreamRecord<?> record) {
                Row row = (Row) record.getValue();
                rows.add(List.of(row.getField(4), row.getField(6)));
            }
        }
        return rows;
    }
}
