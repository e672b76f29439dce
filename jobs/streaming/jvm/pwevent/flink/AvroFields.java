package pwevent.flink;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericData;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericDatumReader;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericDatumWriter;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericEnumSymbol;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericRecord;
import org.apache.flink.avro.shaded.org.apache.avro.io.BinaryDecoder;
import org.apache.flink.avro.shaded.org.apache.avro.io.BinaryEncoder;
import org.apache.flink.avro.shaded.org.apache.avro.io.DecoderFactory;
import org.apache.flink.avro.shaded.org.apache.avro.io.EncoderFactory;
import org.apache.flink.avro.shaded.org.apache.avro.util.Utf8;
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
    /** The epoch milliseconds a Python datetime holds (years 1 to 9999), a day inside each end. */
    static final long MIN_MS = -62_135_596_800_000L + 86_400_000L;
    static final long MAX_MS = 253_402_300_799_999L - 86_400_000L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private transient Map<Long, Certifier> byId;
    private transient Map<Long, Long> failedAt;
    private transient String fileText;
    private transient Certifier fileCertifier;
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
                fileCertifier = Certifier.of(schemaText);
                fileText = schemaText;
            }
            return fileCertifier == null ? null : fileCertifier.project(value, 0, paths);
        }
        if (registryUrl == null || timeoutMs == null || value.length < EventTime.FRAME_BYTES || value[0] != 0) {
            return null;
        }
        long id = ByteBuffer.wrap(value, 1, 4).getInt() & 0xffffffffL;
        Certifier certifier = registered(registryUrl, id, timeoutMs);
        return certifier == null ? null : certifier.project(value, EventTime.FRAME_BYTES, paths);
    }

    private Certifier registered(String url, long id, int timeoutMs) {
        if (byId == null) {
            byId = bounded();
            failedAt = bounded();
        }
        Certifier known = byId.get(id);
        if (known != null) {
            return known;
        }
        Long failed = failedAt.get(id);
        if (failed != null && System.nanoTime() - failed < RETRY_AFTER_NANOS) {
            return null;
        }
        Certifier fetched = Certifier.of(fetchSchema(url, id, timeoutMs));
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
                boolean avro = type == null || (type.isTextual() && type.asText().equals("AVRO"));
                return schema != null && schema.isTextual() && avro ? schema.asText() : null;
            } finally {
                http.disconnect();
            }
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /**
     * One writer schema that the rules above can certify (a record at the top level, no logical
     * type but the four timestamps on a long): decodes, checks and projects its datums.
     */
    static final class Certifier {
        final Schema schema;
        private final GenericDatumReader<Object> reader;
        private final GenericDatumWriter<Object> writer;
        private BinaryDecoder decoder;
        private BinaryEncoder encoder;
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        private Certifier(Schema schema) {
            this.schema = schema;
            this.reader = new GenericDatumReader<>(schema) {
                @Override
                protected Object newMap(Object old, int size) {
                    return new LinkedHashMap<>(); // in the order written, so re-encoding can compare
                }
            };
            this.writer = new GenericDatumWriter<>(schema);
        }

        /** The certifier of a schema's text, or null when it does not parse or is not certifiable. */
        static Certifier of(String text) {
            if (text == null) {
                return null;
            }
            try {
                Schema schema = new Schema.Parser().parse(text);
                return schema.getType() == Schema.Type.RECORD && plainTypes(schema, Collections.newSetFromMap(new IdentityHashMap<>()))
                        ? new Certifier(schema) : null;
            } catch (RuntimeException e) {
                return null;
            }
        }

        private static boolean plainTypes(Schema schema, Set<Schema> seen) {
            if (!seen.add(schema)) {
                return true;
            }
            String logical = schema.getProp("logicalType");
            if (logical != null && !(schema.getType() == Schema.Type.LONG && timestamp(logical) != 0)) {
                return false;
            }
            switch (schema.getType()) {
                case RECORD:
                    return schema.getFields().stream().allMatch(f -> plainTypes(f.schema(), seen));
                case UNION:
                    return schema.getTypes().stream().allMatch(s -> plainTypes(s, seen));
                case ARRAY:
                    return plainTypes(schema.getElementType(), seen);
                case MAP:
                    return plainTypes(schema.getValueType(), seen);
                default:
                    return true;
            }
        }

        /** Micros per millisecond of a timestamp logical type, 0 for any other name. */
        static int timestamp(String logical) {
            switch (logical) {
                case "timestamp-millis":
                case "local-timestamp-millis":
                    return 1;
                case "timestamp-micros":
                case "local-timestamp-micros":
                    return 1000;
                default:
                    return 0;
            }
        }

        /**
         * The projection of the datum in {@code value[start:]} onto {@code paths}, or null; never an error, whatever the bytes: a datum nested deeper
         * than the thread's stack (a recursive schema) is left to the reference parser too.
         */
        byte[] project(byte[] value, int start, String[][] paths) {
            try {
                return certifiedProjection(value, start, paths);
            } catch (StackOverflowError e) {
                return null;
            }
        }

        /** {@link #project}, which may overflow the stack on a deeply nested datum. */
        private byte[] certifiedProjection(byte[] value, int start, String[][] paths) {
            Object datum;
            try {
                decoder = DecoderFactory.get().binaryDecoder(value, start, value.length - start, decoder);
                datum = reader.read(null, decoder);
                out.reset();
                encoder = EncoderFactory.get().directBinaryEncoder(out, encoder);
                writer.write(datum, encoder);
                encoder.flush();
            } catch (IOException | RuntimeException e) {
                return null;
            }
            byte[] again = out.toByteArray();
            if (!Arrays.equals(again, 0, again.length, value, start, value.length) || !plainValues(datum, schema)) {
                return null;
            }
            Map<String, Object> root = new LinkedHashMap<>();
            for (String[] keys : paths) {
                Object leaf = datum;
                Schema leafSchema = schema;
                for (String key : keys) {
                    if (leaf instanceof GenericRecord) {
                        Schema.Field field = leafSchema.getField(key);
                        leaf = field == null ? null : ((GenericRecord) leaf).get(field.pos());
                        leafSchema = field == null ? null : branch(field.schema(), leaf);
                    } else if (leaf instanceof Map) {
                        leaf = ((Map<?, ?>) leaf).get(new Utf8(key));
                        leafSchema = branch(leafSchema.getValueType(), leaf);
                    } else if (leaf != null) {
                        return null; // a path through a scalar or an array: the reference parser says why
                    }
                }
                if (leaf == null) {
                    continue; // absent: the rendered object lacks it, as the decoded one does
                }
                String text = render(leaf, leafSchema);
                if (text == null) {
                    return null;
                }
                Map<String, Object> node = root;
                for (int i = 0; i < keys.length - 1; i++) {
                    Object child = node.computeIfAbsent(keys[i], k -> new LinkedHashMap<String, Object>());
                    if (!(child instanceof Map)) {
                        return null;
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> inner = (Map<String, Object>) child;
                    node = inner;
                }
                if (node.putIfAbsent(keys[keys.length - 1], text) != null) {
                    return null;
                }
            }
            StringBuilder json = new StringBuilder();
            object(root, json);
            return json.toString().getBytes(StandardCharsets.US_ASCII);
        }

        private static void object(Map<String, Object> node, StringBuilder json) {
            json.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> member : node.entrySet()) {
                json.append(first ? "\"" : ",\"").append(member.getKey()).append("\":");
                first = false;
                if (member.getValue() instanceof String) {
                    json.append((String) member.getValue());
                } else {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> inner = (Map<String, Object>) member.getValue();
                    object(inner, json);
                }
            }
            json.append('}');
        }

        private static Schema branch(Schema schema, Object datum) {
            return schema.getType() == Schema.Type.UNION
                    ? schema.getTypes().get(GenericData.get().resolveUnion(schema, datum)) : schema;
        }

        /**
         * Whether the decoded datum holds only what the Python decoding also takes: strict UTF-8
         * strings and map keys, timestamps a datetime holds.
         */
        static boolean plainValues(Object datum, Schema schema) {
            Schema s = branch(schema, datum);
            switch (s.getType()) {
                case RECORD:
                    GenericRecord record = (GenericRecord) datum;
                    for (Schema.Field field : s.getFields()) {
                        if (!plainValues(record.get(field.pos()), field.schema())) {
                            return false;
                        }
                    }
                    return true;
                case ARRAY:
                    for (Object item : (Collection<?>) datum) {
                        if (!plainValues(item, s.getElementType())) {
                            return false;
                        }
                    }
                    return true;
                case MAP:
                    for (Map.Entry<?, ?> entry : ((Map<?, ?>) datum).entrySet()) {
                        if (strictUtf8(entry.getKey()) == null || !plainValues(entry.getValue(), s.getValueType())) {
                            return false;
                        }
                    }
                    return true;
                case STRING:
                    return strictUtf8(datum) != null;
                case LONG:
                    String logical = s.getProp("logicalType");
                    return logical == null || epochMs((Long) datum, timestamp(logical)) != null;
                default:
                    return true;
            }
        }

        /** A string's text when its bytes are strict UTF-8 (as Python decodes them), else null. */
        static String strictUtf8(Object text) {
            if (!(text instanceof Utf8)) {
                return null;
            }
            Utf8 utf8 = (Utf8) text;
            try {
                return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(utf8.getBytes(), 0, utf8.getByteLength())).toString();
            } catch (CharacterCodingException e) {
                return null;
            }
        }

        /** A timestamp's epoch milliseconds (micros floored), null outside what a datetime holds. */
        static Long epochMs(long raw, int perMs) {
            long ms = Math.floorDiv(raw, (long) perMs);
            return ms >= MIN_MS && ms <= MAX_MS ? ms : null;
        }

        /** A value's JSON text as the regex reads it, or null when it is not rendered. */
        static String render(Object datum, Schema schema) {
            Schema s = branch(schema, datum);
            switch (s.getType()) {
                case NULL:
                    return "null";
                case BOOLEAN:
                    return datum.toString();
                case INT:
                    return datum.toString();
                case LONG:
                    String logical = s.getProp("logicalType");
                    Long ms = logical == null ? (Long) datum : epochMs((Long) datum, timestamp(logical));
                    return ms == null ? null : ms.toString();
                case FLOAT:
                case DOUBLE:
                    double number = ((Number) datum).doubleValue();
                    String decimal = Double.toString(number);
                    return Double.isFinite(number) && decimal.indexOf('E') < 0 ? decimal : null;
                case STRING:
                    return string(strictUtf8(datum));
                case ENUM:
                    return string(((GenericEnumSymbol<?>) datum).toString());
                case RECORD:
                    StringBuilder record = new StringBuilder("{");
                    for (Schema.Field field : s.getFields()) {
                        Object member = ((GenericRecord) datum).get(field.pos());
                        if (member != null) {
                            String text = render(member, field.schema());
                            if (text == null) {
                                return null;
                            }
                            record.append(record.length() > 1 ? "," : "").append('"').append(field.name())
                                    .append("\":").append(text);
                        }
                    }
                    return record.append('}').toString();
                case MAP:
                    StringBuilder map = new StringBuilder("{");
                    for (Map.Entry<?, ?> entry : ((Map<?, ?>) datum).entrySet()) {
                        if (entry.getValue() != null) {
                            String key = string(strictUtf8(entry.getKey()));
                            String text = render(entry.getValue(), s.getValueType());
                            if (key == null || text == null) {
                                return null;
                            }
                            map.append(map.length() > 1 ? "," : "").append(key).append(':').append(text);
                        }
                    }
                    return map.append('}').toString();
                case ARRAY:
                    StringBuilder array = new StringBuilder("[");
                    for (Object item : (List<?>) datum) {
                        String text = render(item, s.getElementType());
                        if (text == null) {
                            return null;
                        }
                        array.append(array.length() > 1 ? "," : "").append(text);
                    }
                    return array.append(']').toString();
                default:
                    return null; // bytes, fixed: the reference parser says what they are
            }
        }

        /** A string's JSON text when it needs no escape and is printable ASCII, else null. */
        private static String string(String text) {
            if (text == null) {
                return null;
            }
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
                    return null;
                }
            }
            return "\"" + text + "\"";
        }
    }
}
