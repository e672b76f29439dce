package pwevent.flink.release;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The releases {@link ReleaseWriter} holds until the release topic has them (docs/streaming.md, "A
 * slot's outcome is drawn once"): each decided slot's record with the spend-log lines that came
 * before it, marked with the checkpoint that first held it, and the last slot ever accepted. A record
 * is due once its checkpoint has completed: from then on every restore holds these same bytes, so
 * whatever a reader saw of it (committed or in an aborted transaction) is what any later write
 * repeats. A release's lines are written in its transaction, so the audit topic has a release's
 * spend lines committed whenever the release topic has it committed. Lines that came after the
 * last release wait for the next one ({@link #pending}). Pure: no Flink, no Kafka.
 *
 * <p>State ({@link #encode} / {@link #decode}): version {@link #VERSION}, the last accepted slot,
 * the pending lines, then each held release as (slot, mark, value, lines); version 1 (no lines) is
 * read too.
 */
final class ReleaseLog {
    static final int VERSION = 2;
    /** The mark of a release no checkpoint holds yet. */
    static final long UNMARKED = -1;

    /** A slot's release record (its bytes as the topic gets them), the spend-log lines written in its
     *  transaction (to the audit topic) and the checkpoint that holds it. */
    record Release(long slot, byte[] value, List<byte[]> lines, long mark) {
        Release marked(long checkpointId) {
            return new Release(slot, value, lines, checkpointId);
        }

        String key() {
            return Long.toString(slot);
        }
    }

    /** The topic holds a release this state did not decide, or another version of one it did. */
    static final class Conflict extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Conflict(String message) {
            super(message);
        }
    }

    private final List<Release> held;
    private final List<byte[]> pending;
    private long accepted;

    ReleaseLog() {
        this(new ArrayList<>(), new ArrayList<>(), 0);
    }

    private ReleaseLog(List<Release> held, List<byte[]> pending, long accepted) {
        this.held = held;
        this.pending = pending;
        this.accepted = accepted;
    }

    /** The last slot accepted (0: none). */
    long accepted() {
        return accepted;
    }

    /** The releases held now, oldest first. */
    List<Release> held() {
        return List.copyOf(held);
    }

    /** The spend-log lines taken since the last release, waiting for the next one. */
    List<byte[]> pending() {
        return List.copyOf(pending);
    }

    /** Take spend-log lines, joined by '\n' (no other terminator counts; empty lines are lines): they
     *  are written with the next release. */
    void audit(String text) {
        int start = 0;
        for (int end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n', start)) {
            pending.add(text.substring(start, end).getBytes(StandardCharsets.UTF_8));
            start = end + 1;
        }
        pending.add(text.substring(start).getBytes(StandardCharsets.UTF_8));
    }

    /** Take the release of `slot`, with the lines pending; a slot at or before the last accepted one
     *  is a second outcome of a decided slot and is refused (IllegalStateException), never written. */
    void accept(long slot, byte[] value) {
        if (slot <= accepted) {
            throw new IllegalStateException("release of slot " + slot + " after slot " + accepted
                    + " was accepted: a slot's outcome is drawn once");
        }
        held.add(new Release(slot, value, List.copyOf(pending), UNMARKED));
        pending.clear();
        accepted = slot;
    }

    /** A checkpoint is taken: every release not yet marked is held by `checkpointId`. */
    void mark(long checkpointId) {
        held.replaceAll(r -> r.mark() == UNMARKED ? r.marked(checkpointId) : r);
    }

    /** The releases whose checkpoint is `completedId` or earlier (a prefix of {@link #held}). */
    List<Release> due(long completedId) {
        int n = 0;
        while (n < held.size() && held.get(n).mark() != UNMARKED && held.get(n).mark() <= completedId) {
            n++;
        }
        return List.copyOf(held.subList(0, n));
    }

    /** The first `n` held releases are on the topic (and their lines on the audit topic). */
    void delivered(int n) {
        held.subList(0, n).clear();
    }

    /** The slot from which the topic's committed releases tell this state something: the first held
     *  one, else the one after the last accepted. */
    long checkFrom() {
        return held.isEmpty() ? accepted + 1 : held.get(0).slot();
    }

    /**
     * Against what the release topic holds of the slots from {@link #checkFrom} (slot -> values in
     * offset order): `committed`, its committed records, and `seen`, every record any reader can see
     * (aborted ones too). Drops the held releases the topic has committed with the same bytes (their
     * lines were committed in the same transaction).
     * Throws {@link Conflict} when any record of a held slot has other bytes, and, for a `restored`
     * state that accepted a release, when the topic holds any record of a slot past the last one
     * accepted (the state is older than the topic: its population would draw those slots again). A
     * state that accepted none (a job's checkpoint before its first release, say one whose
     * Population refused to start) tells nothing of the topic: its slots meet the byte check when
     * they come.
     */
    void reconcile(Map<Long, List<byte[]>> committed, Map<Long, List<byte[]>> seen, boolean restored) {
        long newest = seen.keySet().stream().mapToLong(Long::longValue).max().orElse(0);
        if (restored && accepted > 0 && newest > accepted) {
            throw new Conflict("the restored state decided slots up to " + accepted + " but the release topic "
                    + "already holds slot " + newest + ": the state is older than the release topic");
        }
        for (Release release : held) {
            for (byte[] there : seen.getOrDefault(release.slot(), List.of())) {
                if (!Arrays.equals(there, release.value())) {
                    throw new Conflict("the release topic holds another record of slot " + release.slot()
                            + " than this job's state decided");
                }
            }
        }
        int n = 0;
        while (n < held.size() && committed.containsKey(held.get(n).slot())) {
            n++;
        }
        delivered(n);
    }

    byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(VERSION);
            out.writeLong(accepted);
            writeAll(out, pending);
            out.writeInt(held.size());
            for (Release release : held) {
                out.writeLong(release.slot());
                out.writeLong(release.mark());
                writeBytes(out, release.value());
                writeAll(out, release.lines());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static void writeAll(DataOutputStream out, List<byte[]> all) throws IOException {
        out.writeInt(all.size());
        for (byte[] bytes : all) {
            writeBytes(out, bytes);
        }
    }

    private static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readInt()];
        in.readFully(bytes);
        return bytes;
    }

    private static List<byte[]> readAll(DataInputStream in) throws IOException {
        int n = in.readInt();
        List<byte[]> all = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            all.add(readBytes(in));
        }
        return all;
    }

    /** A log of version 2, or of version 1 (written before the spend lines went with the releases:
     *  its releases have none, and nothing is pending). */
    static ReleaseLog decode(byte[] data) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
            int version = in.readInt();
            if (version != VERSION && version != 1) {
                throw new IllegalStateException("release writer state of version " + version + "; this release reads "
                        + "versions 1 and " + VERSION);
            }
            long accepted = in.readLong();
            List<byte[]> pending = version == 1 ? new ArrayList<>() : readAll(in);
            int n = in.readInt();
            List<Release> held = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                long slot = in.readLong();
                long mark = in.readLong();
                byte[] value = readBytes(in);
                held.add(new Release(slot, value, version == 1 ? List.of() : List.copyOf(readAll(in)), mark));
            }
            return new ReleaseLog(held, pending, accepted);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
