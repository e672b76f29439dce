package pwevent.flink.parsing;

/** JSON text of the values the job's Java operators write (RFC 8259). */
public final class Json {
    private Json() {
    }

    /** `text` as a JSON string: quotes, backslashes and control characters escaped, the rest as is. */
    public static String string(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2).append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
