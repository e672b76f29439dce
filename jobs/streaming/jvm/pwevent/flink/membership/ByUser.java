package pwevent.flink.membership;

import pwevent.flink.contract.ChangeRow;
import pwevent.flink.contract.PresenceRow;
import pwevent.flink.contract.PresentRow;
import pwevent.flink.contract.TimedRow;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.types.Row;

/** The key of the job's per-user operators: a row's first field, its user (FirstPresence,
 *  Membership, UserClassJoin: every row they are keyed on has its user first, {@link #USER}). */
public final class ByUser implements KeySelector<Row, String> {
    private static final long serialVersionUID = 1L;
    /** The user's field in the rows keyed by it: {@link PresentRow}, {@link PresenceRow}, {@link TimedRow},
     *  {@link ChangeRow}. */
    static final int USER = PresentRow.USER;

    @Override
    public String getKey(Row row) {
        return (String) row.getField(USER);
    }
}
