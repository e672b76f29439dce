package pwevent.flink.avro;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;

/**
 * Which writer schemas {@link AvroFields}' rules can certify: a record at the top level, logical
 * types only those of the Avro specification on their own underlying types (a decimal only with a
 * precision and scale fastavro takes), no array whose items encode to no bytes.
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
        if (!knownLogicalType(schema)) {
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

    /**
     * Whether a schema's logical type, if it has one, is one of the Avro specification's on its own
     * underlying type, which fastavro reads as jobs/common/avro_format.py expects (the timestamps,
     * date, time-millis, time-micros, uuid on a string, a valid decimal) or leaves as the underlying
     * value (timestamp-nanos, local-timestamp-nanos, big-decimal, duration on a fixed of 12).
     */
    static boolean knownLogicalType(Schema schema) {
        String logical = schema.getProp("logicalType");
        if (logical == null) {
            return true;
        }
        switch (schema.getType()) {
            case INT:
                return "date".equals(logical) || "time-millis".equals(logical);
            case LONG:
                return timestamp(logical) != 0 || "time-micros".equals(logical) || "timestamp-nanos".equals(logical)
                        || "local-timestamp-nanos".equals(logical);
            case STRING:
                return "uuid".equals(logical);
            case BYTES:
                return "big-decimal".equals(logical) || "decimal".equals(logical) && decimal(schema, Integer.MAX_VALUE);
            case FIXED:
                return "duration".equals(logical) && schema.getFixedSize() == 12
                        || "decimal".equals(logical) && decimal(schema, fixedDigits(schema.getFixedSize()));
            default:
                return false;
        }
    }

    /** Whether a decimal's precision is a positive integer up to {@code maxPrecision} and its scale
     *  (default 0) an integer from 0 to the precision, as fastavro's schema parser requires. */
    private static boolean decimal(Schema schema, int maxPrecision) {
        Object precision = schema.getObjectProp("precision");
        Object scale = schema.getObjectProp("scale");
        if (!(precision instanceof Integer) || scale != null && !(scale instanceof Integer)) {
            return false;
        }
        int p = (Integer) precision;
        int s = scale == null ? 0 : (Integer) scale;
        return p >= 1 && p <= maxPrecision && s >= 0 && s <= p;
    }

    /** The largest precision of a decimal on a fixed of {@code size} bytes, as fastavro computes it. */
    private static int fixedDigits(int size) {
        return size < 1 ? 0 : (int) Math.floor(Math.log10(2) * (8 * size - 1));
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
