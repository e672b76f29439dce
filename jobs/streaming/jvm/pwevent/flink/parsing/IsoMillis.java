package pwevent.flink.parsing;

import java.time.DateTimeException;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.ResolverStyle;
import java.util.regex.Pattern;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * The SQL fast path's ISO-8601 times (jobs/streaming/requirement_sql.py): epoch milliseconds of a
 * canonical UTC time {@code YYYY-MM-DDTHH:MM:SS} with an optional fraction of exactly 3 digits, or of
 * 6 digits whose last 3 are {@code 000} (as Python's isoformat writes whole milliseconds), and a
 * trailing {@code Z}; NULL for anything else. Strict: the text must be exactly that form (ASCII
 * digits, nothing before or after), the date and time must exist (no February 30, no February 29
 * outside leap years, no month 13, no hour 24, no minute or second 60) and the year is 0001 to 9999,
 * as Python's {@code datetime.fromisoformat} takes it (jobs/common/slots.py, {@code parse_time_ms}).
 */
public final class IsoMillis extends ScalarFunction {
    private static final long serialVersionUID = 1L;
    private static final Pattern FORM =
            Pattern.compile("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]{3}(?:000)?)?Z");
    private static final DateTimeFormatter SECONDS =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss").withResolverStyle(ResolverStyle.STRICT);
    private static final int SECONDS_CHARS = 19;

    public Long eval(String text) {
        return millis(text);
    }

    /** The epoch milliseconds of {@code text}, or null (see the class comment). */
    public static Long millis(String text) {
        if (text == null || !FORM.matcher(text).matches()) {
            return null;
        }
        try {
            LocalDateTime moment = LocalDateTime.parse(text.substring(0, SECONDS_CHARS), SECONDS);
            if (moment.getYear() < 1) {
                return null;
            }
            long ms = text.length() > SECONDS_CHARS + 1
                    ? Integer.parseInt(text.substring(SECONDS_CHARS + 1, SECONDS_CHARS + 4)) : 0;
            return moment.toInstant(ZoneOffset.UTC).toEpochMilli() + ms;
        } catch (DateTimeException | ArithmeticException e) {
            return null;
        }
    }
}
