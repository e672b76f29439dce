package pwevent.flink.time;

import pwevent.flink.contract.Limits;

/**
 * The slot rules the JVM operators share, each the Java side of a Python rule and tested equal to it
 * (jobs/streaming/jvm-test/pwevent/flink/time/SlotRulesTest.java and tests/streaming/test_slot_rules.py
 * on tests/streaming/data/slot-rules.tsv; tests/streaming/test_valid_time.py against the replay):
 * time -> slot, a slot's last millisecond, and whether a record of a slot comes after its slot
 * closed. Slots of `slotMs`
 * from `originMs`, numbered from {@link Limits#FIRST_SLOT} (docs/streaming.md, "Time").
 */
public final class SlotRules {
    private SlotRules() {
    }

    /** The slot holding {@code time}: jobs/common/slots.py's {@code SlotClock.slot_of}. */
    public static long slotOf(long originMs, long slotMs, long time) {
        return Math.floorDiv(time - originMs, slotMs) + Limits.FIRST_SLOT;
    }

    /** The slot a requirement record of {@code time} is in force from: {@code SlotClock.in_force_from}
     *  (its own slot; the first slot for a record from before the origin). */
    public static long inForceFrom(long originMs, long slotMs, long time) {
        return Math.max(Limits.FIRST_SLOT, slotOf(originMs, slotMs, time));
    }

    /** The first millisecond of slot {@code slot}: {@code SlotClock.start_ms}. */
    public static long firstMs(long originMs, long slotMs, long slot) {
        return originMs + (slot - Limits.FIRST_SLOT) * slotMs;
    }

    /** The last millisecond of slot {@code slot}: {@code SlotClock.end_ms} - 1. */
    public static long lastMs(long originMs, long slotMs, long slot) {
        return firstMs(originMs, slotMs, slot + 1) - 1;
    }

    /** The last millisecond of the slot holding {@code time}. */
    public static long slotLastMs(long originMs, long slotMs, long time) {
        return lastMs(originMs, slotMs, slotOf(originMs, slotMs, time));
    }

    /** Whether a registration of `slot` comes after its slot closed at `watermarkMs`: Membership's
     *  rule for a late requirement record (tests/user_membership.py, `UserMembership.receive`). */
    public static boolean closed(long slot, long watermarkMs, long originMs, long slotMs) {
        return lastMs(originMs, slotMs, slot) <= watermarkMs;
    }
}
