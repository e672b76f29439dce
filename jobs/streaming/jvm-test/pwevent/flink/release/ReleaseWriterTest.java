package pwevent.flink.release;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.api.common.typeutils.base.VoidSerializer;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * ReleaseWriter and ReleaseLog (docs/streaming.md, "A slot's outcome is drawn once"): a release is
 * written only once the checkpoint holding it has completed, with the spend-log lines before it in
 * its transaction; a restore writes the held releases' same bytes and their lines, skipping those the
 * topic has; a state older than the topic is refused without restarts; an unreachable topic keeps
 * them held.
 */
class ReleaseWriterTest {
    /** A release topic in memory: its committed and its aborted messages. */
    static final class MemoryTopic implements ReleaseTopic {
        static final Map<String, MemoryTopic> TOPICS = new ConcurrentHashMap<>();
        final List<ReleaseLog.Release> committed = new ArrayList<>();
        final List<ReleaseLog.Release> aborted = new ArrayList<>();
        int opened;
        int failWrites;
        int failAfterCommit;

        @Override
        public Map<Long, List<byte[]>> recordsFrom(long fromSlot, boolean onlyCommitted) {
            Map<Long, List<byte[]>> out = new HashMap<>();
            List<ReleaseLog.Release> all = new ArrayList<>(committed);
            if (!onlyCommitted) {
                all.addAll(aborted);
            }
            all.stream().filter(r -> r.slot() >= fromSlot)
                    .forEach(r -> out.computeIfAbsent(r.slot(), k -> new ArrayList<>()).add(r.value()));
            return out;
        }

        @Override
        public void write(List<ReleaseLog.Release> releases) throws Unavailable {
            if (failWrites > 0) {
                failWrites--;
                throw new Unavailable("down", null);
            }
            committed.addAll(releases);
            if (failAfterCommit > 0) {  // committed, but the answer was lost
                failAfterCommit--;
                throw new Unavailable("timed out", null);
            }
        }

        @Override
        public void close() {}

        List<Long> slots() {
            return committed.stream().map(ReleaseLog.Release::slot).toList();
        }
    }

    /** Opens the in-memory topic of its name, counting the openings. */
    record Topics(String name) implements ReleaseTopic.Factory {
        @Override
        public ReleaseTopic open() {
            MemoryTopic topic = MemoryTopic.TOPICS.computeIfAbsent(name, n -> new MemoryTopic());
            topic.opened++;
            return topic;
        }
    }

    static OneInputStreamOperatorTestHarness<Row, Void> writer(String topic, OperatorSubtaskState state)
            throws Exception {
        var harness = new OneInputStreamOperatorTestHarness<Row, Void>(new ReleaseWriter(new Topics(topic)));
        harness.setup(VoidSerializer.INSTANCE);
        if (state != null) {
            harness.initializeState(state);
        }
        harness.open();
        return harness;
    }

    static StreamRecord<Row> release(long slot, String counts) {
        String line = "{\"slot\":" + slot + ",\"counts\":" + counts + "}";
        return new StreamRecord<>(Row.of("release", Long.toString(slot), line));
    }

    /** A message of the topic: the record of `slot` with `counts`, as `release` writes it. */
    static ReleaseLog.Release message(long slot, String counts) {
        return new ReleaseLog.Release(slot, ((String) release(slot, counts).getValue().getField(2))
                .getBytes(StandardCharsets.UTF_8), List.of(), 0);
    }

    static StreamRecord<Row> audit(String lines) {
        return new StreamRecord<>(Row.of("audit", null, lines));
    }

    /** The spend-log lines committed with the `i`th committed release. */
    static List<String> lines(MemoryTopic topic, int i) {
        return topic.committed.get(i).lines().stream().map(b -> new String(b, StandardCharsets.UTF_8)).toList();
    }

    static List<String> text(List<byte[]> lines) {
        return lines.stream().map(b -> new String(b, StandardCharsets.UTF_8)).toList();
    }

    /** The state of a writer of `topic` that holds the release of slot 1 (counts [1,1]), not yet written. */
    static OperatorSubtaskState holdingSlotOne(String topic) throws Exception {
        var w = writer(topic, null);
        w.processElement(release(1, "[1,1]"));
        OperatorSubtaskState one = w.snapshot(1, 1);
        w.close();
        return one;
    }

    static String value(MemoryTopic topic, int i) {
        return new String(topic.committed.get(i).value(), StandardCharsets.UTF_8);
    }

    static MemoryTopic topic(String name) {
        return MemoryTopic.TOPICS.computeIfAbsent(name, n -> new MemoryTopic());
    }

