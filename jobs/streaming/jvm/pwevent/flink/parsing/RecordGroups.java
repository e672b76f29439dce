package pwevent.flink.parsing;

import java.nio.charset.StandardCharsets;
import pwevent.flink.contract.RecordGroupsRow;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.functions.TableFunction;
import org.apache.flink.types.Row;

/**
 * The SQL fast path's one look at a raw event (jobs/streaming/event_sql.py): exactly one row per
 * record, {@link RecordGroupsRow} (matched, g1..g10). {@code matched} is true when the record is at
 * most {@code maxBytes} long (frame included), its text (the bytes after a Confluent frame, magic byte 0 and a 4-byte
 * schema id, as the reference parser takes it off; else all of them) has only printable ASCII bytes
 * (so it is the same under any ASCII-compatible decoding, UTF-8 included), and the regular
 * expression finds a match in that text (the caller anchors it); g1..g10 are
 * then the pattern's capturing groups (null past its group count or where a group did not take
 * part). One call per record replaces the JSON_VALUE call per field and per reference that the
 * planner's inlining made of the SQL version.
 */
@FunctionHint(output = @DataTypeHint(RecordGroupsRow.SQL))
public final class RecordGroups extends TableFunction<Row> {
    private static final long serialVersionUID = 1L;
    public static final int GROUPS = RecordGroupsRow.ARITY - RecordGroupsRow.G1;
    private transient String compiledFrom;
    private transient Pattern pattern;

    public void eval(byte[] value, String regex, Integer maxBytes) {
        Object[] fields = new Object[RecordGroupsRow.ARITY];
        fields[RecordGroupsRow.MATCHED] = false;
        int start = value != null && value.length > 0 && value[0] == 0 ? EventTime.FRAME_BYTES : 0;
        if (value != null && regex != null && maxBytes != null && value.length <= maxBytes && value.length >= start
                && printable(value, start)) {
            if (!regex.equals(compiledFrom)) {
                pattern = Pattern.compile(regex);
                compiledFrom = regex;
            }
            Matcher m = pattern.matcher(new String(value, start, value.length - start, StandardCharsets.US_ASCII));
            if (m.find()) {
                fields[RecordGroupsRow.MATCHED] = true;
                for (int i = 1; i <= Math.min(GROUPS, m.groupCount()); i++) {
                    fields[RecordGroupsRow.G1 + i - 1] = m.group(i);
                }
            }
        }
        collect(Row.of(fields));
    }

    private static boolean printable(byte[] value, int start) {
        for (int i = start; i < value.length; i++) {
            byte b = value[i];
            if (b < 0x20 || b > 0x7e) {
                return false;
            }
        }
        return true;
    }
}
