package pwevent.flink.avro;

import pwevent.flink.parsing.EventTime;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * The JVM fast path for Avro events (docs/streaming.md, "Parsing: fast path and reference parser"):
 * a raw Kafka value of format {@code avro-confluent} (byte 0, a 4-byte big-endian schema id, the
 * datum; the writer schema from the Schema Registry, {@code GET /schemas/ids/{id}}, cached per id)
 * or {@code avro} (the datum under the configured schema's text) -> the values at the configured
 * field paths as the JSON object text the SQL fast path's regex reads
 * (jobs/streaming/event_sql.py), or null. It is a certified shortcut, never a second definition of
 * validity: it answers only when the object it renders is the projection, onto the field paths, of
 * the object jobs/common/avro_format.py makes of the same bytes (records and maps objects, a union
 * its branch's value, a null member absent, timestamp-millis/-micros and their local- forms epoch
 * milliseconds with micros floored), and null whenever it is not certain: an unknown or
 * unfetchable schema id, a registry error, a value that is not exactly one canonically encoded
 * datum (re-encoding it must give the same bytes: no trailing bytes, overlong varints or odd
 * blocks), a string that is not strict UTF-8, a timestamp a Python datetime cannot hold, a logical
 * type other than those four, a path through a scalar, a value it does not render (bytes, fixed, a
 * string with a character outside printable ASCII, a quote or a backslash, a float that would print
 * with an exponent). Null sends the record to the reference parser, which accepts it or
 * dead-letters it with its reason; this function never fails, retries or dead-letters.
 */
public final class AvroFields extends ScalarFunction {
    private static final long serialVersionUID = 1L;
    /** Schema ids remembered per function instance; a failed fetch is asked again after this long. */
    static final int SCHEMAS_KEPT = 1024;
    static final long RETRY_AFTER_NANOS = 10_000_000_000L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private transient Map<Long, AvroCertifier> byId;
    private transient Map<Long, Long> failedAt;
    private transient String fileText;
    private transient AvroCertifier fileAvroCertifier;
    private transient String pathsText;
    private transient String[][] paths;

    /**
     * @param value the Kafka value
     * @param registryUrl the Schema Registry's base URL ({@code avro-confluent}), else null
     * @param schemaText the writer schema's text ({@code avro}), else null
     * @param fieldPaths the field paths to project, separated by {@code ,}, their keys by {@code .}
     * @param timeoutMs the timeout of one registry request
     * @param maxBytes the largest value the reference parser reads
     */
    public byte[] eval(byte[] value, String registryUrl, String schemaText, String fieldPaths, Integer timeoutMs,
                       Integer maxBytes) {
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
        if (registryUrl == null || timeoutMs == null || value.length < EventTime.FRAME_BYTES || value[0] != 0) {
            return null;
        }
        long id = ByteBuffer.wrap(value, 1, 4).getInt() & 0xffffffffL;
        AvroCertifier certifier = registered(registryUrl, id, timeoutMs);
        return certifier == null ? null : certifier.project(value, EventTime.FRAME_BYTES, paths);
    }

    private AvroCertifier registered(String url, long id, int timeoutMs) {
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
        AvroCertifier fetched = AvroCertifier.of(fetchSchema(url, id, timeoutMs));
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

    /** The Avro schema text the registry at {@code url} has for {@code id}; null on any failure. */
    static String fetchSchema(String url, long id, int timeoutMs) {
        try {
            String base = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
            HttpURLConnection http = (HttpURLConnection) new URL(base + "/schemas/ids/" + id).openConnection();
            http.setConnectTimeout(timeoutMs);
            http.setReadTimeout(timeoutMs);
            http.setRequestProperty("Accept", "application/vnd.schemaregistry.v1+json, application/json");
            try {
                if (http.getResponseCode() != 200) {
                    return null;
                }
                JsonNode body;
                try (InputStream in = http.getInputStream()) {
                    body = JSON.readTree(in);
                }
                JsonNode schema = body == null ? null : body.get("schema");
                JsonNode type = body == null ? null : body.get("schemaType");
                boolean avro = type == null || type.isTextual() && "AVRO".equals(type.asText());
                return schema != null && schema.isTextual() && avro ? schema.asText() : null;
            } finally {
                http.disconnect();
            }
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }
}
