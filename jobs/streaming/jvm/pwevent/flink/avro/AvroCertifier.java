package pwevent.flink.avro;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericDatumReader;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericDatumWriter;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericRecord;
import org.apache.flink.avro.shaded.org.apache.avro.io.BinaryDecoder;
import org.apache.flink.avro.shaded.org.apache.avro.io.BinaryEncoder;
import org.apache.flink.avro.shaded.org.apache.avro.io.DecoderFactory;
import org.apache.flink.avro.shaded.org.apache.avro.io.EncoderFactory;
import org.apache.flink.avro.shaded.org.apache.avro.util.Utf8;

/**
 * One writer schema that {@link AvroFields}' rules can certify ({@link CertifiableSchema}): decodes
 * its datums, keeps those that re-encode to their own bytes and hold only values the Python decoding
 * takes as they are ({@link AvroValues}), and projects them onto field paths as JSON text.
 */
final class AvroCertifier {
    /** The room an array is given before its items arrive (its block's count is the writer's claim). */
    static final int ARRAY_ROOM = 64;

    final Schema schema;
    private final GenericDatumReader<Object> reader;
    private final GenericDatumWriter<Object> writer;
    private BinaryDecoder decoder;
    /** The last datum read, whose objects the next read reuses (a datum is never kept past a call). */
    private Object lastDatum;
    private BinaryEncoder encoder;
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    private AvroCertifier(Schema schema) {
        this.schema = schema;
        this.reader = new GenericDatumReader<>(schema) {
            @Override
            protected Object newMap(Object old, int size) {
                return new LinkedHashMap<>(); // in the order written, so re-encoding can compare
            }

            @Override
            protected Object newArray(Object old, int size, Schema arraySchema) {
                // a block's count is the writer's claim: room for at most one item per byte left grows as items come
                return super.newArray(old, Math.min(size, ARRAY_ROOM), arraySchema);
            }
        };
        this.writer = new GenericDatumWriter<>(schema);
    }

    /** The certifier of a schema's text, or null when it does not parse or is not certifiable. */
    static AvroCertifier of(String text) {
        if (text == null) {
            return null;
        }
        try {
            Schema schema = new Schema.Parser().parse(text);
            return CertifiableSchema.certifiable(schema) ? new AvroCertifier(schema) : null;
        } catch (RuntimeException e) {
            return null;
        }
    }

    /**
     * The projection of the datum in {@code value[start:]} onto {@code paths}, or null; never an error,
     * whatever the bytes: a datum nested deeper than the thread's stack (a recursive schema) is left
     * to the reference parser too.
     */
    byte[] project(byte[] value, int start, String[][] paths) {
        try {
            return certifiedProjection(value, start, paths);
        } catch (StackOverflowError e) {
            return null;
        }
    }

    /** {@link #project}, which may overflow the stack on a deeply nested datum. */
    private byte[] certifiedProjection(byte[] value, int start, String[][] paths) {
        Object datum;
        try {
            decoder = DecoderFactory.get().binaryDecoder(value, start, value.length - start, decoder);
            datum = reader.read(lastDatum, decoder);
            lastDatum = datum;
            out.reset();
            encoder = EncoderFactory.get().directBinaryEncoder(out, encoder);
            writer.write(datum, encoder);
            encoder.flush();
        } catch (IOException | RuntimeException e) {
            return null;
        }
        byte[] again = out.toByteArray();
        if (!Arrays.equals(again, 0, again.length, value, start, value.length)
                || !AvroValues.plainValues(datum, schema)) {
            return null;
        }
        Map<String, Object> root = new LinkedHashMap<>();
        for (String[] keys : paths) {
            Object leaf = datum;
            Schema leafSchema = schema;
            for (String key : keys) {
                if (leaf instanceof GenericRecord) {
                    Schema.Field field = leafSchema.getField(key);
                    leaf = field == null ? null : ((GenericRecord) leaf).get(field.pos());
                    leafSchema = field == null ? null : AvroValues.branch(field.schema(), leaf);
                } else if (leaf instanceof Map) {
                    leaf = ((Map<?, ?>) leaf).get(new Utf8(key));
                    leafSchema = AvroValues.branch(leafSchema.getValueType(), leaf);
                } else if (leaf != null) {
                    return null; // a path through a scalar or an array: the reference parser says why
                }
            }
            if (leaf == null) {
                continue; // absent: the rendered object lacks it, as the decoded one does
            }
            String text = AvroValues.render(leaf, leafSchema);
            if (text == null) {
                return null;
            }
            Map<String, Object> node = root;
            for (int i = 0; i < keys.length - 1; i++) {
                Object child = node.computeIfAbsent(keys[i], k -> new LinkedHashMap<String, Object>());
                if (!(child instanceof Map)) {
                    return null;
                }
                @SuppressWarnings("unchecked")
                Map<String, Object> inner = (Map<String, Object>) child;
                node = inner;
            }
            if (node.putIfAbsent(keys[keys.length - 1], text) != null) {
                return null;
            }
        }
        StringBuilder json = new StringBuilder();
        object(root, json);
        return json.toString().getBytes(StandardCharsets.US_ASCII);
    }

    private static void object(Map<String, Object> node, StringBuilder json) {
        json.append('{');
        boolean first = true;
        for (Map.Entry<String, Object> member : node.entrySet()) {
            json.append(first ? "\"" : ",\"").append(member.getKey()).append("\":");
            first = false;
            if (member.getValue() instanceof String) {
                json.append((String) member.getValue());
            } else {
                @SuppressWarnings("unchecked")
                Map<String, Object> inner = (Map<String, Object>) member.getValue();
                object(inner, json);
            }
        }
        json.append('}');
    }
}
