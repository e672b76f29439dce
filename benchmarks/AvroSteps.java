package pwevent.flink.avro;

import pwevent.flink.parsing.RecordGroups;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericData;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericDatumReader;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericDatumWriter;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericRecord;
import org.apache.flink.avro.shaded.org.apache.avro.io.BinaryDecoder;
import org.apache.flink.avro.shaded.org.apache.avro.io.BinaryEncoder;
import org.apache.flink.avro.shaded.org.apache.avro.io.DecoderFactory;
import org.apache.flink.avro.shaded.org.apache.avro.io.EncoderFactory;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * What each JVM step of an event's parsing costs, per record, without Flink's runtime
 * (benchmarks/bench_avro_steps.py compiles and runs it; docs/benchmarks.md, "JVM parsing steps per
 * event"): Confluent-framed Avro datums of the benchmark's writer schema and the same events as
 * canonical JSON, then, each timed over every record (best of the rounds, after one warm-up round):
 * <ol>
 *   <li>decode: Apache Avro's generic reader (as AvroCertifier reads);</li>
 *   <li>decode + re-encode + compare: the certificate that the bytes are the one canonical datum;</li>
 *   <li>AvroFields: the whole function (certificate, plain values, the field paths' JSON text);</li>
 *   <li>regex on its text: RecordGroups over what AvroFields rendered;</li>
 *   <li>regex on JSON: RecordGroups over the canonical JSON events (a JSON event's only JVM step).</li>
 * </ol>
 * Arguments: records, rounds, the writer schema's text, the fast path's regex, max bytes.
 */
public final class AvroSteps {
    private AvroSteps() {
    }

    /** A sink for RecordGroups' rows that counts the matches. */
    private static final class Matches implements Collector<Row> {
        long matched;

        @Override
        public void collect(Row row) {
            if (Boolean.TRUE.equals(row.getField(0))) {
                matched++;
            }
        }

        @Override
        public void close() {
        }
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        Schema schema = new Schema.Parser().parse(args[2]);
        String regex = args[3];
        int maxBytes = Integer.parseInt(args[4]);
        long origin = 1_704_067_200_000L;

        byte[][] framed = new byte[n][];
        byte[][] json = new byte[n][];
        GenericDatumWriter<Object> writer = new GenericDatumWriter<>(schema);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        BinaryEncoder encoder = null;
        for (int i = 0; i < n; i++) {
            GenericRecord record = new GenericData.Record(schema);
            String user = "u" + (i % 10_000);
            long time = origin + i * 6L;
            int value = (int) ((i * 7919L) % 100);
            record.put("user", user);
            record.put("time", time);
            record.put("value", value);
            if (schema.getField("amount") != null) {  // bench_stream.py's schema: a decimal and a uuid besides
                record.put("amount", ByteBuffer.wrap(java.math.BigInteger.valueOf(value * 100L + 5).toByteArray()));
                record.put("id", new java.util.UUID(user.hashCode(), time).toString());
            }
            out.reset();
            out.write(0);
            out.write(ByteBuffer.allocate(4).putInt(1).array());
            encoder = EncoderFactory.get().directBinaryEncoder(out, encoder);
            writer.write(record, encoder);
            encoder.flush();
            framed[i] = out.toByteArray();
            json[i] = ("{\"user\":\"" + user + "\",\"time\":" + time + ",\"value\":" + value + "}")
                    .getBytes(StandardCharsets.US_ASCII);
        }

        GenericDatumReader<Object> reader = new GenericDatumReader<>(schema);
        String[][] paths = {{"user"}, {"time"}, {"value"}};
        AvroCertifier certifier = AvroCertifier.of(args[2]);
        byte[][] rendered = new byte[n][];
        Matches matches = new Matches();
        RecordGroups groups = new RecordGroups();
        groups.setCollector(matches);

        String[] names = {"decode", "decode + re-encode + compare", "AvroFields (whole)", "regex on its text",
            "regex on JSON"};
        double[] best = new double[names.length];
        Arrays.fill(best, Double.MAX_VALUE);
        long sink = 0;
        for (int round = 0; round <= rounds; round++) {
            double[] took = new double[names.length];
            long start = System.nanoTime();
            BinaryDecoder decoder = null;
            for (byte[] value : framed) {
                decoder = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, decoder);
                sink += reader.read(null, decoder).hashCode();
            }
            took[0] = System.nanoTime() - start;

            start = System.nanoTime();
            ByteArrayOutputStream again = new ByteArrayOutputStream();
            BinaryEncoder reEncoder = null;
            for (byte[] value : framed) {
                decoder = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, decoder);
                Object datum = reader.read(null, decoder);
                again.reset();
                reEncoder = EncoderFactory.get().directBinaryEncoder(again, reEncoder);
                writer.write(datum, reEncoder);
                reEncoder.flush();
                byte[] bytes = again.toByteArray();
                sink += Arrays.equals(bytes, 0, bytes.length, value, 5, value.length) ? 1 : 0;
            }
            took[1] = System.nanoTime() - start;

            start = System.nanoTime();
            for (int i = 0; i < n; i++) {
                rendered[i] = certifier.project(framed[i], 5, paths);
            }
            took[2] = System.nanoTime() - start;

            matches.matched = 0;
            start = System.nanoTime();
            for (byte[] text : rendered) {
                groups.eval(text, regex, maxBytes);
            }
            took[3] = System.nanoTime() - start;
            long fromAvro = matches.matched;

            matches.matched = 0;
            start = System.nanoTime();
            for (byte[] text : json) {
                groups.eval(text, regex, maxBytes);
            }
            took[4] = System.nanoTime() - start;
            if (fromAvro != n || matches.matched != n) {
                throw new IllegalStateException("the regex matched " + fromAvro + " rendered and " + matches.matched
                        + " JSON records of " + n + ": not the fast path's records");
            }
            if (round > 0) {
                for (int s = 0; s < names.length; s++) {
                    best[s] = Math.min(best[s], took[s] / n);
                }
            }
        }
        System.out.println("step\tns per record (best of " + rounds + ")");
        for (int s = 0; s < names.length; s++) {
            System.out.printf("%s\t%.0f%n", names[s], best[s]);
        }
        System.err.println("(checksum " + sink + ")");
    }
}
