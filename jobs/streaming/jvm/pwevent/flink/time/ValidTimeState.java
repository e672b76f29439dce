package pwevent.flink.time;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.OperatorStateStore;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.types.Row;

/**
 * {@link ValidTime}'s operator state (docs/streaming.md, "Restored jobs"): the lead guard's
 * partitions and how far each partition was read ({@link ReadOffsets}). Restored into the objects the
 * operator works with, and written from them at every checkpoint. The state names are those of
 * every release so far: a savepoint restores into them. A release before 2026-12-06 also kept the
 * input-1 rows its registration gate held (judged once after a restore, then cleared) and, in
 * state this release does not read, the events passed on before their users registered and the
 * registered users themselves and how far the requirements were read (none of which decides
 * time any more).
 */
final class ValidTimeState {
    /** Written by releases before 2026-12-06 only. */
    private static final ListStateDescriptor<Row> HELD =
            new ListStateDescriptor<>("held before registration", ValidTime.IN);
    /** The lead guard's partitions (partition, latest, pending jump or Long.MIN_VALUE), every
     *  subtask's given to every subtask on a restore. */
    private static final ListStateDescriptor<Row> GUARD = new ListStateDescriptor<>("lead guard", new RowTypeInfo(
            new TypeInformation<?>[] {Types.INT, Types.LONG, Types.LONG},
            new String[] {"partition", "latest", "jump"}));
    /** Per partition of the input, the highest offset of its rows read (every subtask's given to
     *  every subtask on a restore). */
    private static final ListStateDescriptor<Row> INPUT_READ = ReadOffsets.descriptor("input read");

    private final ListState<Row> held;
    private final ListState<Row> guard;
    private final ListState<Row> inputRead;

    ValidTimeState(OperatorStateStore store) throws Exception {
        held = store.getListState(HELD);
        guard = store.getUnionListState(GUARD);
        inputRead = store.getUnionListState(INPUT_READ);
    }

    /** The rows an earlier release's registration gate held at the checkpoint, in their order
     *  (none without state, or from this release's). */
    List<Row> heldBefore() throws Exception {
        List<Row> rows = new ArrayList<>();
        for (Row row : held.get()) {
            rows.add(row);
        }
        return rows;
    }

    /** A lead guard of `maxLeadMs` with every subtask's partitions at the checkpoint. */
    LeadGuard guard(long maxLeadMs) throws Exception {
        LeadGuard restored = new LeadGuard(maxLeadMs);
        List<long[]> partitions = new ArrayList<>();
        for (Row row : guard.get()) {
            partitions.add(new long[] {(Integer) row.getField(0), (Long) row.getField(1), (Long) row.getField(2)});
        }
        restored.restore(partitions);
        return restored;
    }

    /** How far the input's rows had been read. */
    ReadOffsets inputRead() throws Exception {
        return ReadOffsets.restore(inputRead.get());
    }

    /** Write the operator's objects (`heldRows`: an earlier release's held rows not judged yet). */
    void snapshot(List<Row> heldRows, LeadGuard leadGuard, ReadOffsets inputReadTo) throws Exception {
        held.update(heldRows);
        List<Row> partitions = new ArrayList<>();
        for (long[] state : leadGuard.snapshot()) {
            partitions.add(Row.of((int) state[0], state[1], state[2]));
        }
        guard.update(partitions);
        inputReadTo.snapshot(inputRead);
    }
}
