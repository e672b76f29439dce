import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Fast backlog producer for benchmarks/bench_stream.py, run as a single-file source program against
 * the broker's kafka-clients jar:
 *   java -cp '<cache>/kafka/*' benchmarks/BacklogProducer.java BOOTSTRAP TOPIC[@PARTITION]=FILE[#LINES] ...
 * Sends the JSON lines of each FILE (its first LINES lines, else all) to TOPIC in order, one spec
 * after the other: key = the line's "user" field, record timestamp = its "time" field (epoch
 * milliseconds, or an ISO-8601 instant); PARTITION pins the partition, else the key decides (murmur2,
 * as kafka-python's default partitioner). The lines are sent as they are (the fields are found by
 * plain string search, enough for the generated files); FILE%ID sends each line's user (string),
 * time (long), value (int), an amount (decimal(9,2) on bytes: value * 100 + 5 cents) and an id (a
 * uuid made of the user's hash and the time) as an Avro datum in the Confluent wire format with
 * schema id ID instead (the record schema bench_stream.py registers, fields in that order). No compression: the
 * Flink connector jar has no lz4/zstd/snappy. Progress to stderr once a second; exit 0 once everything is acknowledged.
 */
public class BacklogProducer {
    static String field(String line, String name) {
        String tag = "\"" + name + "\":";
        int at = line.indexOf(tag);
        if (at < 0) {
            return null;
        }
        int start = at + tag.length();
        while (start < line.length() && line.charAt(start) == ' ') {
            start++;
        }
        if (start >= line.length()) {
            return null;
        }
        if (line.charAt(start) == '"') {
            int end = line.indexOf('"', start + 1);
            return end < 0 ? null : line.substring(start + 1, end);
        }
        int end = start;
        while (end < line.length() && ",} ".indexOf(line.charAt(end)) < 0) {
            end++;
        }
        return line.substring(start, end);
    }

    static Long timestamp(String value) {
        if (value == null) {
            return null;
        }
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException notANumber) {
            try {
                return Instant.parse(value).toEpochMilli();
            } catch (RuntimeException notAnInstant) {
                return null;
            }
        }
    }

    /** Avro's zigzag varint of a long (the binary encoding of int and long). */
    static void varint(java.io.ByteArrayOutputStream out, long value) {
        long n = (value << 1) ^ (value >> 63);
        while ((n & ~0x7FL) != 0) {
            out.write((int) ((n & 0x7F) | 0x80));
            n >>>= 7;
        }
        out.write((int) n);
    }

    /** The line as {user, time, value, amount, id} in the Confluent wire format with `schemaId`. */
    static byte[] avroConfluent(String line, int schemaId) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(80);
        out.write(0);
        out.writeBytes(java.nio.ByteBuffer.allocate(4).putInt(schemaId).array());
        String userText = field(line, "user");
        byte[] user = userText.getBytes(StandardCharsets.UTF_8);
        varint(out, user.length);
        out.writeBytes(user);
        long time = timestamp(field(line, "time"));
        varint(out, time);
        int value = Integer.parseInt(field(line, "value"));
        varint(out, value);
        byte[] amount = java.math.BigInteger.valueOf(value * 100L + 5).toByteArray();
        varint(out, amount.length);
        out.writeBytes(amount);
        byte[] id = new java.util.UUID(userText.hashCode(), time).toString().getBytes(StandardCharsets.US_ASCII);
        varint(out, id.length);
        out.writeBytes(id);
        return out.toByteArray();
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(512 * 1024));
        props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(128L * 1024 * 1024));
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        long sent = 0;
        long started = System.nanoTime();
        long nextReport = started + 1_000_000_000L;
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 1; i < args.length; i++) {
                String spec = args[i];
                int eq = spec.indexOf('=');
                String target = spec.substring(0, eq);
                String source = spec.substring(eq + 1);
                String topic = target;
                Integer partition = null;
                if (target.contains("@")) {
                    topic = target.substring(0, target.indexOf('@'));
                    partition = Integer.parseInt(target.substring(target.indexOf('@') + 1));
                }
                Integer schemaId = null;
                if (source.contains("%")) {
                    schemaId = Integer.parseInt(source.substring(source.lastIndexOf('%') + 1));
                    source = source.substring(0, source.lastIndexOf('%'));
                }
                long limit = Long.MAX_VALUE;
                if (source.contains("#")) {
                    limit = Long.parseLong(source.substring(source.lastIndexOf('#') + 1));
                    source = source.substring(0, source.lastIndexOf('#'));
                }
                long lines = 0;
                try (BufferedReader reader = Files.newBufferedReader(Path.of(source), StandardCharsets.UTF_8)) {
                    String line;
                    while (lines < limit && (line = reader.readLine()) != null) {
                        if (line.isBlank()) {
                            continue;
                        }
                        lines++;
                        String user = field(line, "user");
                        byte[] key = user == null ? null : user.getBytes(StandardCharsets.UTF_8);
                        byte[] value = schemaId == null ? line.getBytes(StandardCharsets.UTF_8)
                                : avroConfluent(line, schemaId);
                        producer.send(new ProducerRecord<>(topic, partition, timestamp(field(line, "time")), key,
                                value), (meta, error) -> {
                                    if (error != null) {
                                        failure.compareAndSet(null, error);
                                    }
                                });
                        sent++;
                        if (failure.get() != null) {
                            throw failure.get();
                        }
                        if ((sent & 0xFFF) == 0 && System.nanoTime() >= nextReport) {
                            double s = (System.nanoTime() - started) / 1e9;
                            System.err.printf("\rproduce: %,d messages in %.0fs (%,.0f/s)", sent, s, sent / s);
                            nextReport += 1_000_000_000L;
                        }
                    }
                }
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        double s = (System.nanoTime() - started) / 1e9;
        System.err.printf("\rproduce: %,d messages in %.1fs (%,.0f/s)%n", sent, s, sent / s);
        System.out.println(sent);
    }
}
