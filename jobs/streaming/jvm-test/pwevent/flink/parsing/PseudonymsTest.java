package pwevent.flink.parsing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Pseudonyms} against the Python rule's vectors (tests/streaming/data/pseudonyms.tsv, written by
 * tests/streaming/vectors/pseudonyms.py from jobs/common/pseudonyms.py): every (key, user id) gives
 * the Python pseudonym, also after the operator carrying it is serialized; without a key the id is
 * kept.
 */
class PseudonymsTest {
    private static final HexFormat HEX = HexFormat.of();

    static List<String[]> vectors() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.pseudonym.vectors", "tests/streaming/data/pseudonyms.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .toList();
    }

    private static String text(String hex) {
        return new String(HEX.parseHex(hex), StandardCharsets.UTF_8);
    }

    @Test
    void everyPseudonymIsThePythonOne() throws Exception {
        List<String[]> rows = vectors();
        assertTrue(rows.size() >= 50, "vectors read: " + rows.size());
        for (String[] v : rows) {
            Pseudonyms pseudonyms = new Pseudonyms(HEX.parseHex(v[0]));
            assertEquals(v[2], pseudonyms.name(text(v[1])), () -> "pseudonym of " + text(v[1]));
        }
    }

    @Test
    void aSerializedSplitKeepsItsKey() throws Exception {
        String[] v = vectors().get(0);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(new Pseudonyms(HEX.parseHex(v[0])));
        }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            assertEquals(v[2], ((Pseudonyms) in.readObject()).name(text(v[1])));
        }
    }

    @Test
    void withoutAKeyTheIdIsKept() {
        assertEquals("u1", Pseudonyms.none().name("u1"));
        assertNull(Pseudonyms.none().name(null));
    }
}