    @Test
    void aReleaseIsWrittenOnlyOnceItsCheckpointHasCompleted() throws Exception {
        var w = writer("only-once", null);
        w.processElement(new StreamRecord<>(Row.of("audit", null, "line")));
        w.processElement(release(1, "[3,4]"));
        w.processElement(release(2, "[5,6]"));
        assertEquals(List.of(), topic("only-once").slots(), "nothing before a checkpoint");
        w.snapshot(1, 1);
        w.processElement(release(3, "[7,8]"));
        assertEquals(List.of(), topic("only-once").slots(), "nothing before the checkpoint completes");
        w.notifyOfCompletedCheckpoint(1);
        assertEquals(List.of(1L, 2L), topic("only-once").slots(), "the checkpoint's releases, not slot 3");
        w.snapshot(2, 2);
        w.notifyOfCompletedCheckpoint(2);
        assertEquals(List.of(1L, 2L, 3L), topic("only-once").slots());
        assertEquals("{\"slot\":3,\"counts\":[7,8]}", value(topic("only-once"), 2));
        w.close();
    }

    @Test
    void aRestoreWritesTheHeldReleasesSameBytesAndNothingTwice() throws Exception {
        var w = writer("restore", null);
        w.processElement(release(1, "[1,1]"));
        w.snapshot(1, 1);
        w.notifyOfCompletedCheckpoint(1);
        w.processElement(release(2, "[2,2]"));
        w.processElement(release(3, "[3,3]"));
        OperatorSubtaskState two = w.snapshot(2, 2);
        w.processElement(release(4, "[4,4]"));  // decided after checkpoint 2, then the task dies: never seen
        w.close();
        // Killed before checkpoint 2's notification: the restore writes slots 2 and 3 at once.
        var restored = writer("restore", two);
        assertEquals(List.of(1L, 2L, 3L), topic("restore").slots());
        assertEquals("{\"slot\":2,\"counts\":[2,2]}", value(topic("restore"), 1));
        restored.processElement(release(4, "[9,9]"));  // decided again: nobody saw the first draw
        OperatorSubtaskState three = restored.snapshot(3, 3);
        restored.notifyOfCompletedCheckpoint(3);
        restored.close();
        assertEquals(List.of(1L, 2L, 3L, 4L), topic("restore").slots());
        // Killed after checkpoint 3's write, before checkpoint 4: the restore finds slot 4 on the topic.
        var again = writer("restore", three);
        assertEquals(List.of(1L, 2L, 3L, 4L), topic("restore").slots(), "nothing written twice");
        again.processElement(release(5, "[5,5]"));
        again.snapshot(4, 4);
        again.notifyOfCompletedCheckpoint(4);
        assertEquals(List.of(1L, 2L, 3L, 4L, 5L), topic("restore").slots());
        again.close();
    }

    @Test
    void theSpendLinesGoInTheTransactionOfTheNextRelease() throws Exception {
        var w = writer("lines", null);
        w.processElement(audit("a1\na2"));
        w.processElement(release(1, "[1,1]"));
        w.processElement(audit("b1"));
        w.processElement(new StreamRecord<>(Row.of("dead", null, "not a line")));
        w.processElement(release(2, "[2,2]"));
        w.processElement(audit("c1"));  // after the last release: waits for the next one
        OperatorSubtaskState one = w.snapshot(1, 1);
        w.notifyOfCompletedCheckpoint(1);
        assertEquals(List.of(1L, 2L), topic("lines").slots());
        assertEquals(List.of("a1", "a2"), lines(topic("lines"), 0));
        assertEquals(List.of("b1"), lines(topic("lines"), 1));
        w.close();
        // Restored from checkpoint 1, whose releases the topic has: the pending line survives the
        // restore, is written with the next release, and nothing is written twice.
        var restored = writer("lines", one);
        assertEquals(List.of(1L, 2L), topic("lines").slots(), "nothing written twice");
        restored.processElement(release(3, "[3,3]"));
        restored.snapshot(2, 2);
        restored.notifyOfCompletedCheckpoint(2);
        assertEquals(List.of(1L, 2L, 3L), topic("lines").slots());
        assertEquals(List.of("c1"), lines(topic("lines"), 2));
        restored.close();
    }

