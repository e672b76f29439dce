package pwevent.flink;

import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * Reads a top-level time field of a JSON object for watermarking: epoch milliseconds (an integer,
 * a float truncated, or a string of digits) or ISO-8601 (UTC when it has no offset); the last
 * occurrence of a repeated key wins, as in Python's json. Null for anything else. The slot a record
 * belongs to is decided by the reference parser (jobs/common/records.py) or the SQL fast path,
 * which takes a record only when its time equals this one.
 */
public final class EventTime {
    private static final JsonFactory JSON = new JsonFactory();

    private EventTime() {}

    public static Long read(byte[] value, String field) {
        try (JsonParser parser = JSON.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return null;
            }
            Long found = null;
            JsonToken token;
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                String name = parser.currentName();
                JsonToken v = parser.nextToken();
                if (field.equals(name)) {
                    found = scalar(parser, v);
                } else {
                    parser.skipChildren();
                }
            }
            return token == JsonToken.END_OBJECT && parser.nextToken() == null ? found : null;
        } catch (Exception | StackOverflowError e) {
            return null;
        }
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
