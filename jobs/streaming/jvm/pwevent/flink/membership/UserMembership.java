package pwevent.flink.membership;

import pwevent.flink.contract.Reasons;
import pwevent.flink.parsing.RequirementPayload;
import pwevent.flink.time.SlotRules;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * What {@link Membership} keeps for one user (tests/user_membership.py, {@code UserMembership}, the
 * reference it is tested equal to on tests/streaming/data/membership-scenarios.jsonl): the user's
 * {@link MembershipRule.State}, the requirement records of slots that have not closed, and the first
 * slot the user was present in without a class (only with a default requirement).
 *
 * <p>A record counts from its own slot if it arrives before that slot closes (the watermark passes
 * the slot's last millisecond); later it is {@code late}. When a slot closes, the records of the slots
 * up to it are applied in (slot, time, partition, offset) order, so the outcome does not depend on
 * the order Kafka delivered them in; a pending presence applies the default after the records of
 * its own slot. Of the records from before the origin (in force from slot 1) that a ledger can run,
 * only the latest applies; the earlier ones are {@code superseded_before_origin}
 * ({@code Membership.superseded} in jobs/common/membership.py).
 */
public final class UserMembership {
    /** A record waiting for its slot to close. */
    public record Pending(long slot, long timeMs, int partition, long offset, RequirementPayload payload) {
    }

    /** A record that did not apply: why, and where it was read. */
    public record Rejection(String reason, String detail, int partition, long offset, byte[] original) {
    }

    private static final byte VERSION = 1;
    private static final Comparator<Object[]> DUE = Comparator.<Object[]>comparingLong(d -> (Long) d[0])
            .thenComparing(d -> d[1] == null)
            .thenComparingLong(d -> d[1] == null ? 0 : ((Pending) d[1]).timeMs())
            .thenComparingInt(d -> d[1] == null ? 0 : ((Pending) d[1]).partition())
            .thenComparingLong(d -> d[1] == null ? 0 : ((Pending) d[1]).offset());

    private MembershipRule.State state = MembershipRule.State.NONE;
    private final List<Pending> pending = new ArrayList<>();
    private Long seenAt;

    public MembershipRule.State state() {
        return state;
    }

    /** Buffer `record` until its slot closes, or refuse it as late if the slot has closed. */
    public Rejection receive(Pending record, long watermarkMs, long originMs, long slotMs) {
        if (SlotRules.closed(record.slot(), watermarkMs, originMs, slotMs)) {
            return new Rejection(Reasons.LATE, Reasons.lateRequirementDetail(record.slot()), record.partition(),
                    record.offset(), record.payload().original());
        }
        pending.add(record);
        return null;
    }

    /** The user is present at `slot` (only with a default requirement): true when the default may
     *  register the user as `slot` closes (the caller sets a timer for it). */
    public boolean seen(long slot) {
        if (state.classId() != null || seenAt != null && seenAt <= slot) {
            return false;
        }
        seenAt = slot;
        return true;
    }

    /** Apply the records of slots up to `slot`: the changes ({@link MembershipRule.Change}) and
     *  refusals ({@link Rejection}) in that order; `originMs`: where slot 1 starts. */
    public List<Object> close(long slot, String user, MembershipRule rule, long originMs) {
        List<Object[]> due = new ArrayList<>();
        pending.removeIf(p -> {
            if (p.slot() > slot) {
                return false;
            }
            due.add(new Object[] {p.slot(), p});
            return true;
        });
        if (seenAt != null && seenAt <= slot) {
            due.add(new Object[] {seenAt, null});
            seenAt = null;
        }
        due.sort(DUE);
        Pending inForce = null;  // the latest record from before the origin that a ledger can run
        for (Object[] item : due) {
            if (item[1] instanceof Pending p && early(p, originMs)) {
                inForce = p;
            }
        }
        List<Object> out = new ArrayList<>();
        for (Object[] item : due) {
            Pending record = (Pending) item[1];
            if (record != null && record != inForce && early(record, originMs)) {
                out.add(new Rejection(Reasons.SUPERSEDED_BEFORE_ORIGIN, Reasons.SUPERSEDED_BEFORE_ORIGIN_DETAIL,
                        record.partition(), record.offset(), record.payload().original()));
                continue;
            }
            MembershipRule.Applied applied = record == null ? rule.applyDefault(user, state, (Long) item[0])
                    : rule.apply(user, state, record.slot(), record.payload());
            if (applied == null) {
                continue;
            }
            state = applied.state();
            if (applied.change() != null) {
                out.add(applied.change());
            }
            if (applied.reason() != null) {
                out.add(new Rejection(applied.reason(), applied.detail(), record.partition(), record.offset(),
                        record.payload().original()));
            }
        }
        return out;
    }

    private static boolean early(Pending record, long originMs) {
        return record.timeMs() < originMs && record.payload().registers();
    }

    public boolean empty() {
        return state.declared() == null && pending.isEmpty() && seenAt == null;
    }

    public byte[] encode() {
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.writeByte(VERSION);
            writeText(out, state.declared());
            writeText(out, state.classId());
            writeText(out, state.requirement());
            out.writeLong(seenAt == null ? Long.MIN_VALUE : seenAt);
            out.writeInt(pending.size());
            for (Pending p : pending) {
                out.writeLong(p.slot());
                out.writeLong(p.timeMs());
                out.writeInt(p.partition());
                out.writeLong(p.offset());
                byte[] payload = p.payload().encode();
                out.writeInt(payload.length);
                out.write(payload);
            }
            return bytes.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    public static UserMembership decode(byte[] data) {
        UserMembership user = new UserMembership();
        if (data == null) {
            return user;
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
            byte version = in.readByte();
            if (version != VERSION) {
                throw new IllegalStateException("membership state of version " + version + "; this release reads "
                        + VERSION);
            }
            user.state = new MembershipRule.State(readText(in), readText(in), readText(in));
            long seen = in.readLong();
            user.seenAt = seen == Long.MIN_VALUE ? null : seen;
            for (int n = in.readInt(); n > 0; n--) {
                long slot = in.readLong();
                long time = in.readLong();
                int partition = in.readInt();
                long offset = in.readLong();
                byte[] payload = new byte[in.readInt()];
                in.readFully(payload);
                user.pending.add(new Pending(slot, time, partition, offset, RequirementPayload.decode(payload)));
            }
            return user;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void writeText(DataOutputStream out, String text) throws IOException {
        out.writeBoolean(text != null);
        if (text != null) {
            out.writeUTF(text);
        }
    }

    private static String readText(DataInputStream in) throws IOException {
        return in.readBoolean() ? in.readUTF() : null;
    }
}