    @Test
    void aRestoreLaterThanAnyTransactionTimeoutLosesNoLine() throws Exception {
        // Killed after checkpoint 1 completed, before its write: whatever Kafka did with an open
        // transaction meanwhile, the restore writes the held releases with their lines, in one piece.
        var w = writer("late-restore", null);
        w.processElement(audit("spend 1"));
        w.processElement(release(1, "[1,1]"));
        w.processElement(audit("spend 2a\nspend 2b"));
        w.processElement(release(2, "[2,2]"));
        OperatorSubtaskState one = w.snapshot(1, 1);
        w.close();
        topic("late-restore").aborted.add(message(1, "[1,1]"));  // an aborted earlier attempt
        var restored = writer("late-restore", one);
        assertEquals(List.of(1L, 2L), topic("late-restore").slots());
        assertEquals(List.of("spend 1"), lines(topic("late-restore"), 0));
        assertEquals(List.of("spend 2a", "spend 2b"), lines(topic("late-restore"), 1));
        restored.close();
    }

    @Test
    void auditTextIsSplitAtNewlinesOnly() {
        ReleaseLog log = new ReleaseLog();
        log.audit("{\"a\":1}");
        log.audit("a\nb");
        log.audit("c\n\nd\r\u2028");
        assertEquals(List.of("{\"a\":1}", "a", "b", "c", "", "d\r\u2028"), text(log.pending()));
        log.accept(1, new byte[] {1});
        assertEquals(List.of(), log.pending());
        assertEquals(6, log.held().get(0).lines().size());
    }

    @Test
    void aStateOlderThanTheTopicIsRefusedWithoutRestarts() throws Exception {
        var w = writer("older", null);
        w.processElement(release(1, "[1,1]"));
        OperatorSubtaskState one = w.snapshot(1, 1);
        w.notifyOfCompletedCheckpoint(1);
        w.processElement(release(2, "[2,2]"));
        w.snapshot(2, 2);
        w.notifyOfCompletedCheckpoint(2);
        w.close();
        Exception refused = assertThrows(SuppressRestartsException.class, () -> writer("older", one));
        assertTrue(refused.getCause().getMessage().startsWith("refusing to start: the restored state decided slots "
                + "up to 1 but the release topic already holds slot 2"), refused.getCause().getMessage());
        assertEquals(List.of(1L, 2L), topic("older").slots());
    }

    @Test
    void anAbortedRecordOfALaterSlotRefusesAnOlderState() throws Exception {
        var w = writer("aborted", null);
        w.processElement(release(1, "[1,1]"));
        OperatorSubtaskState one = w.snapshot(1, 1);
        w.notifyOfCompletedCheckpoint(1);
        w.close();
        // A later checkpoint's write of slot 2 was aborted (the task died before its commit): readers
        // at read_uncommitted saw it, so an older state must not draw slot 2 again.
        topic("aborted").aborted.add(message(2, "[2,2]"));
        Exception refused = assertThrows(SuppressRestartsException.class, () -> writer("aborted", one));
        assertTrue(refused.getCause().getMessage().contains("already holds slot 2"), refused.getCause().getMessage());
    }

    @Test
    void anAbortedCopyOfAHeldReleaseIsWrittenAgainWithTheSameBytes() throws Exception {
        OperatorSubtaskState one = holdingSlotOne("copy");
        topic("copy").aborted.add(message(1, "[1,1]"));
        writer("copy", one).close();
        assertEquals(List.of(1L), topic("copy").slots(), "committed once, the same bytes as the aborted copy");
        topic("copy").aborted.set(0, message(1, "[0,0]"));
        assertThrows(SuppressRestartsException.class, () -> writer("copy", one), "an aborted copy with other bytes");
    }

    @Test
    void aWriterWithoutStateRefusesToWriteOverAnotherOutcomeOfItsSlot() throws Exception {
        // A job started without state (kafka.resume_after_last_release) after one that died while
        // writing slot 3: readers saw that draw, so this job must not publish another one.
        topic("fresh").aborted.add(message(3, "[0,0]"));
        var w = writer("fresh", null);
        w.processElement(release(3, "[3,3]"));
        w.snapshot(1, 1);
        assertThrows(SuppressRestartsException.class, () -> w.notifyOfCompletedCheckpoint(1));
        assertEquals(List.of(), topic("fresh").slots());
    }

    @Test
    void aRestoredStateThatAcceptedNothingMeetsTheByteCheckOnly() throws Exception {
        // A new job over an old topic, restarted from a checkpoint taken before its first release: the
        // Population's refusal to start twice speaks first; a slot it would draw again is refused.
        topic("empty").committed.add(message(1, "[0,0]"));
        var w = writer("empty", null);
        OperatorSubtaskState none = w.snapshot(1, 1);
        w.close();
        var restored = writer("empty", none);
        restored.processElement(release(1, "[1,1]"));
        restored.snapshot(2, 2);
        assertThrows(SuppressRestartsException.class, () -> restored.notifyOfCompletedCheckpoint(2));
        assertEquals(List.of(1L), topic("empty").slots());
    }

