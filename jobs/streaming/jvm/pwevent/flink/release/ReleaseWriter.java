package pwevent.flink.release;

import pwevent.flink.contract.PopulationOutRow;
import pwevent.flink.contract.Routes;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * Writes the Population's releases to the release topic, and its spend-log lines to the audit topic,
 * once the checkpoint that holds them has completed (docs/streaming.md, "A slot's outcome is drawn
 * once"). Its input is the Population's output, {@link PopulationOutRow}; it takes the rows of the
 * release route (k the slot, v the record) and of the audit route (v lines) into its
 * {@link ReleaseLog} and writes nothing downstream.
 *
 * <ul>
 *   <li>A release is written, in a transaction of its own producer, when a checkpoint at or after the
 *       one that first held it completes. Until then no reader can see it, so a failure before that
 *       only loses a draw nobody saw: the restored Population decides the slot again. The spend-log
 *       lines that came before it go in the same transaction: a release is committed exactly when
 *       its lines are, however late a restore comes.</li>
 *   <li>Restored, it opens its producer (fencing the failed task's and aborting what it left open),
 *       reads what the topic holds of the slots it holds, drops those already committed with the
 *       same bytes and writes the rest at once: every copy of a slot, committed or aborted, holds
 *       the same bytes.</li>
 *   <li>A restored state older than the topic (the topic holds a record, committed or aborted, of a
 *       slot past the last one this state accepted, or another record of a held slot) fails the job
 *       without restarts: its Population would draw those slots again.</li>
 *   <li>A topic that cannot be reached keeps the releases held; the next completed checkpoint tries
 *       again with a new producer, after reading what the topic got.</li>
 * </ul>
 */
public final class ReleaseWriter extends AbstractStreamOperator<Void> implements OneInputStreamOperator<Row, Void> {
    private static final long serialVersionUID = 1L;
    private static final ListStateDescriptor<byte[]> STATE =
            new ListStateDescriptor<>("releases", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO);

    private final ReleaseTopic.Factory topics;
    private transient ListState<byte[]> state;
    private transient ReleaseLog log;
    private transient boolean restored;
    private transient ReleaseTopic topic;
    /** The last write failed: the next one opens a new producer (fencing the old one). */
    private transient boolean failed;
    /** The topic may hold records of the held slots that this writer did not see written (before its
     *  first write, and after a failed one), so the next write first reads what it has. */
    private transient boolean unchecked;

    ReleaseWriter(ReleaseTopic.Factory topics) {
        this.topics = topics;
    }

    /** The writer of `population`'s release rows to `releaseTopic` and its audit rows to `auditTopic`,
     *  with the Kafka clients' `properties` and the producer's `transactionalId`; parallelism 1, ended
     *  by a discarding sink (returned, for its uid). */
    public static SingleOutputStreamOperator<Void> apply(DataStream<Row> population, Map<String, String> properties,
            String releaseTopic, String auditTopic, String transactionalId) {
        ReleaseWriter writer = new ReleaseWriter(
                new KafkaReleaseTopic.Factory(properties, releaseTopic, auditTopic, transactionalId));
        SingleOutputStreamOperator<Void> written = population.transform("write releases", Types.VOID, writer)
                .setParallelism(1).setMaxParallelism(1);
        written.sinkTo(new DiscardingSink<>()).name("releases written").uid("release-writer-end").setParallelism(1);
        return written;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        state = context.getOperatorStateStore().getListState(STATE);
        Iterator<byte[]> stored = state.get().iterator();
        restored = stored.hasNext();  // until the first read of the topic after the restore
        log = restored ? ReleaseLog.decode(stored.next()) : new ReleaseLog();
    }

    @Override
    public void open() throws Exception {
        super.open();
        unchecked = true;  // the first write reads the topic first, whatever started this writer
        if (restored) {
            try {
                topic = topics.open();
                send(log.held());
            } catch (ReleaseTopic.Unavailable e) {
                LOG.warn("release topic unavailable after the restore; the releases stay held", e);
                failed = true;
            }
        }
    }

    @Override
    public void processElement(StreamRecord<Row> element) {
        Row row = element.getValue();
        Object route = row.getField(PopulationOutRow.ROUTE);
        if (Routes.RELEASE.equals(route)) {
            log.accept(Long.parseLong((String) row.getField(PopulationOutRow.K)),
                    ((String) row.getField(PopulationOutRow.V)).getBytes(StandardCharsets.UTF_8));
        } else if (Routes.AUDIT.equals(route)) {
            log.audit((String) row.getField(PopulationOutRow.V));
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        log.mark(context.getCheckpointId());
        state.update(List.of(log.encode()));
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        super.notifyCheckpointComplete(checkpointId);
        List<ReleaseLog.Release> due = log.due(checkpointId);
        if (due.isEmpty()) {
            return;
        }
        try {
            if (topic == null || failed) {
                reopen();
            }
            send(due);
        } catch (ReleaseTopic.Unavailable e) {
            LOG.warn("release topic unavailable; {} releases stay held until a later checkpoint", log.held().size(), e);
            failed = true;
        }
    }

    /** A new producer, fencing the last one if there was one. */
    private void reopen() throws ReleaseTopic.Unavailable {
        if (topic != null) {
            topic.close();
            topic = null;
        }
        topic = topics.open();
    }

    /** Writes `releases` (a prefix of the held ones) in one transaction; before the first write and
     *  after a failed one, first drops what the topic already has (a conflict fails the job without
     *  restarts). */
    private void send(List<ReleaseLog.Release> releases) throws ReleaseTopic.Unavailable {
        List<ReleaseLog.Release> rest = releases;
        if (unchecked) {
            int before = log.held().size();
            try {
                long from = log.checkFrom();
                log.reconcile(topic.recordsFrom(from, true), topic.recordsFrom(from, false), restored);
            } catch (ReleaseLog.Conflict e) {
                throw new SuppressRestartsException(new IllegalStateException("refusing to start: " + e.getMessage()
                        + "; restore the newest checkpoint or savepoint (docs/streaming.md, 'A slot's outcome is "
                        + "drawn once')", e));
            }
            rest = releases.subList(Math.min(releases.size(), before - log.held().size()), releases.size());
            unchecked = log.accepted() == 0;  // until a release of its own was checked against the topic
            restored = false;
        }
        if (!rest.isEmpty()) {
            try {
                topic.write(rest);
            } catch (ReleaseTopic.Unavailable e) {
                unchecked = true;
                throw e;
            }
            failed = false;
            log.delivered(rest.size());
        }
    }

    @Override
    public void close() throws Exception {
        if (topic != null) {
            topic.close();
        }
        super.close();
    }
}
