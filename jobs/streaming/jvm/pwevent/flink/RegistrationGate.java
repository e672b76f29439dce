package pwevent.flink;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.flink.types.Row;

/**
 * When the events' {@link ValidTime} may start judging events (docs/streaming.md, "Time"): once the
 * requirements' backlog has been registered, so that an event read before its user's registration
 * is judged as the replay judges it (its user known, the lead guard with the events before it), not
 * by which of the two topics' readers started first. The caller says when an awaited partition has
 * been read through its backlog's last record (every requirement record comes with its partition and
 * offset, after its registration) and when one is still being read; the gate opens when every
 * awaited partition has been read, or when nothing has come from them for `silenceMs` (a backlog
 * that ends otherwise than expected: the events then wait no longer, as before the gate), or when
 * gate holds `maxHeld` rows (memory: the events then are judged as they come, as before the gate).
 * It holds the rows read while it is closed, in their order (copies: the caller's may be reused).
 * Pure: the caller passes the time.
 */
final class RegistrationGate {
    /** Why the gate opened. */
    enum Opened { NOT_YET, BACKLOG_REGISTERED, SILENCE, FULL }

    private final Set<Integer> awaited;
    private final long silenceMs;
    private final int maxHeld;
    private final List<Row> held;
    private long lastSignalMs;

    /** A gate waiting for the marks of partitions `awaited` (none: open at the first look), created
     *  at `nowMs`, holding `held` (a restored gate's rows). */
    RegistrationGate(Set<Integer> awaited, long silenceMs, int maxHeld, long nowMs, List<Row> held) {
        this.awaited = new HashSet<>(awaited);
        this.silenceMs = silenceMs;
        this.maxHeld = maxHeld;
        this.lastSignalMs = nowMs;
        this.held = new ArrayList<>(held);
    }

    /** Hold a copy of `row` until the gate opens. */
    void hold(Row row) {
        Row copy = new Row(row.getArity());
        for (int i = 0; i < row.getArity(); i++) {
            copy.setField(i, row.getField(i));
        }
        held.add(copy);
    }

    /** The rows held, in their order. */
    List<Row> held() {
        return held;
    }

    /** Whether the gate is open at `nowMs` with the rows it holds, and why. */
    Opened opened(long nowMs) {
        return opened(nowMs, held.size());
    }

    /** A record of an awaited partition before its backlog's end came at `nowMs`: still being read. */
    void registration(long nowMs) {
        lastSignalMs = Math.max(lastSignalMs, nowMs);
    }

    /** Partition `partition`'s backlog has been read through its last record (at `nowMs`). */
    void backlogRead(int partition, long nowMs) {
        awaited.remove(partition);
        registration(nowMs);
    }

    /** Whether the gate is open at `nowMs` with `held` rows held, and why. */
    Opened opened(long nowMs, int held) {
        if (awaited.isEmpty()) {
            return Opened.BACKLOG_REGISTERED;
        }
        if (silenceMs > 0 && nowMs - lastSignalMs >= silenceMs) {
            return Opened.SILENCE;
        }
        return held >= maxHeld ? Opened.FULL : Opened.NOT_YET;
    }

    /** The partitions not yet read through their backlog (for the log). */
    Set<Integer> waitingFor() {
        return Set.copyOf(awaited);
    }
}