    @Test
    void anotherRecordOfAHeldSlotOnTheTopicIsRefused() throws Exception {
        OperatorSubtaskState one = holdingSlotOne("other");
        topic("other").committed.add(message(1, "[0,0]"));
        Exception refused = assertThrows(SuppressRestartsException.class, () -> writer("other", one));
        assertTrue(refused.getCause().getMessage().contains("another record of slot 1"));
    }

    @Test
    void anUnreachableTopicKeepsTheReleasesHeldAndALostAnswerWritesNothingTwice() throws Exception {
        var w = writer("down", null);
        w.processElement(release(1, "[1,1]"));
        w.snapshot(1, 1);
        topic("down").failWrites = 1;
        w.notifyOfCompletedCheckpoint(1);
        assertEquals(List.of(), topic("down").slots());
        w.processElement(release(2, "[2,2]"));
        w.snapshot(2, 2);
        topic("down").failAfterCommit = 1;
        w.notifyOfCompletedCheckpoint(2);
        assertEquals(List.of(1L, 2L), topic("down").slots());
        w.processElement(release(3, "[3,3]"));
        w.snapshot(3, 3);
        w.notifyOfCompletedCheckpoint(3);
        assertEquals(List.of(1L, 2L, 3L), topic("down").slots(), "slots 1 and 2 not again");
        assertEquals(3, topic("down").opened, "a new producer after each failed write");
        w.close();
    }

    @Test
    void aSlotDecidedTwiceIsRefused() {
        ReleaseLog log = new ReleaseLog();
        log.accept(4, new byte[] {1});
        assertThrows(IllegalStateException.class, () -> log.accept(4, new byte[] {2}));
        assertThrows(IllegalStateException.class, () -> log.accept(3, new byte[] {2}));
    }

    @Test
    void theStateRoundTripsAndNamesItsVersion() {
        ReleaseLog log = new ReleaseLog();
        log.audit("x\ny");
        log.accept(7, new byte[] {1, 2});
        log.mark(3);
        log.accept(8, new byte[] {});
        log.audit("z");
        ReleaseLog back = ReleaseLog.decode(log.encode());
        assertEquals(8, back.accepted());
        assertEquals(List.of(7L, 8L), back.held().stream().map(ReleaseLog.Release::slot).toList());
        assertEquals(List.of(3L, ReleaseLog.UNMARKED), back.held().stream().map(ReleaseLog.Release::mark).toList());
        assertArrayEquals(new byte[] {1, 2}, back.held().get(0).value());
        assertEquals(List.of("x", "y"), text(back.held().get(0).lines()));
        assertEquals(List.of(), back.held().get(1).lines());
        assertEquals(List.of("z"), text(back.pending()));
        byte[] other = log.encode();
        other[3] = 9;
        Exception refused = assertThrows(IllegalStateException.class, () -> ReleaseLog.decode(other));
        assertTrue(refused.getMessage().contains("version 9"));
    }

    @Test
    void aStateOfVersionOneIsRead() throws Exception {
        // version 1 (before the spend lines went with the releases): accepted, then (slot, mark, value)
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(1);
            out.writeLong(5);
            out.writeInt(1);
            out.writeLong(5);
            out.writeLong(2);
            out.writeInt(2);
            out.write(new byte[] {7, 7});
        }
        ReleaseLog back = ReleaseLog.decode(bytes.toByteArray());
        assertEquals(5, back.accepted());
        assertEquals(List.of(5L), back.held().stream().map(ReleaseLog.Release::slot).toList());
        assertEquals(2L, back.held().get(0).mark());
        assertArrayEquals(new byte[] {7, 7}, back.held().get(0).value());
        assertEquals(List.of(), back.held().get(0).lines());
        assertEquals(List.of(), back.pending());
    }

    @Test
    void slotKeysAreDecimalNumbers() {
        assertEquals(12L, KafkaReleaseTopic.slotOf("12".getBytes(StandardCharsets.UTF_8)));
        assertEquals(null, KafkaReleaseTopic.slotOf("0".getBytes(StandardCharsets.UTF_8)));
        assertEquals(null, KafkaReleaseTopic.slotOf("-1".getBytes(StandardCharsets.UTF_8)));
        assertEquals(null, KafkaReleaseTopic.slotOf(null));
        assertEquals(null, KafkaReleaseTopic.slotOf("1234567890123456789".getBytes(StandardCharsets.UTF_8)));
    }
}
