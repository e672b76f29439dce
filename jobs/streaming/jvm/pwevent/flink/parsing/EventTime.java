package pwevent.flink.parsing;

import java.math.BigInteger;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * Reads the time field of a JSON object for watermarking: the value at a field path (its keys, top
 * level first, as jobs/common/field_paths.py splits the configured path; every key but the last
 * names a nested object) as epoch milliseconds (an integer, a float floored, or a string of ASCII
 * digits) or ISO-8601 (UTC when it has no offset; digits beyond the millisecond dropped toward the
 * past), by the rule of jobs/common/slots.py's {@code parse_time_ms} (ASCII digits only, JSON
 * whitespace around a string only; docs/formats.md, "Times"); the last occurrence of a repeated key wins, as in
 * Python's json. A value in the Confluent wire format (byte 0, a 4-byte schema id, then the JSON
 * text) is read without its frame, as the reference parser does. Null for anything else. The slot
 * a record belongs to is decided by the reference parser (jobs/common/records.py) or the SQL fast
 * path; for every record the reference parser accepts, this reads the time it takes (tested
 * against shared vectors, tests/streaming/data/event-time.tsv).
 */
public final class EventTime {
    private static final JsonFactory JSON = new JsonFactory();

    private EventTime() {}

    /** The whitespace a time string may have around it: JSON's (slots.py, TIME_SPACE). */
    private static final String TIME_SPACE = " \t\n\r";
    private static final Pattern EPOCH_MS = Pattern.compile("-?[0-9]+");
    /** The ISO-8601 form parse_time_ms takes (slots.py, _ISO_TIME). */
    private static final Pattern ISO_TIME = Pattern.compile("([0-9]{4})-([0-9]{2})-([0-9]{2})"
            + "(?:[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\\.([0-9]{1,9}))?)?"
            + "([Zz]|([+-])([0-9]{2}):([0-9]{2}))?)?");
    private static final long DAY_MS = 86_400_000L;

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
            return Double.isFinite(d) ? (long) Math.floor(d) : null;
        }
        if (token == JsonToken.VALUE_STRING) {
            return text(parser.getText());
        }
        parser.skipChildren();
        return null;
    }

    /** A time string's epoch milliseconds, or null: the rule of slots.py's parse_time_ms (see the class comment). */
    static Long text(String value) {
        int start = 0;
        int end = value.length();
        while (start < end && TIME_SPACE.indexOf(value.charAt(start)) >= 0) {
            start++;
        }
        while (end > start && TIME_SPACE.indexOf(value.charAt(end - 1)) >= 0) {
            end--;
        }
        String text = value.substring(start, end);
        if (EPOCH_MS.matcher(text).matches()) {
            BigInteger ms = new BigInteger(text);
            return ms.bitLength() < Long.SIZE ? ms.longValue() : null;
        }
        Matcher iso = ISO_TIME.matcher(text);
        if (!iso.matches()) {
            return null;
        }
        int year = number(iso, 1);
        try {
            long day = LocalDate.of(year, number(iso, 2), number(iso, 3)).toEpochDay();
            int hour = number(iso, 4);
            int minute = number(iso, 5);
            int second = number(iso, 6);
            int offsetHour = number(iso, 10);
            int offsetMinute = number(iso, 11);
            if (year < 1 || hour > 23 || minute > 59 || second > 59 || offsetHour > 23 || offsetMinute > 59) {
                return null;
            }
            String fraction = iso.group(7) == null ? "" : iso.group(7);
            long fractionMs = Long.parseLong((fraction + "000").substring(0, 3));
            long offsetMs = (offsetHour * 60L + offsetMinute) * 60_000L * ("-".equals(iso.group(9)) ? -1 : 1);
            return day * DAY_MS + ((hour * 60L + minute) * 60L + second) * 1000L + fractionMs - offsetMs;
        } catch (DateTimeException e) {
            return null;
        }
    }

    /** Group `group` of a match of ISO_TIME as a number, 0 when it did not take part. */
    private static int number(Matcher iso, int group) {
        return iso.group(group) == null ? 0 : Integer.parseInt(iso.group(group));
    }
}
