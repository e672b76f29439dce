package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** LeadGuard (docs/streaming.md, "Time"): what a partition's event time believes. */
class LeadGuardTest {
    private static final long NOW = 1_800_000_000_000L;
    private static final long LEAD = 60_000L;

    @Test
    void aLoneRecordFarAheadIsNotBelievedAndASecondOneConfirmsTheJump() {
        LeadGuard guard = new LeadGuard(LEAD);
        long t = NOW - 10 * LEAD;
        assertTrue(guard.believe(0, t, NOW));
        assertFalse(guard.believe(0, t + 5 * LEAD, NOW), "a jump past maxLead, alone");
        assertTrue(guard.believe(0, t + 10, NOW), "the stream goes on where it was");
        assertFalse(guard.believe(0, t + 5 * LEAD, NOW), "the same jump again, first of its kind again");
        assertTrue(guard.believe(0, t + 5 * LEAD + LEAD / 2, NOW), "a second record within maxLead confirms it");
    }

    @Test
    void partitionsAreJudgedApart() {
        LeadGuard guard = new LeadGuard(LEAD);
        assertTrue(guard.believe(0, NOW - 100 * LEAD, NOW));
        assertTrue(guard.believe(1, NOW - LEAD, NOW), "partition 1's first record is its own");
    }

    @Test
    void timesPastTheWallClockOrOutsideTheYearsOneToNineThousandNineHundredNinetyNineAreNotBelieved() {
        LeadGuard guard = new LeadGuard(LEAD);
        assertFalse(guard.believe(0, NOW + LEAD + 1, NOW));
        assertTrue(guard.believe(0, NOW + LEAD, NOW));
        assertFalse(guard.believe(1, null, NOW));
        assertFalse(guard.believe(1, 253_402_300_800_000L, NOW));
        assertFalse(guard.believe(1, -62_135_596_800_001L, NOW));
    }

    @Test
    void aRestoredGuardJudgesAsTheOneItWasTakenFrom() {
        LeadGuard guard = new LeadGuard(LEAD);
        long t = NOW - 10 * LEAD;
        assertTrue(guard.believe(0, t, NOW));
        assertTrue(guard.believe(1, t - LEAD, NOW));
        assertFalse(guard.believe(1, t + 5 * LEAD, NOW), "a pending jump on partition 1");
        LeadGuard restored = new LeadGuard(LEAD);
        LeadGuard older = new LeadGuard(LEAD);
        assertTrue(older.believe(0, t - 2 * LEAD, NOW));
        restored.restore(older.snapshot());  // another subtask's older view of partition 0: the later one wins
        restored.restore(guard.snapshot());
        assertFalse(restored.believe(0, t + 5 * LEAD, NOW), "a lone jump past partition 0's latest time");
        assertTrue(restored.believe(1, t + 5 * LEAD + 10, NOW), "partition 1's pending jump, confirmed");
        assertTrue(new LeadGuard(LEAD).believe(0, t + 5 * LEAD, NOW), "what a guard without state believes");
    }
}
