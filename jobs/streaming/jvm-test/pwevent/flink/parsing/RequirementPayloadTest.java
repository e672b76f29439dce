package pwevent.flink.parsing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/**
 * RequirementPayload: what a parsed requirement record carries to Membership reads back as it was
 * written, with a ledger requirement or a detail and never both, in the bytes
 * jobs/streaming/requirement_payload.py writes.
 */
class RequirementPayloadTest {
    private static final String REQUESTED = "{\"epsilon\":1.0,\"w\":10}";

    static RequirementPayload roundTrip(RequirementPayload payload) {
        return RequirementPayload.decode(payload.encode());
    }

    static void assertSame(RequirementPayload expected, RequirementPayload actual) {
        assertEquals(expected.requested(), actual.requested());
        assertEquals(expected.ledger(), actual.ledger());
        assertEquals(expected.detail(), actual.detail());
        assertArrayEquals(expected.original(), actual.original());
    }

    @Test
    void aPayloadReadsBackAsItWasWritten() {
        var withLedger = new RequirementPayload(REQUESTED, "{\"epsilon\":0.5,\"w\":10}", null, new byte[] {0, -1, 7});
        var withDetail = new RequirementPayload(REQUESTED, null, "épsilon ≤ 0: 拒否", new byte[0]);
        var nonAscii = new RequirementPayload("{\"名前\":\"ü\"}", "{\"名前\":\"ü\"}", null,
                "{\"名前\":\"ü\"}".getBytes(StandardCharsets.UTF_8));
        for (var payload : new RequirementPayload[] {withLedger, withDetail, nonAscii}) {
            assertSame(payload, roundTrip(payload));
        }
        assertEquals(true, roundTrip(withLedger).registers());
        assertEquals(false, roundTrip(withDetail).registers());
    }

    @Test
    void aPayloadHasALedgerRequirementOrADetailNotBothNorNeither() {
        byte[] none = new byte[0];
        assertThrows(IllegalArgumentException.class, () -> new RequirementPayload(REQUESTED, REQUESTED, "why", none));
        assertThrows(IllegalArgumentException.class, () -> new RequirementPayload(REQUESTED, null, null, none));
    }

    @Test
    void theBytesAreThoseThePythonSideWrites() {
        String requested = HexFormat.of().formatHex(REQUESTED.getBytes(StandardCharsets.US_ASCII));
        byte[] expected = HexFormat.of().parseHex(
                "01" + "00000016" + requested + "00000016" + requested + "ffffffff" + "00000003" + "7b787d");
        var payload = new RequirementPayload(REQUESTED, REQUESTED, null, "{x}".getBytes(StandardCharsets.US_ASCII));
        assertArrayEquals(expected, payload.encode());
        assertSame(payload, RequirementPayload.decode(expected));
    }
}
