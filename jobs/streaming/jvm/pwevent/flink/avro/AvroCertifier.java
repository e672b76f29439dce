package pwevent.flink.avro;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
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

/**
 * One writer schema that {@link AvroFields}' rules can certify (a record at the top level, no logical
 * type but the four timestamps on a long): decodes, checks and projects its datums.
 */
final class AvroCertifier {
    /** The epoch milliseconds a Python datetime holds (years 1 to 9999), a day inside each end. */
    static final long MIN_MS = -62_135_596_800_000L + 86_400_000L;
    static final long MAX_MS = 253_402_300_799_999L - 86_400_000L;

    /** The room an array is given before its items arrive (its block's count is the writer's claim). */
    static final int ARRAY_ROOM = 64;

    final Schema schema;
    private final GenericDatumReader<Object> reader;
    private final GenericDatumWriter<Object> writer;
    private BinaryDecoder decoder;
    /** The last datum read, whose objects the next read reuses (a datum is never kept past a call). */
    private Object lastDatum;
    private BinaryEncoder encoder;
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    private AvroCertifier(Schema schema) {
        this.schema = schema;
        this.reader = new GenericDatumReader<>(schema) {
            @Override
            protected Object newMap(Object old, int size) {
                return new LinkedHashMap<>(); // in the order written, so re-encoding can compare
            }

            @Override
            protected Object newArray(Object old, int size, Schema arraySchema) {
                // a block's count is the writer's claim: room for at most one item per byte left grows as items come
                return super.newArray(old, Math.min(size, ARRAY_ROOM), arraySchema);
            }
        };
        this.writer = new GenericDatumWriter<>(schema);
    }

    /** The certifier of a schema's text, or null when it does not parse or is not certifiable. */
    static AvroCertifier of(String text) {
        if (text == null) {
            return null;
        }
        try {
            Schema schema = new Schema.Parser().parse(text);
            return schema.getType() == Schema.Type.RECORD && plainTypes(schema, Collections.newSetFromMap(new IdentityHashMap<>()))
                    ? new AvroCertifier(schema) : null;
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
            case ARRAY:  // items of no bytes: a few bytes could claim 2^63 of them (jobs/common/avro_schema.py)
                return !zeroWidth(schema.getElementType(), Collections.newSetFromMap(new IdentityHashMap<>()))
                        && plainTypes(schema.getElementType(), seen);
            case MAP:
                return plainTypes(schema.getValueType(), seen);
            default:
                return true;
        }
    }

    /** Whether every value of the schema encodes to no bytes: null, a fixed of size 0, a record of
     *  only such fields (avro_schema.zero_width_items, the reference parser's rule). */
    static boolean zeroWidth(Schema schema, Set<Schema> enclosing) {
        switch (schema.getType()) {
            case NULL:
                return true;
            case FIXED:
                return schema.getFixedSize() == 0;
            case RECORD:
                if (!enclosing.add(schema)) {
                    return false;  // a record inside itself: only a union (a byte) can end it
                }
                boolean zero = schema.getFields().stream().allMatch(f -> zeroWidth(f.schema(), enclosing));
                enclosing.remove(schema);
                return zero;
            default:
                return false;
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
            datum = reader.read(lastDatum, decoder);
            lastDatum = datum;
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

    /** A string's text when its bytes are strict UTF-8 (as Python decodes them), else null. ASCII
     *  bytes (all below 0x80) are strict UTF-8 and decode to the same characters: no decoder needed. */
    static String strictUtf8(Object text) {
        if (!(text instanceof Utf8)) {
            return null;
        }
        Utf8 utf8 = (Utf8) text;
        byte[] bytes = utf8.getBytes();
        int length = utf8.getByteLength();
        int i = 0;
        while (i < length && bytes[i] >= 0) {
            i++;
        }
        if (i == length) {
            return new String(bytes, 0, length, StandardCharsets.US_ASCII);
        }
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
