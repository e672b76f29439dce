package pwevent.flink.avro;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericData;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericEnumSymbol;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericRecord;
import org.apache.flink.avro.shaded.org.apache.avro.util.Utf8;

/**
 * The values of a datum Apache Avro decoded: whether the Python decoding takes each as it is
 * (strict UTF-8, timestamps a datetime holds), and their JSON text as the fast path's regex reads it.
 */
final class AvroValues {
    /** The epoch milliseconds a Python datetime holds (years 1 to 9999), a day inside each end. */
    static final long MIN_MS = -62_135_596_800_000L + 86_400_000L;
    static final long MAX_MS = 253_402_300_799_999L - 86_400_000L;

    private AvroValues() {
    }

    /** The branch of a union that holds the datum; the schema itself when it is no union. */
    static Schema branch(Schema schema, Object datum) {
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
                return logical == null || epochMs((Long) datum, CertifiableSchema.timestamp(logical)) != null;
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
                Long ms = logical == null ? (Long) datum : epochMs((Long) datum, CertifiableSchema.timestamp(logical));
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
