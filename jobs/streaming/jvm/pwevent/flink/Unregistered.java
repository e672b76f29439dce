package pwevent.flink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.types.Row;

/**
 * The events {@link ValidTime} passed on before their users were known (docs/streaming.md, "Time"):
 * per slot, user and partition the latest such event (offset and time), so that a registration read
 * after them still lets them move time, as the replay counts them. The two topics are read
 * independently, and under load the requirements' registrations can reach ValidTime after a
 * whole backlog of events: without this, none of those events moved time, and a stream that then
 * went quiet closed no slot. A slot the watermark has closed is dropped (a registration for it counts
 * for nothing). Bounded like the slot window below, which holds every event of a user not known yet
 * until its slot closes. Checkpointed by ValidTime ({@link #rows}): after a restore, the events read
 * before it still move time when their users register.
 */
final class Unregistered {
    /** The type of {@link #rows}. */
    static final RowTypeInfo ROW = new RowTypeInfo(
            new TypeInformation<?>[] {Types.LONG, Types.STRING, Types.INT, Types.LONG, Types.LONG},
            new String[] {"slot", "user", "partition", "offset", "time"});
    /** slot -> user -> partition -> {offset, time} of the latest such event. */
    private final TreeMap<Long, Map<String, Map<Integer, long[]>>> bySlot = new TreeMap<>();

    /** An event of `user` at `time` (slot `slot`), partition `partition`, offset `offset`, whose
     *  user was not known when it passed. */
    void add(String user, long slot, int partition, long offset, long time) {
        Map<Integer, long[]> latest = bySlot.computeIfAbsent(slot, s -> new HashMap<>())
                .computeIfAbsent(user, u -> new HashMap<>());
        long[] seen = latest.get(partition);
        if (seen == null || time > seen[1]) {
            latest.put(partition, new long[] {offset, time});
        }
    }

    /** `user`'s events of slot `since` and later, removed: each as {partition, offset, time}. */
    List<long[]> claim(String user, long since) {
        List<long[]> found = new ArrayList<>();
        for (Map<String, Map<Integer, long[]>> users : bySlot.tailMap(since, true).values()) {
            Map<Integer, long[]> latest = users.remove(user);
            if (latest != null) {
                latest.forEach((partition, seen) -> found.add(new long[] {partition, seen[0], seen[1]}));
            }
        }
        return found;
    }

    /** Forget every slot up to `slot` (closed). */
    void closeThrough(long slot) {
        bySlot.headMap(slot, true).clear();
    }

    /** Every event held, as Row(slot, user, partition, offset, time) ({@link #ROW}): what {@link #add}
     *  takes back after a restore. */
    List<Row> rows() {
        List<Row> out = new ArrayList<>();
        bySlot.forEach((slot, users) -> users.forEach((user, latest) -> latest.forEach((partition, seen) ->
                out.add(Row.of(slot, user, partition, seen[0], seen[1])))));
        return out;
    }

    /** A row of {@link #rows} back. */
    void add(Row row) {
        add((String) row.getField(1), (Long) row.getField(0), (Integer) row.getField(2), (Long) row.getField(3),
                (Long) row.getField(4));
    }

    /** How many slots hold events (tests). */
    int slots() {
        return bySlot.size();
    }
}
