package pwevent.flink.parsing;

import pwevent.flink.contract.RecordRow;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.record.TimestampType;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * {@link PositionedRecords}: for an input read as whole Kafka records, every record's row holds its
 * whole-records line exactly as the Python reference writes it (tests/streaming/data/whole-records.tsv,
 * written by tests/streaming/vectors/whole_records.py from jobs/common/kafka_record.py); otherwise
 * the value as it is.
 */
class PositionedRecordsTest {
    private static final HexFormat HEX = HexFormat.of();

    static List<String[]> vectors() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.whole.vectors", "tests/streaming/data/whole-records.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .toList();
    }

    private static byte[] bytes(String hex) {
        return "-".equals(hex) ? null : HEX.parseHex(hex);
    }

    static ConsumerRecord<byte[], byte[]> record(String[] v) {
        RecordHeaders headers = new RecordHeaders();
        if (!"~".equals(v[3])) {
            for (String pair : v[3].split(",", -1)) {
                String[] parts = pair.split(":", -1);
                headers.add(new RecordHeader(new String(HEX.parseHex(parts[0]), StandardCharsets.UTF_8),
                        bytes(parts[1])));
            }
        }
        long stamp = "-".equals(v[2]) ? ConsumerRecord.NO_TIMESTAMP : Long.parseLong(v[2]);
        return new ConsumerRecord<>("t", 1, 7L, stamp, TimestampType.CREATE_TIME, 0, 0, bytes(v[0]), bytes(v[1]),
                headers, Optional.empty());
    }

    private static List<Row> rows(PositionedRecords source, ConsumerRecord<byte[], byte[]> record) {
        List<Row> out = new ArrayList<>();
        source.deserialize(record, new org.apache.flink.util.Collector<>() {
            @Override
            public void collect(Row row) {
                out.add(row);
            }

            @Override
            public void close() {
            }
        });
        return out;
    }

    @Test
    void everyWholeRecordIsThePythonLine() throws Exception {
        List<String[]> rows = vectors();
        assertTrue(rows.size() >= 40, "vectors read: " + rows.size());
        PositionedRecords source = new PositionedRecords(null, 65536, true);
        for (String[] v : rows) {
            List<Row> out = rows(source, record(v));
            assertEquals(1, out.size());
            assertArrayEquals(HEX.parseHex(v[4]), (byte[]) out.get(0).getField(RecordRow.VALUE),
                    () -> "line of " + String.join(" ", v));
            assertEquals(7L, out.get(0).getField(RecordRow.OFFSET));
        }
    }

    @Test
    void otherwiseTheValueIsAsItIs() throws Exception {
        String[] v = vectors().get(0);
        Row row = rows(new PositionedRecords(null, 65536, false), record(v)).get(0);
        assertArrayEquals(HEX.parseHex(v[1]), (byte[]) row.getField(RecordRow.VALUE));
    }
}
