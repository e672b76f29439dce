package pwevent.flink.avro;

import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The JVM fast path's Schema Registry client: {@code GET /schemas/ids/{id}} at the registry of an
 * {@code avro-confluent} input, with what its {@code schema_registry} settings give
 * (jobs/common/config.py, {@code SchemaRegistrySection}): the {@code Authorization} header (HTTP
 * basic or bearer, built by the Python settings, the one definition of it), the CA file (PEM) the
 * registry's certificate must chain to (else the JVM's trusted CAs), and the client's key and
 * certificate as a PKCS12 or JKS keystore. The host name is always checked. Built in the Python
 * client and handed to the job in {@link AvroFields}' instance, never in the SQL text, so the
 * credentials appear in no plan or operator name.
 */
public final class RegistryClient implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String url;
    private final int timeoutMs;
    private final String authorization;
    private final String caFile;
    private final String keystoreLocation;
    private final String keystoreType;
    private final String keystorePassword;
    private final String keyPassword;
    private transient SSLSocketFactory sockets;

    /**
     * @param url the registry's base URL
     * @param timeoutMs the connect and the read timeout of one request
     * @param authorization the {@code Authorization} header's value, or null
     * @param caFile a PEM file of the CA certificates to trust, or null (the JVM's)
     * @param keystoreLocation the client's keystore (TLS client authentication), or null
     * @param keystoreType its type, PKCS12 or JKS
     * @param keystorePassword its password, or null
     * @param keyPassword the private key's password, or null (the keystore's)
     */
    public RegistryClient(String url, int timeoutMs, String authorization, String caFile, String keystoreLocation,
                          String keystoreType, String keystorePassword, String keyPassword) {
        this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
        this.timeoutMs = timeoutMs;
        this.authorization = authorization;
        this.caFile = caFile;
        this.keystoreLocation = keystoreLocation;
        this.keystoreType = keystoreType;
        this.keystorePassword = keystorePassword;
        this.keyPassword = keyPassword;
    }

    @Override
    public String toString() {
        return "RegistryClient(" + url + ")";  // never the credentials
    }

    /** The Avro schema text the registry has for {@code id}; null on any failure. */
    String schema(long id) {
        try {
            HttpURLConnection http = (HttpURLConnection) new URL(url + "/schemas/ids/" + id).openConnection();
            if (http instanceof HttpsURLConnection && (caFile != null || keystoreLocation != null)) {
                ((HttpsURLConnection) http).setSSLSocketFactory(sockets());
            }
            http.setConnectTimeout(timeoutMs);
            http.setReadTimeout(timeoutMs);
            http.setRequestProperty("Accept", "application/vnd.schemaregistry.v1+json, application/json");
            if (authorization != null) {
                http.setRequestProperty("Authorization", authorization);
            }
            try {
                if (http.getResponseCode() != 200) {
                    return null;
                }
                JsonNode body;
                try (InputStream in = http.getInputStream()) {
                    body = JSON.readTree(in);
                }
                JsonNode schema = body == null ? null : body.get("schema");
                JsonNode type = body == null ? null : body.get("schemaType");
                boolean avro = type == null || type.isTextual() && "AVRO".equals(type.asText());
                return schema != null && schema.isTextual() && avro ? schema.asText() : null;
            } finally {
                http.disconnect();
            }
        } catch (IOException | GeneralSecurityException | RuntimeException e) {
            return null;
        }
    }

    /** The TLS sockets of the configured trust and key material (built once per instance). */
    private SSLSocketFactory sockets() throws IOException, GeneralSecurityException {
        if (sockets == null) {
            TrustManagerFactory trust = null;
            if (caFile != null) {
                KeyStore cas = KeyStore.getInstance(KeyStore.getDefaultType());
                cas.load(null, null);
                try (InputStream in = Files.newInputStream(Path.of(caFile))) {
                    int n = 0;
                    for (Certificate ca : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                        cas.setCertificateEntry("ca-" + n++, ca);
                    }
                }
                trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                trust.init(cas);
            }
            KeyManagerFactory keys = null;
            if (keystoreLocation != null) {
                char[] storePassword = keystorePassword == null ? null : keystorePassword.toCharArray();
                KeyStore store = KeyStore.getInstance(keystoreType);
                try (InputStream in = Files.newInputStream(Path.of(keystoreLocation))) {
                    store.load(in, storePassword);
                }
                keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                keys.init(store, keyPassword == null ? storePassword : keyPassword.toCharArray());
            }
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(keys == null ? null : keys.getKeyManagers(), trust == null ? null : trust.getTrustManagers(),
                    null);
            sockets = context.getSocketFactory();
        }
        return sockets;
    }
}
