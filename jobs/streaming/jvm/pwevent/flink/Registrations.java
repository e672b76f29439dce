package pwevent.flink;

import org.apache.flink.types.Row;

/**
 * The rows of {@link ValidTime}'s input 2 (docs/streaming.md, "Time"): Row(user, slot,
 * requirements_ms, partition, offset). One per requirement record, with its partition and offset
 * (how far the requirements' reader has got); or, `requirements_ms` alone, the requirements' valid
 * time. `user` and `slot` are always null: releases before 2026-12-06 named the user a record
 * registered, and the row type stays theirs.
 */
public final class Registrations {
    private static final int REQUIREMENTS_MS = 2;
    private static final int PARTITION = 3;
    private static final int OFFSET = 4;

    private Registrations() {
    }

    /** The requirement record at `offset` of requirements partition `partition` has been read. */
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

    static int partition(Row row) {
        return ((Number) row.getField(PARTITION)).intValue();
    }

    static long offset(Row row) {
        return ((Number) row.getField(OFFSET)).longValue();
    }
}
