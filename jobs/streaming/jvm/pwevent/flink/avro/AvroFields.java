package pwevent.flink.avro;

import pwevent.flink.parsing.EventTime;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * The JVM fast path for Avro events (docs/streaming.md, "Parsing: fast path and reference parser"):
 * a raw Kafka value of format {@code avro-confluent} (byte 0, a 4-byte big-endian schema id, the
 * datum; the writer schema from the Schema Registry, {@code GET /schemas/ids/{id}} by the
 * instance's {@link RegistryClient}, with its credentials and TLS settings, cached per id)
 * or {@code avro} (the datum under the configured schema's text) -> the values at the configured
 * field paths as the JSON object text the SQL fast path's regex reads
 * (jobs/streaming/event_sql.py), or null. It is a certified shortcut, never a second definition of
 * validity: it answers only when the object it renders is the projection, onto the field paths, of
 * the object jobs/common/avro_format.py makes of the same bytes (records and maps objects, a union
 * its branch's value, a null member absent, timestamp-millis/-micros and their local- forms epoch
 * milliseconds with micros floored), and null whenever it is not certain: an unknown or
 * unfetchable schema id, a registry error, a value that is not exactly one canonically encoded
 * datum (re-encoding it must give the same bytes: no trailing bytes, overlong varints or odd
 * blocks), a string that is not strict UTF-8, a timestamp, date or time of day Python cannot hold,
 * a logical type outside the Avro specification, a value Python decodes to no JSON value (a
 * decimal, a time of day, a uuid not in the 8-4-4-4-12 form; a date is epoch milliseconds, a uuid
 * lowercase, a nanosecond timestamp its number), a path through a scalar, a value it does not render (bytes, fixed, a
 * string with a character outside printable ASCII, a quote or a backslash, a float that would print
 * with an exponent). Null sends the record to the reference parser, which accepts it or
 * dead-letters it with its reason; this function never fails, retries or dead-letters.
 */
public final class AvroFields extends ScalarFunction {
    private static final long serialVersionUID = 1L;
    /** Schema ids remembered per function instance; a failed fetch is asked again after this long. */
    static final int SCHEMAS_KEPT = 1024;
    static final long RETRY_AFTER_NANOS = 10_000_000_000L;

    private final RegistryClient registry;
    private transient Map<Long, AvroCertifier> byId;
    private transient Map<Long, Long> failedAt;
    private transient String fileText;
    private transient AvroCertifier fileAvroCertifier;
    private transient String pathsText;
    private transient String[][] paths;

    /** @param registry the Schema Registry of an {@code avro-confluent} input, null for {@code avro} */
    public AvroFields(RegistryClient registry) {
        this.registry = registry;
    }

    /**
     * @param value the Kafka value
     * @param schemaText the writer schema's text ({@code avro}), else null: the registry's schema by the
     *     frame's id ({@code avro-confluent})
     * @param fieldPaths the field paths to project, separated by {@code ,}, their keys by {@code .}
     * @param maxBytes the largest value the reference parser reads
     */
    public byte[] eval(byte[] value, String schemaText, String fieldPaths, Integer maxBytes) {
        if (value == null || fieldPaths == null || maxBytes == null || value.length > maxBytes) {
            return null;
        }
        if (!fieldPaths.equals(pathsText)) {
            paths = Arrays.stream(fieldPaths.split(",", -1)).map(p -> p.split("\\.", -1)).toArray(String[][]::new);
            pathsText = fieldPaths;
        }
        if (schemaText != null) {
            if (!schemaText.equals(fileText)) {
                fileAvroCertifier = AvroCertifier.of(schemaText);
                fileText = schemaText;
            }
            return fileAvroCertifier == null ? null : fileAvroCertifier.project(value, 0, paths);
        }
        if (registry == null || value.length < EventTime.FRAME_BYTES || value[0] != 0) {
            return null;
        }
        long id = ByteBuffer.wrap(value, 1, 4).getInt() & 0xffffffffL;
        AvroCertifier certifier = registered(id);
        return certifier == null ? null : certifier.project(value, EventTime.FRAME_BYTES, paths);
    }

    private AvroCertifier registered(long id) {
        if (byId == null) {
            byId = bounded();
            failedAt = bounded();
        }
        AvroCertifier known = byId.get(id);
        if (known != null) {
            return known;
        }
        Long failed = failedAt.get(id);
        if (failed != null && System.nanoTime() - failed < RETRY_AFTER_NANOS) {
            return null;
        }
        AvroCertifier fetched = AvroCertifier.of(registry.schema(id));
        if (fetched == null) {
            failedAt.put(id, System.nanoTime());
        } else {
            byId.put(id, fetched);
            failedAt.remove(id);
        }
        return fetched;
    }

    private static <V> Map<Long, V> bounded() {
        return new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, V> eldest) {
                return size() > SCHEMAS_KEPT;
            }
        };
    }
}
