package pwevent.flink;

import org.apache.flink.types.Row;

/**
 * The rows of {@link ValidTime}'s input 2 (jobs/streaming/rows.py, `REGISTRATIONS`; docs/streaming.md,
 * "Time"): Row(user, slot, requirements_ms, partition, offset). One per requirement record, with its
 * partition and offset (how far the requirements' reader has got), and its user and slot if its
 * requirement registers its user when it is the user's first (jobs/common/requirement_rules.py,
 * {@code RequirementRules.registers}); or, `requirements_ms` alone, the requirements' valid time.
 */
public final class Registrations {
    private static final int USER = 0;
    private static final int SLOT = 1;
    private static final int REQUIREMENTS_MS = 2;
    private static final int PARTITION = 3;
    private static final int OFFSET = 4;

    private Registrations() {
    }

    /** The requirement record at `offset` of requirements partition `partition` registers `user`
     *  from `slot` on. */
    public static Row registration(String user, long slot, int partition, long offset) {
        return Row.of(user, slot, null, partition, offset);
    }

    /** The requirement record at `offset` of requirements partition `partition`, which registers
     *  nobody. */
    public static Row read(int partition, long offset) {
        return Row.of(null, null, null, partition, offset);
    }

    /** The requirements' valid time is `ms` ({@link ValidTimeStreams#timeOf}). */
    public static Row requirementsTime(long ms) {
        return Row.of(null, null, ms, null, null);
    }

    /** The requirements' valid time of a {@link #requirementsTime} row; null for a record's row. */
    static Long requirementsMs(Row row) {
        Object ms = row.getField(REQUIREMENTS_MS);
        return ms == null ? null : ((Number) ms).longValue();
    }

    /** The user a record registers; null if it registers nobody. */
    static String user(Row row) {
        return (String) row.getField(USER);
    }

    /** The slot a record registers its user from (only with a user). */
    static long slot(Row row) {
        return ((Number) row.getField(SLOT)).longValue();
    }

    static int partition(Row row) {
        return ((Number) row.getField(PARTITION)).intValue();
    }

    static long offset(Row row) {
        return ((Number) row.getField(OFFSET)).longValue();
    }
}
