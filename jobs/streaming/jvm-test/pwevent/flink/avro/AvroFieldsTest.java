package pwevent.flink.avro;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.stream.Collectors;
import org.apache.flink.avro.shaded.org.apache.avro.util.Utf8;
import org.junit.jupiter.api.Test;

/**
 * AvroFields against the reference decoding's vectors (tests/streaming/data/avro-fields.tsv, whose
 * projections tests/streaming/vectors/avro_fields.py writes from jobs/common/avro_format.py): the
 * text it renders of every certified datum, and null wherever a vector says it must not answer.
 */
class AvroFieldsTest {
    /** The strict decoding {@link AvroValues#strictUtf8} must agree with, whatever the bytes. */
    static String strictlyDecoded(byte[] bytes) {
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            return null;
        }
    }

    @Test
    void aStringIsStrictUtf8ExactlyAsTheStrictDecoderSays() {
        Random random = new Random(7);
        for (int n = 0; n < 20_000; n++) {
            byte[] bytes = new byte[random.nextInt(12)];
            for (int i = 0; i < bytes.length; i++) {  // mostly ASCII, some of every other byte
                bytes[i] = (byte) (random.nextInt(4) == 0 ? random.nextInt(256) : random.nextInt(128));
            }
            assertEquals(strictlyDecoded(bytes), AvroValues.strictUtf8(new Utf8(bytes)),
                    () -> Arrays.toString(bytes));
        }
        assertEquals("aé", AvroValues.strictUtf8(new Utf8("aé".getBytes(StandardCharsets.UTF_8))));
        assertNull(AvroValues.strictUtf8(new Utf8(new byte[] {'a', (byte) 0xc0, (byte) 0x80})));  // overlong
        byte[] surrogate = {(byte) 0xed, (byte) 0xa0, (byte) 0x80};
        assertNull(AvroValues.strictUtf8(new Utf8(surrogate)));
    }

    private static final HexFormat HEX = HexFormat.of();

    static List<String[]> vectors() throws Exception {
        Path file = Path.of(System.getProperty("pwevent.avro-fields-vectors", "tests/streaming/data/avro-fields.tsv"));
        return Files.readAllLines(file).stream()
                .filter(line -> !line.isEmpty() && !line.startsWith("#"))
                .map(line -> line.split("\t"))
                .collect(Collectors.toList());
    }

    @Test
    void everyVectorRendersItsProjectionOrNull() throws Exception {
        int rendered = 0;
        for (String[] v : vectors()) {
            String schema = new String(HEX.parseHex(v[1]), StandardCharsets.UTF_8);
            String[][] paths = Arrays.stream(v[2].split(",")).map(p -> p.split("\\.")).toArray(String[][]::new);
            byte[] datum = HEX.parseHex(v[3]);
            AvroCertifier certifier = AvroCertifier.of(schema);
            byte[] out = certifier == null ? null : certifier.project(datum, 0, paths);
            if (v[4].equals("-")) {
                assertNull(out, v[0]);
            } else {
                rendered++;
                assertNotNull(out, v[0]);
                assertEquals(v[4], new String(out, StandardCharsets.US_ASCII), v[0]);
            }
        }
        assertTrue(rendered >= 15, "vectors rendered: " + rendered);
    }

    @Test
    void theScalarFunctionFramesAndSizes() throws Exception {
        String[] canonical = vectors().get(0);
        String schema = new String(HEX.parseHex(canonical[1]), StandardCharsets.UTF_8);
        byte[] datum = HEX.parseHex(canonical[3]);
        AvroFields function = new AvroFields(null);
        assertEquals(canonical[4], new String(function.eval(datum, schema, canonical[2], 100),
                StandardCharsets.US_ASCII));
        assertNull(function.eval(datum, schema, canonical[2], datum.length - 1));
        assertNull(function.eval(datum, "{\"type\": \"nonsense\"}", canonical[2], 100));
        // a registry that does not answer: null, never an exception
        byte[] framed = new byte[datum.length + 5];
        framed[4] = 1;
        System.arraycopy(datum, 0, framed, 5, datum.length);
        AvroFields confluent = new AvroFields(new RegistryClient("http://127.0.0.1:9", 200, "Basic eDp5", null));
        assertNull(confluent.eval(framed, null, canonical[2], 100));
        framed[0] = 1;
        assertNull(confluent.eval(framed, null, canonical[2], 100));
        // nor one whose trust material cannot be read
        AvroFields unreadable = new AvroFields(new RegistryClient("https://127.0.0.1:9", 200, null,
                new RegistryTls("/nonexistent.pem", null, null, null, null)));
        framed[0] = 0;
        assertNull(unreadable.eval(framed, null, canonical[2], 100));
    }

    @Test
    void theRegistryClientNeverShowsItsCredentials() {
        RegistryTls tls = new RegistryTls(null, "/keystore.p12", "PKCS12", "storepass", "keypass");
        RegistryClient client = new RegistryClient("https://registry:8081/", 200, "Bearer s3cret", tls);
        assertEquals("RegistryClient(https://registry:8081)", client.toString());
        assertEquals("RegistryTls(null, /keystore.p12)", tls.toString());
    }

    @Test
    void aHostileCollectionLengthIsNullNotAnError() {
        // {user: "u", time: 0, value: 0, tags: [...]}: the array's block claims about 2^30 items in a
        // 10-byte value; the decoder must not take the whole JVM down trying to hold them.
        String schema = "{\"type\": \"record\", \"name\": \"E\", \"fields\": ["
                + "{\"name\": \"user\", \"type\": \"string\"},"
                + " {\"name\": \"time\", \"type\": \"long\"}, {\"name\": \"value\", \"type\": \"int\"},"
                + " {\"name\": \"tags\", \"type\": {\"type\": \"array\", \"items\": \"string\"}}]}";
        byte[] datum = {2, 'u', 0, 0, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, 0x08, 0};
        AvroCertifier certifier = AvroCertifier.of(schema);
        assertNotNull(certifier);
        assertNull(certifier.project(datum, 0, new String[][] {{"user"}, {"time"}, {"value"}}));
    }

    @Test
    void anArrayOfItemsWithoutBytesIsNeverCertified() {
        // an array of nulls (or of empty records) bounds nothing: two bytes may claim 2^62 items
        for (String items : new String[] {"\"null\"", "{\"type\": \"record\", \"name\": \"Z\", \"fields\": []}",
                "{\"type\": \"fixed\", \"name\": \"F\", \"size\": 0}"}) {
            String schema = "{\"type\": \"record\", \"name\": \"E\", \"fields\": ["
                    + "{\"name\": \"user\", \"type\": \"string\"},"
                    + " {\"name\": \"nothing\", \"type\": {\"type\": \"array\", \"items\": " + items + "}}]}";
            assertNull(AvroCertifier.of(schema), items);
        }
        String strings = "{\"type\": \"record\", \"name\": \"E\", \"fields\": ["
                + "{\"name\": \"user\", \"type\": \"string\"},"
                + " {\"name\": \"tags\", \"type\": {\"type\": \"array\", \"items\": \"string\"}}]}";
        assertNotNull(AvroCertifier.of(strings));
    }

    @Test
    void aDeeplyNestedRecursiveDatumIsNullNotAnError() {
        // A recursive schema and a datum nested 16,000 levels deep (64 KB, the default record
        // size limit, max_record_bytes): decoding recurses once per level.
        String schema = "{\"type\": \"record\", \"name\": \"N\", \"fields\": ["
                + "{\"name\": \"user\", \"type\": \"string\"},"
                + " {\"name\": \"time\", \"type\": \"long\"}, {\"name\": \"value\", \"type\": \"int\"},"
                + " {\"name\": \"next\", \"type\": [\"null\", \"N\"]}]}";
        int depth = 16_000;
        byte[] datum = new byte[depth * 4 + 4];
        for (int level = 0; level < depth; level++) {
            datum[level * 4 + 3] = 2;  // user "", time 0, value 0, next: the union's branch N
        }
        AvroCertifier certifier = AvroCertifier.of(schema);
        assertNotNull(certifier);
        assertNull(certifier.project(datum, 0, new String[][] {{"user"}, {"time"}, {"value"}}));
    }
}
