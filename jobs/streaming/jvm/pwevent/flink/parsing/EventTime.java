package pwevent.flink.parsing;

import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * Reads the time field of a JSON object for watermarking: the value at a field path (its keys, top
 * level first, as jobs/common/field_paths.py splits the configured path; every key but the last
 * names a nested object) as epoch milliseconds (an integer, a float truncated, or a string of
 * digits) or ISO-8601 (UTC when it has no offset); the last occurrence of a repeated key wins, as in
 * Python's json. A value in the Confluent wire format (byte 0, a 4-byte schema id, then the JSON
 * text) is read without its frame, as the reference parser does. Null for anything else. The slot
 * a record belongs to is decided by the reference parser (jobs/common/records.py) or the SQL fast
 * path; for every record the reference parser accepts, this reads the time it takes (tested
 * against shared vectors, tests/streaming/data/event-time.tsv).
 */
public final class EventTime {
    private static final JsonFactory JSON = new JsonFactory();

    private EventTime() {}

    /** The Confluent wire format's magic byte and frame length (jobs/common/avro_format.py). */
    public static final int FRAME_BYTES = pwevent.flink.contract.Limits.CONFLUENT_FRAME_BYTES;

    public static Long read(byte[] value, String[] path) {
        int start = value.length > 0 && value[0] == 0 ? FRAME_BYTES : 0;
        if (value.length < start) {
            return null;
        }
        try (JsonParser parser = JSON.createParser(value, start, value.length - start)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return null;
            }
            Long found = object(parser, path, 0);
            return parser.nextToken() == null ? found : null;
        } catch (Exception | StackOverflowError e) {
            return null;
        }
    }

    /** The time at path[depth..] in the object whose START_OBJECT was just read; leaves the parser on
     *  its END_OBJECT (an exception on malformed input). The last occurrence of a key decides. */
    private static Long object(JsonParser parser, String[] path, int depth) throws Exception {
        Long found = null;
        JsonToken token;
        while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
            String name = parser.currentName();
            JsonToken v = parser.nextToken();
            if (!path[depth].equals(name)) {
                parser.skipChildren();
            } else if (depth == path.length - 1) {
                found = scalar(parser, v);
            } else if (v == JsonToken.START_OBJECT) {
                found = object(parser, path, depth + 1);
            } else {
                parser.skipChildren();
                found = null;
            }
        }
        if (token != JsonToken.END_OBJECT) {
            throw new IllegalStateException("not an object");
        }
        return found;
    }

    private static Long scalar(JsonParser parser, JsonToken token) throws Exception {
        if (token == JsonToken.VALUE_NUMBER_INT) {
            return parser.getLongValue();
        }
        if (token == JsonToken.VALUE_NUMBER_FLOAT) {
            double d = parser.getDoubleValue();
            return Double.isFinite(d) ? (long) d : null;
        }
        if (token == JsonToken.VALUE_STRING) {
            return text(parser.getText().strip());
        }
        parser.skipChildren();
        return null;
    }

    private static Long text(String text) {
        if (text.matches("-?\\d{1,18}")) {
            return Long.parseLong(text);
        }
        String iso = text.replace("Z", "+00:00");
        try {
            return OffsetDateTime.parse(iso).toInstant().toEpochMilli();
        } catch (Exception notOffset) {
            try {
                return LocalDateTime.parse(iso).toInstant(ZoneOffset.UTC).toEpochMilli();
            } catch (Exception notLocal) {
                try {
                    return LocalDate.parse(iso).atStartOfDay().toInstant(ZoneOffset.UTC).toEpochMilli();
                } catch (Exception notDate) {
                    return null;
                }
            }
        }
    }
}
