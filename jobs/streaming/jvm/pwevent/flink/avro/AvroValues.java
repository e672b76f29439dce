package pwevent.flink.avro;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
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
    /** The days since the epoch a Python date holds (0001-01-01 to 9999-12-31). */
    static final int MIN_DAY = -719_162;
    static final int MAX_DAY = 2_932_896;
    static final long MS_PER_DAY = 86_400_000L;
    /** The most bytes of a decimal's unscaled value certified (Python's decimal context overflows
     *  only past a million digits; far above any precision a schema declares). */
    static final int DECIMAL_BYTES = 64;
    /** A uuid as Java and Python both write it: 8-4-4-4-12 hex digits. */
    private static final Pattern UUID_TEXT =
            Pattern.compile("[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}");

    private AvroValues() {
    }

    /** The branch of a union that holds the datum; the schema itself when it is no union. */
    static Schema branch(Schema schema, Object datum) {
        return schema.getType() == Schema.Type.UNION
                ? schema.getTypes().get(GenericData.get().resolveUnion(schema, datum)) : schema;
    }

    /**
     * Whether the decoded datum holds only what the Python decoding also takes: strict UTF-8
     * strings and map keys, timestamps a datetime holds, dates a date holds, times of day within
     * the day, uuids of 32 hex digits in the 8-4-4-4-12 form, decimals of at most
     * {@link #DECIMAL_BYTES} bytes.
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
                String text = strictUtf8(datum);
                return text != null && (!"uuid".equals(s.getProp("logicalType")) || UUID_TEXT.matcher(text).matches());
            case INT:
            case LONG:
                return decodable(s, ((Number) datum).longValue());
            case BYTES:
                return !"decimal".equals(s.getProp("logicalType")) || ((ByteBuffer) datum).remaining() <= DECIMAL_BYTES;
            case FIXED:
                return !"decimal".equals(s.getProp("logicalType")) || s.getFixedSize() <= DECIMAL_BYTES;
            default:
                return true;
        }
    }

    /** Whether Python decodes an int's or long's value: a timestamp a datetime holds, a date a date
     *  holds, a time of day within the day; any number without a logical type or of one fastavro
     *  leaves as it is (the nanosecond timestamps). */
    static boolean decodable(Schema s, long raw) {
        String logical = s.getProp("logicalType");
        if (logical == null) {
            return true;
        }
        switch (logical) {
            case "date":
                return raw >= MIN_DAY && raw <= MAX_DAY;
            case "time-millis":
                return raw >= 0 && raw < MS_PER_DAY;
            case "time-micros":
                return raw >= 0 && raw < MS_PER_DAY * 1000;
            case "timestamp-nanos":
            case "local-timestamp-nanos":
                return true;
            default:
                return epochMs(raw, CertifiableSchema.timestamp(logical)) != null;
        }
    }

    /** The JSON number of a decodable int or long as the Python decoding makes it: a timestamp's or a
     *  date's epoch milliseconds (micros floored), else the number; null for a time of day (a Python
     *  time, no JSON value). */
    static Long jsonNumber(Schema s, long raw) {
        String logical = s.getProp("logicalType");
        if (logical == null || "timestamp-nanos".equals(logical) || "local-timestamp-nanos".equals(logical)) {
            return raw;
        }
        switch (logical) {
            case "date":
                return raw * MS_PER_DAY;
            case "time-millis":
            case "time-micros":
                return null;
            default:
                return epochMs(raw, CertifiableSchema.timestamp(logical));
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
            case LONG:
                long raw = ((Number) datum).longValue();
                Long json = decodable(s, raw) ? jsonNumber(s, raw) : null;
                return json == null ? null : json.toString();
            case FLOAT:
            case DOUBLE:
                double number = ((Number) datum).doubleValue();
                String decimal = Double.toString(number);
                return Double.isFinite(number) && decimal.indexOf('E') < 0 ? decimal : null;
            case STRING:
                String decoded = strictUtf8(datum);
                if (decoded != null && "uuid".equals(s.getProp("logicalType"))) {
                    return UUID_TEXT.matcher(decoded).matches() ? string(decoded.toLowerCase(Locale.ROOT)) : null;
                }
                return string(decoded);
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
                return null; // bytes, fixed (a decimal, a duration): the reference parser says what they are
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
