package pwevent.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * FirstPresence against the shared scenarios (tests/streaming/data/first-presence.tsv, which
 * tests/jobs/test_first_presence.py checks against UserMembership): the operator passes on exactly
 * the presences listed, epochs and restarts included.
 */
class FirstPresenceTest {
    static List<String[]> scenarios() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.presences", "tests/streaming/data/first-presence.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .collect(Collectors.toList());
    }

    /** The step indices of the presences the operator's rule passes on, restarts as the operator does them. */
    static List<Integer> passedOn(String[] steps) {
        List<Integer> passed = new ArrayList<>();
        long epoch = FirstPresence.startEpoch(List.of(), true);
        long[] held = null;
        for (int i = 0; i < steps.length; i++) {
            String step = steps[i];
            if (step.equals("off") || step.equals("on")) {
                epoch = FirstPresence.startEpoch(List.of(epoch), step.equals("on"));
            } else if (step.startsWith("p")) {
                long[] next = FirstPresence.forward(held, Long.parseLong(step.substring(1)), epoch);
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
            List<Integer> expected = Arrays.stream(row[2].split(",")).map(Integer::valueOf).collect(Collectors.toList());
            assertEquals(expected, passedOn(row[1].split(" ")), () -> row[0]);
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
}
