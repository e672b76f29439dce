package pwevent.flink.parsing;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import pwevent.flink.contract.Limits;

/**
 * The user ids the fast paths extract, as the job keeps them (jobs/common/pseudonyms.py, the rule's
 * one definition): with a key ({@code pseudonymise:}), HMAC-SHA256 under the key's bytes of the id's
 * UTF-8 bytes, lowercase hex cut to {@link Limits#PSEUDONYM_HEX_CHARS} characters; without one
 * ({@link #none()}), the id itself. Used by {@link FastPathSplit} and {@link RequirementSplit}, so the
 * ids the fast paths hand on are the ones the reference parsers (which apply the Python rule) hand
 * on. The key travels inside the serialized operators of the job graph, as their other settings do.
 */
public final class Pseudonyms implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final String ALGORITHM = "HmacSHA256";
    private static final HexFormat HEX = HexFormat.of();
    private final byte[] key;
    private transient Mac mac;

    /** Pseudonyms under {@code key} (the UTF-8 bytes of the configured key; Python checks its length). */
    public Pseudonyms(byte[] key) {
        this.key = key.clone();
    }

    private Pseudonyms() {
        this.key = null;
    }

    /** The ids as they are: no {@code pseudonymise:} configured. */
    public static Pseudonyms none() {
        return new Pseudonyms();
    }

    /** The id {@code user} (a valid user id, or null for a row without one) as the job keeps it. */
    public String name(String user) {
        if (key == null || user == null) {
            return user;
        }
        if (mac == null) {
            try {
                mac = Mac.getInstance(ALGORITHM);
                mac.init(new SecretKeySpec(key, ALGORITHM));
            } catch (GeneralSecurityException e) {
                throw new IllegalStateException("HMAC-SHA256 is part of every Java platform", e);
            }
        }
        byte[] digest = mac.doFinal(user.getBytes(StandardCharsets.UTF_8));
        return HEX.formatHex(digest).substring(0, Limits.PSEUDONYM_HEX_CHARS);
    }
}
