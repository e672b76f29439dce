package pwevent.flink.membership;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.flink.api.common.functions.util.ListCollector;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * FirstPresence against the shared scenarios (tests/streaming/data/first-presence.tsv, which
 * tests/jobs/test_first_presence.py checks against UserMembership): the operator passes on exactly
 * the presences listed, epochs and restarts included, whether or not the per-subtask filter in front
 * of it (Unheard) has dropped some first.
 */
class FirstPresenceTest {
    static List<String[]> scenarios() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.presences", "tests/streaming/data/first-presence.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .collect(Collectors.toList());
    }

    /**
     * The step indices of the presences the operator passes on, restarts as the operator does them;
     * `unheard`: through the per-subtask filter in front of it too (emptied by every restart).
     */
    static List<Integer> passedOn(String[] steps, boolean unheard) {
        List<Integer> passed = new ArrayList<>();
        long epoch = FirstPresence.startEpoch(List.of(), true);
        long[] held = null;
        HashMap<String, long[]> sent = new HashMap<>();
        for (int i = 0; i < steps.length; i++) {
            String step = steps[i];
            if ("off".equals(step) || "on".equals(step)) {
                epoch = FirstPresence.startEpoch(List.of(epoch), "on".equals(step));
                sent.clear();
            } else if (step.startsWith("p")) {
                long slot = Long.parseLong(step.substring(1));
                if (unheard && !FirstPresence.Unheard.pass(sent, "u", slot)) {
                    continue;
                }
                long[] next = FirstPresence.forward(held, slot, epoch);
                if (next != null) {
                    held = next;
                    passed.add(i);
                }
            }
        }
        return passed;
    }

    @Test
    void theOperatorPassesOnTheListedPresences() throws Exception {
        List<String[]> rows = scenarios();
        assertTrue(rows.size() >= 15, "scenarios read: " + rows.size());
        for (String[] row : rows) {
            List<Integer> expected =
                    Arrays.stream(row[2].split(",")).map(Integer::valueOf).collect(Collectors.toList());
            assertEquals(expected, passedOn(row[1].split(" "), false), () -> row[0]);
            assertEquals(expected, passedOn(row[1].split(" "), true), () -> row[0] + ", through Unheard");
        }
    }

    @Test
    void theEpochIsTheHighestRestoredAndAStartWithTheDefaultOffRaisesIt() {
        assertEquals(0, FirstPresence.startEpoch(List.of(), true));
        assertEquals(1, FirstPresence.startEpoch(List.of(), false));
        assertEquals(7, FirstPresence.startEpoch(List.of(3L, 7L, 5L), true), "rescaled: every subtask's epoch");
        assertEquals(8, FirstPresence.startEpoch(List.of(7L, 3L), false));
    }

    @Test
    void aPresenceIsPassedOnWhenNothingEarlierOfItsEpochWas() {
        assertArrayEquals(new long[] {5, 0}, FirstPresence.forward(null, 5, 0));
        assertNull(FirstPresence.forward(new long[] {5, 0}, 5, 0));
        assertNull(FirstPresence.forward(new long[] {5, 0}, 6, 0));
        assertArrayEquals(new long[] {4, 0}, FirstPresence.forward(new long[] {5, 0}, 4, 0));
        assertArrayEquals(new long[] {9, 1}, FirstPresence.forward(new long[] {5, 0}, 9, 1));
    }

    @Test
    void unheardForgetsEveryoneAtItsLimitAndPassesNothingWithTheDefaultOff() throws Exception {
        HashMap<String, long[]> sent = new HashMap<>();
        for (int u = 0; u < FirstPresence.UNHEARD_LIMIT; u++) {
            assertTrue(FirstPresence.Unheard.pass(sent, "u" + u, 5));
        }
        assertFalse(FirstPresence.Unheard.pass(sent, "u0", 6));
        assertTrue(FirstPresence.Unheard.pass(sent, "new", 5), "full: forgets everyone");
        assertEquals(1, sent.size());
        assertTrue(FirstPresence.Unheard.pass(sent, "u0", 6), "forgotten: passed on again");
        List<Row> got = new ArrayList<>();
        FirstPresence.Unheard on = new FirstPresence.Unheard(true);
        on.open(null);
        on.flatMap(Row.of("u", 3L, 1, 0, 7L), new ListCollector<>(got));
        on.flatMap(Row.of("u", 4L, 1, 0, 8L), new ListCollector<>(got));
        assertEquals(List.of(Row.of("u", 3L)), got);
        FirstPresence.Unheard off = new FirstPresence.Unheard(false);
        off.open(null);
        off.flatMap(Row.of("u", 3L, 1, 0, 7L), new ListCollector<>(got));
        assertEquals(1, got.size(), "the default off: nothing");
    }
}
