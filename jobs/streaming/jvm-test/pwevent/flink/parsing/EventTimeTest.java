package pwevent.flink.parsing;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * EventTime against the reference parser's vectors (tests/streaming/data/event-time.tsv, which
 * tests/streaming/vectors/event_time.py writes from jobs/common/records.py): the time at a
 * field path, nested, with keys holding dots, in Confluent-framed values, is the time
 * {@code parse_event} takes from every record it accepts; no record makes it throw.
 */
class EventTimeTest {
    private static final HexFormat HEX = HexFormat.of();

    static List<String[]> vectors() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.event-time-vectors", "tests/streaming/data/event-time.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .collect(Collectors.toList());
    }

    private static String[] keys(String column) {
        String[] hex = column.split(",");
        String[] out = new String[hex.length];
        for (int i = 0; i < hex.length; i++) {
            out[i] = new String(HEX.parseHex(hex[i]), StandardCharsets.UTF_8);
        }
        return out;
    }

    @Test
    void theTimeOfEveryAcceptedRecordIsTheReferenceParsersOne() throws Exception {
        List<String[]> rows = vectors();
        int accepted = 0;
        for (String[] v : rows) {
            String[] path = keys(v[0]);
            byte[] record = HEX.parseHex(v[1]);
            if (v[2].equals("-")) {
                assertDoesNotThrow(() -> EventTime.read(record, path));
            } else {
                accepted++;
                assertEquals(Long.valueOf(v[2]), EventTime.read(record, path),
                        () -> String.join(".", path) + " of " + new String(record, StandardCharsets.UTF_8));
            }
        }
        assertTrue(accepted >= 100, "accepted vectors read: " + accepted);
    }

    @Test
    void aPathNeverCrossesAnythingButAnObject() {
        String[] path = {"meta", "ts"};
        assertEquals(5L, EventTime.read(bytes("{\"meta\": {\"ts\": 5}}"), path));
        assertNull(EventTime.read(bytes("{\"meta\": [{\"ts\": 5}]}"), path));
        assertNull(EventTime.read(bytes("{\"meta\": null}"), path));
        assertNull(EventTime.read(bytes("{\"meta\": {\"ts\": 5}, \"meta\": 3}"), path), "the last one decides");
        assertEquals(6L, EventTime.read(bytes("{\"meta\": 3, \"meta\": {\"ts\": 6}}"), path));
        assertNull(EventTime.read(bytes("{\"meta.ts\": 5}"), path));
        assertEquals(5L, EventTime.read(bytes("{\"meta.ts\": 5}"), new String[] {"meta.ts"}));
    }

    @Test
    void aFrameIsTakenOffOnce() {
        String[] path = {"time"};
        byte[] text = bytes("{\"time\": 7}");
        assertEquals(7L, EventTime.read(text, path));
        byte[] framed = new byte[text.length + 5];
        framed[4] = 42;
        System.arraycopy(text, 0, framed, 5, text.length);
        assertEquals(7L, EventTime.read(framed, path));
        assertNull(EventTime.read(new byte[] {0, 0, 0, 1}, path));
        assertNull(EventTime.read(new byte[] {0, 0, 0, 0, 1}, path));
        assertNull(EventTime.read(new byte[0], path));
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
