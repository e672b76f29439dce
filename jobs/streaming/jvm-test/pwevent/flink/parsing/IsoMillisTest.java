package pwevent.flink.parsing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** IsoMillis, the SQL fast path's strict reading of canonical UTC ISO-8601 times. */
class IsoMillisTest {
    private static Long eval(String text) {
        return new IsoMillis().eval(text);
    }

    @Test
    void canonicalUtcTimesAreTheirEpochMillis() {
        assertEquals(1_704_067_200_000L, eval("2024-01-01T00:00:00Z"));
        assertEquals(1_704_067_200_123L, eval("2024-01-01T00:00:00.123Z"));
        assertEquals(1_704_067_200_123L, eval("2024-01-01T00:00:00.123000Z"), "isoformat's whole milliseconds");
        assertEquals(1_709_164_800_000L, eval("2024-02-29T00:00:00Z"), "a leap day");
        assertEquals(0L, eval("1970-01-01T00:00:00Z"));
        assertEquals(-1L, eval("1969-12-31T23:59:59.999Z"));
        assertEquals(-62_135_596_800_000L, eval("0001-01-01T00:00:00Z"));
        assertEquals(253_402_300_799_999L, eval("9999-12-31T23:59:59.999Z"));
        assertEquals(951_782_400_000L, eval("2000-02-29T00:00:00Z"), "2000 is a leap year");
    }

    @Test
    void datesAndTimesThatDoNotExistAreNull() {
        assertNull(eval("2023-02-29T00:00:00Z"), "February 29 of a common year");
        assertNull(eval("1900-02-29T00:00:00Z"), "1900 is no leap year");
        assertNull(eval("2024-02-30T00:00:00Z"));
        assertNull(eval("2024-04-31T00:00:00Z"));
        assertNull(eval("2024-13-01T00:00:00Z"));
        assertNull(eval("2024-00-01T00:00:00Z"));
        assertNull(eval("2024-01-00T00:00:00Z"));
        assertNull(eval("2024-01-01T24:00:00Z"));
        assertNull(eval("2024-01-01T00:60:00Z"));
        assertNull(eval("2024-01-01T00:00:60Z"), "no leap seconds");
        assertNull(eval("0000-01-01T00:00:00Z"), "year 0");
    }

    @Test
    void anyOtherFormIsNull() {
        assertNull(eval(null));
        assertNull(eval("2024-01-01T00:00:00"), "no Z");
        assertNull(eval("2024-01-01T00:00:00+00:00"));
        assertNull(eval("2024-01-01 00:00:00Z"));
        assertNull(eval("2024-01-01t00:00:00Z"));
        assertNull(eval("2024-01-01T00:00:00z"));
        assertNull(eval("2024-01-01T00:00Z"));
        assertNull(eval("2024-01-01Z"));
        assertNull(eval("2024-01-01T00:00:00.1Z"));
        assertNull(eval("2024-01-01T00:00:00.12Z"));
        assertNull(eval("2024-01-01T00:00:00.1234Z"));
        assertNull(eval("2024-01-01T00:00:00.123456Z"), "microseconds that are not whole milliseconds");
        assertNull(eval("2024-01-01T00:00:00.Z"));
        assertNull(eval("+2024-01-01T00:00:00Z"));
        assertNull(eval("12024-01-01T00:00:00Z"));
        assertNull(eval(" 2024-01-01T00:00:00Z"));
        assertNull(eval("2024-01-01T00:00:00Z\n"));
        assertNull(eval("2024-01-01T00:00:00ZZ"));
        assertNull(eval("２024-01-01T00:00:00Z"), "a fullwidth digit");
        assertNull(eval("2024-1-01T00:00:00Z"));
    }
}
