package pwevent.flink;

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
        groups.eval(text == null ? null : text.getBytes(StandardCharsets.UTF_8), REGEX, maxBytes);
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
    void tooLongNonAsciiControlOrNoMatchIsNotMatched() {
        assertEquals(false, eval("{\"user\": \"u1\", \"time\": 17}", 10).getField(0));
        assertEquals(false, eval("{\"user\": \"ü1\", \"time\": 17}", 100).getField(0));
        assertEquals(false, eval("{\"user\": \"u1\",\t\"time\": 17}", 100).getField(0));
        assertEquals(false, eval("{\"user\": \"u1\", \"time\": 17}\n", 100).getField(0));
        assertEquals(false, eval(null, 100).getField(0));
    }
}
