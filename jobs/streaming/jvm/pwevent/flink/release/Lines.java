package pwevent.flink.release;

import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.functions.TableFunction;
import org.apache.flink.types.Row;

/**
 * One row per line of a text whose lines are joined by '\n' (no other line terminator counts):
 * how the Population hands on many audit lines in one row (jobs/streaming/hosts.py,
 * {@code PopulationHost}), each line one message of the audit topic. Null gives no row.
 */
@FunctionHint(output = @DataTypeHint("ROW<line STRING>"))
public final class Lines extends TableFunction<Row> {
    private static final long serialVersionUID = 1L;

    public void eval(String text) {
        if (text == null) {
            return;
        }
        int start = 0;
        for (int end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n', start)) {
            collect(Row.of(text.substring(start, end)));
            start = end + 1;
        }
        collect(Row.of(text.substring(start)));
    }
}
