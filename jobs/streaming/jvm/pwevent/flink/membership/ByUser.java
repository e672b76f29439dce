package pwevent.flink.membership;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.types.Row;

/** The key of the job's per-user operators: a row's first field, its user (FirstPresence,
 *  Membership, UserClassJoin). */
public final class ByUser implements KeySelector<Row, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String getKey(Row row) {
        return (String) row.getField(0);
    }
}
