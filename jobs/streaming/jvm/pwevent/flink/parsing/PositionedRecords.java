package pwevent.flink.parsing;

import java.util.List;
import pwevent.flink.contract.RecordRow;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A Kafka record as {@link RecordRow} (value, partition, offset, kafka_ts, jtime): the raw bytes and where they
 * came from (dead letters name the offset), plus the event time read for watermarking only
 * ({@link EventTime}; the Kafka record timestamp when no time field is configured). Never throws:
 * a record whose time cannot be read gets a null jtime and is parsed by the reference parser.
 */
public final class PositionedRecords implements KafkaRecordDeserializationSchema<Row> {
    private static final long serialVersionUID = 1L;
    private static final byte[] EMPTY = new byte[0];
    private final String[] timePath;
    private final int maxBytes;

    /** @param timePath the keys of the field path with the event time (jobs/common/field_paths.py),
     *  or null for the Kafka record timestamp. */
    public PositionedRecords(List<String> timePath, int maxBytes) {
        this.timePath = timePath == null ? null : timePath.toArray(new String[0]);
        this.maxBytes = maxBytes;
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
        row.setField(RecordRow.VALUE, value);
        row.setField(RecordRow.PARTITION, record.partition());
        row.setField(RecordRow.OFFSET, record.offset());
        row.setField(RecordRow.KAFKA_TS, record.timestamp());
        row.setField(RecordRow.JTIME, time);
        out.collect(row);
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return RecordRow.TYPE;
    }
}
