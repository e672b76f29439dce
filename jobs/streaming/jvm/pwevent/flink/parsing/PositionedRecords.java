package pwevent.flink.parsing;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import pwevent.flink.contract.RecordRow;
import pwevent.flink.contract.WholeRecords;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.header.Header;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A Kafka record as {@link RecordRow} (value, partition, offset, kafka_ts, jtime): the raw bytes and where they
 * came from (dead letters name the offset), plus the event time read for watermarking only
 * ({@link EventTime}; the Kafka record timestamp when no time field is configured). Never throws:
 * a record whose time cannot be read gets a null jtime and is parsed by the reference parser. For an
 * input read as whole Kafka records (a mapping names its key, timestamp or a header) the row's value
 * is the record's whole-records line in canonical form ({@link #line}; jobs/common/kafka_record.py
 * reads it, as the replay reads its files' lines).
 */
public final class PositionedRecords implements KafkaRecordDeserializationSchema<Row> {
    private static final long serialVersionUID = 1L;
    private static final byte[] EMPTY = new byte[0];
    /** Kafka's timestamp of a record without one (ConsumerRecord.NO_TIMESTAMP). */
    private static final long NO_TIMESTAMP = -1L;
    private final String[] timePath;
    private final int maxBytes;
    private final boolean wholeRecords;

    /** @param timePath the keys of the field path with the event time (jobs/common/field_paths.py),
     *  or null for the Kafka record timestamp.
     *  @param wholeRecords each row's value is the record's whole-records line. */
    public PositionedRecords(List<String> timePath, int maxBytes, boolean wholeRecords) {
        this.timePath = timePath == null ? null : timePath.toArray(new String[0]);
        this.maxBytes = maxBytes;
        this.wholeRecords = wholeRecords;
    }

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
        byte[] value = record.value() == null ? EMPTY : record.value();
        Long time;
        if (timePath == null) {
            time = record.timestamp();
        } else {
            time = value.length > maxBytes ? null : EventTime.read(value, timePath);
        }
        Row row = new Row(RecordRow.ARITY);
        row.setField(RecordRow.VALUE, wholeRecords ? line(record) : value);
        row.setField(RecordRow.PARTITION, record.partition());
        row.setField(RecordRow.OFFSET, record.offset());
        row.setField(RecordRow.KAFKA_TS, record.timestamp());
        row.setField(RecordRow.JTIME, time);
        out.collect(row);
    }

    /** The record's whole-records line (UTF-8, no newline): {"key":..,"value":..,"timestamp":..,"headers":[..]},
     *  bytes in standard base64 with padding or null, the timestamp in epoch ms or null (none), each
     *  header a pair of its name (a JSON string, {@link Json#string}) and its value, in their order. */
    public static byte[] line(ConsumerRecord<byte[], byte[]> record) {
        StringBuilder out = new StringBuilder("{");
        member(out, WholeRecords.KEY).append(base64(record.key())).append(',');
        member(out, WholeRecords.VALUE).append(base64(record.value())).append(',');
        long stamp = record.timestamp();
        member(out, WholeRecords.TIMESTAMP).append(stamp == NO_TIMESTAMP ? "null" : Long.toString(stamp)).append(',');
        member(out, WholeRecords.HEADERS).append('[');
        boolean first = true;
        for (Header header : record.headers()) {
            if (!first) {
                out.append(',');
            }
            first = false;
            out.append('[').append(Json.string(header.key())).append(',').append(base64(header.value())).append(']');
        }
        return out.append("]}").toString().getBytes(StandardCharsets.UTF_8);
    }

    private static StringBuilder member(StringBuilder out, String name) {
        return out.append(Json.string(name)).append(':');
    }

    private static String base64(byte[] bytes) {
        return bytes == null ? "null" : '"' + Base64.getEncoder().encodeToString(bytes) + '"';
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return RecordRow.TYPE;
    }
}
