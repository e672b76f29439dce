package pwevent.flink.time;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * {@link SlotRules} against the Python rule's vectors (tests/streaming/data/slot-rules.tsv, which
 * tests/streaming/test_slot_rules.py checks against jobs/common/slots.py): a slot's last
 * millisecond (SlotJudge's), Membership's "closed" and the slot a requirement record is in force from.
 */
class SlotRulesTest {
    static List<long[]> vectors() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.vectors", "tests/streaming/data/slot-rules.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .map(cols -> new long[] {Long.parseLong(cols[0]), Long.parseLong(cols[1]), Long.parseLong(cols[2]),
                    Long.parseLong(cols[3]), Long.parseLong(cols[4]), Long.parseLong(cols[5])})
                .collect(Collectors.toList());
    }

    @Test
    void theSlotEndIsThePythonOne() throws Exception {
        List<long[]> rows = vectors();
        assertTrue(rows.size() >= 100, "vectors read: " + rows.size());
        for (long[] v : rows) {
            assertEquals(v[4], SlotRules.slotLastMs(v[0], v[1], v[2]), () -> "slotLastMs of " + v[2]);
            assertEquals(v[3], SlotRules.slotOf(v[0], v[1], v[2]), () -> "slotOf " + v[2]);
            assertEquals(v[5], SlotRules.inForceFrom(v[0], v[1], v[2]), () -> "inForceFrom " + v[2]);
            assertEquals(v[4], SlotRules.lastMs(v[0], v[1], v[3]), () -> "lastMs of slot " + v[3]);
            assertTrue(SlotRules.firstMs(v[0], v[1], v[3]) <= v[2]
                    && SlotRules.firstMs(v[0], v[1], v[3] + 1) == v[4] + 1, () -> "firstMs of slot " + v[3]);
        }
    }

    @Test
    void aSlotIsClosedExactlyFromItsLastMillisecond() throws Exception {
        for (long[] v : vectors()) {
            long origin = v[0];
            long length = v[1];
            long slot = v[3];
            long last = v[4];
            assertTrue(SlotRules.closed(slot, last, origin, length), () -> "closed at the last ms of slot " + slot);
            assertFalse(SlotRules.closed(slot, last - 1, origin, length), () -> "open before the last ms of " + slot);
        }
    }
}
