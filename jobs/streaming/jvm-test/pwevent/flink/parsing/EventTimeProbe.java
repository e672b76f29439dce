package pwevent.flink.parsing;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.StringJoiner;
import org.apache.flink.types.Row;

/**
 * The JVM side of the cross-language fuzz (tests/streaming/test_contract_fuzz.py, which runs it by
 * `deploy/local/test-jvm.sh --main`; the time reader's probe, and the fast path's pieces beside it):
 * reads one question a line from stdin and answers each on a
 * line of stdout, at once, with what the job's Java says. Arguments are hex of their UTF-8 bytes.
 * <ul>
 *   <li>{@code time KEYS RECORD}: {@link EventTime#read} of the record's bytes at the path whose
 *       keys (comma-separated) are given; the milliseconds or {@code -}.</li>
 *   <li>{@code iso TEXT}: {@link IsoMillis#millis}; the milliseconds or {@code -}.</li>
 *   <li>{@code groups REGEX RECORD}: {@link RecordGroups} (limit 65536 bytes); {@code -} when it does
 *       not match, else its groups, each as hex or {@code .} for null, tab-separated.</li>
 *   <li>{@code pseudonym KEY USER}: {@link Pseudonyms#name} of the user id under the key.</li>
 * </ul>
 */
final class EventTimeProbe {
    private static final HexFormat HEX = HexFormat.of();
    private static final int MAX_BYTES = 65_536;

    private EventTimeProbe() {}

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        RecordGroups groups = new RecordGroups();
        List<Row> rows = new ArrayList<>();
        groups.setCollector(new org.apache.flink.api.common.functions.util.ListCollector<>(rows));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            out.println(switch (f[0]) {
                case "time" -> answer(EventTime.read(HEX.parseHex(f[2]), keys(f[1])));
                case "iso" -> answer(IsoMillis.millis(text(f[1])));
                case "groups" -> {
                    rows.clear();
                    groups.eval(HEX.parseHex(f[2]), text(f[1]), MAX_BYTES);
                    yield matched(rows.get(0));
                }
                case "pseudonym" -> new Pseudonyms(HEX.parseHex(f[1])).name(text(f[2]));
                default -> throw new IllegalArgumentException("no such question: " + f[0]);
            });
        }
    }

    private static String text(String hex) {
        return new String(HEX.parseHex(hex), StandardCharsets.UTF_8);
    }

    private static String[] keys(String column) {
        String[] hex = column.split(",");
        String[] out = new String[hex.length];
        for (int i = 0; i < hex.length; i++) {
            out[i] = text(hex[i]);
        }
        return out;
    }

    private static String answer(Long ms) {
        return ms == null ? "-" : ms.toString();
    }

    private static String matched(Row row) {
        if (!Boolean.TRUE.equals(row.getField(0))) {
            return "-";
        }
        StringJoiner out = new StringJoiner("\t");
        for (int i = 1; i <= RecordGroups.GROUPS; i++) {
            Object group = row.getField(i);
            out.add(group == null ? "." : HEX.formatHex(((String) group).getBytes(StandardCharsets.UTF_8)));
        }
        return out.toString();
    }
}
