package pwevent.flink.parsing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.Test;

/** RecordGroups, the SQL fast path's look at a record: exactly one row per record, matched or not. */
class RecordGroupsTest {
    private static final String REGEX = "\\A\\{\"user\": \"([a-z0-9]+)\", \"time\": ([0-9]+)\\}\\z";

    private static Row eval(String text, int maxBytes) {
        return eval(text == null ? null : text.getBytes(StandardCharsets.UTF_8), maxBytes);
    }

    private static Row eval(byte[] value, int maxBytes) {
        return eval(value, REGEX, maxBytes);
    }

    private static Row eval(byte[] value, String regex, int maxBytes) {
        List<Row> out = new ArrayList<>();
        RecordGroups groups = new RecordGroups();
        groups.setCollector(new Collector<Row>() {
            @Override
            public void collect(Row row) {
                out.add(row);
            }

            @Override
            public void close() {}
        });
        groups.eval(value, regex, maxBytes);
        assertEquals(1, out.size());
        return out.get(0);
    }

    @Test
    void aMatchGivesItsGroups() {
        Row row = eval("{\"user\": \"u1\", \"time\": 17}", 100);
        assertEquals(true, row.getField(0));
        assertEquals("u1", row.getField(1));
        assertEquals("17", row.getField(2));
        assertNull(row.getField(3), "past the pattern's groups");
    }

    @Test
    void allTenGroupsArePassedOn() {
        String regex = "\\A" + "([a-z])".repeat(11) + "\\z";
        Row row = eval("abcdefghijk".getBytes(StandardCharsets.US_ASCII), regex, 100);
        assertEquals(10, RecordGroups.GROUPS, "the requirements' dynamic shape has 10 groups");
        assertEquals(11, row.getArity());
        assertEquals(true, row.getField(0));
        assertEquals("a", row.getField(1));
        assertEquals("j", row.getField(10), "the pattern's groups past the tenth are not passed on");
    }

    @Test
    void tooLongNonAsciiControlOrNoMatchIsNotMatched() {
        assertEquals(false, eval("{\"user\": \"u1\", \"time\": 17}", 10).getField(0));
        assertEquals(false, eval("{\"user\": \"ü1\", \"time\": 17}", 100).getField(0));
        assertEquals(false, eval("{\"user\": \"u1\",\t\"time\": 17}", 100).getField(0));
        assertEquals(false, eval("{\"user\": \"u1\", \"time\": 17}\n", 100).getField(0));
        assertEquals(false, eval((byte[]) null, 100).getField(0));
    }

    private static byte[] framed(String text) {
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[body.length + 5];
        out[1] = (byte) 0xff;  // a schema id whose bytes are not printable
        out[4] = 10;
        System.arraycopy(body, 0, out, 5, body.length);
        return out;
    }

    @Test
    void aConfluentFramedRecordIsMatchedOnItsText() {
        String text = "{\"user\": \"u1\", \"time\": 17}";
        Row row = eval(framed(text), 100);
        assertEquals(true, row.getField(0));
        assertEquals("u1", row.getField(1));
        assertEquals(false, eval(framed(text), text.length() + 4).getField(0), "the frame counts in maxBytes");
        assertEquals(true, eval(framed(text), text.length() + 5).getField(0));
        assertEquals(false, eval(framed("{\"user\": \"ü1\", \"time\": 17}"), 100).getField(0));
        assertEquals(false, eval(new byte[] {0, 0, 0, 1}, 100).getField(0), "shorter than a frame");
        assertEquals(false, eval(framed(new String(framed(text), StandardCharsets.ISO_8859_1)), 100).getField(0));
        byte[] notMagic = framed(text);
        notMagic[0] = 1;
        assertEquals(false, eval(notMagic, 100).getField(0));
    }
}
