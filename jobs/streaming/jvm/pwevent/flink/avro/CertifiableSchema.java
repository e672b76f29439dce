package pwevent.flink.avro;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;

/**
 * Which writer schemas {@link AvroFields}' rules can certify: a record at the top level, no logical
 * type but the four timestamps on a long, no array whose items encode to no bytes.
 */
final class CertifiableSchema {
    private CertifiableSchema() {
    }

    /** Whether {@link AvroCertifier} can certify the datums of a writer schema. */
    static boolean certifiable(Schema schema) {
        return schema.getType() == Schema.Type.RECORD
                && plainTypes(schema, Collections.newSetFromMap(new IdentityHashMap<>()));
    }

    private static boolean plainTypes(Schema schema, Set<Schema> seen) {
        if (!seen.add(schema)) {
            return true;
        }
        String logical = schema.getProp("logicalType");
        if (logical != null && !(schema.getType() == Schema.Type.LONG && timestamp(logical) != 0)) {
            return false;
        }
        switch (schema.getType()) {
            case RECORD:
                return schema.getFields().stream().allMatch(f -> plainTypes(f.schema(), seen));
            case UNION:
                return schema.getTypes().stream().allMatch(s -> plainTypes(s, seen));
            case ARRAY:  // items of no bytes: a few bytes could claim 2^63 of them (jobs/common/avro_schema.py)
                return !zeroWidth(schema.getElementType(), Collections.newSetFromMap(new IdentityHashMap<>()))
                        && plainTypes(schema.getElementType(), seen);
            case MAP:
                return plainTypes(schema.getValueType(), seen);
            default:
                return true;
        }
    }

    /** Whether every value of the schema encodes to no bytes: null, a fixed of size 0, a record of
     *  only such fields (avro_schema.zero_width_items, the reference parser's rule). */
    static boolean zeroWidth(Schema schema, Set<Schema> enclosing) {
        switch (schema.getType()) {
            case NULL:
                return true;
            case FIXED:
                return schema.getFixedSize() == 0;
            case RECORD:
                if (!enclosing.add(schema)) {
                    return false;  // a record inside itself: only a union (a byte) can end it
                }
                boolean zero = schema.getFields().stream().allMatch(f -> zeroWidth(f.schema(), enclosing));
                enclosing.remove(schema);
                return zero;
            default:
                return false;
        }
    }

    /** Micros per millisecond of a timestamp logical type, 0 for any other name. */
    static int timestamp(String logical) {
        switch (logical) {
            case "timestamp-millis":
            case "local-timestamp-millis":
                return 1;
            case "timestamp-micros":
            case "local-timestamp-micros":
                return 1000;
            default:
                return 0;
        }
    }
}
