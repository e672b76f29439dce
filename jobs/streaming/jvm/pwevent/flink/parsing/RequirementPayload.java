package pwevent.flink.parsing;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * What a parsed requirement record carries to Membership, in the `original` field of
 * {@link ValidTime#IN}'s rows (jobs/streaming/requirement_payload.py writes the same bytes
 * in Python): the requirement as declared and the one its ledger would run at, both as canonical
 * JSON (keys sorted, no spaces: {@code orjson.dumps(r.to_json(), option=OPT_SORT_KEYS)}), or instead
 * of the latter why no ledger can (jobs/common/requirement_rules.py, {@code ledger_requirement}),
 * and the record's bytes for a dead letter.
 *
 * <p>Bytes: version 1, then four fields (requested, ledger, detail: UTF-8; original), each a
 * big-endian int32 length (-1: null) and that many bytes.
 */
public record RequirementPayload(String requested, String ledger, String detail, byte[] original) {
    private static final byte VERSION = 1;

    public RequirementPayload {
        if (requested == null || original == null || (ledger == null) == (detail == null)) {
            throw new IllegalArgumentException("a payload has a requested requirement, its original, and a ledger"
                    + " requirement or a detail, not both");
        }
    }

    /** Whether the requirement, as a user's first, registers the user (RequirementRules.registers). */
    public boolean registers() {
        return ledger != null;
    }

    public byte[] encode() {
        byte[][] fields = {utf8(requested), utf8(ledger), utf8(detail), original};
        int size = 1;
        for (byte[] field : fields) {
            size += 4 + (field == null ? 0 : field.length);
        }
        ByteBuffer out = ByteBuffer.allocate(size).put(VERSION);
        for (byte[] field : fields) {
            out.putInt(field == null ? -1 : field.length);
            if (field != null) {
                out.put(field);
            }
        }
        return out.array();
    }

    public static RequirementPayload decode(byte[] bytes) {
        ByteBuffer in = ByteBuffer.wrap(bytes);
        if (in.get() != VERSION) {
            throw new IllegalArgumentException("requirement payload of version " + bytes[0] + "; this release reads "
                    + VERSION);
        }
        byte[][] fields = new byte[4][];
        for (int i = 0; i < fields.length; i++) {
            int length = in.getInt();
            if (length >= 0) {
                fields[i] = new byte[length];
                in.get(fields[i]);
            }
        }
        if (in.hasRemaining()) {
            throw new IllegalArgumentException("requirement payload with " + in.remaining() + " bytes past its end");
        }
        return new RequirementPayload(text(fields[0]), text(fields[1]), text(fields[2]), fields[3]);
    }

    private static byte[] utf8(String text) {
        return text == null ? null : text.getBytes(StandardCharsets.UTF_8);
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
