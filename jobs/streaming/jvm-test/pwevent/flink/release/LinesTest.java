package pwevent.flink.release;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.Test;

/** {@link Lines}: a row per '\n'-separated line, empty lines kept, other terminators inside a line. */
class LinesTest {
    static List<String> lines(String text) {
        List<String> out = new ArrayList<>();
        Lines lines = new Lines();
        lines.setCollector(new Collector<>() {
            @Override
            public void collect(Row row) {
                out.add((String) row.getField(0));
            }

            @Override
            public void close() {
            }
        });
        lines.eval(text);
        return out;
    }

    @Test
    void eachLineIsARow() {
        assertEquals(List.of("{\"a\":1}"), lines("{\"a\":1}"));
        assertEquals(List.of("a", "b", "c"), lines("a\nb\nc"));
        assertEquals(List.of("a", "", "b\r\u2028"), lines("a\n\nb\r\u2028"));
        assertEquals(List.of(), lines(null));
    }
}
