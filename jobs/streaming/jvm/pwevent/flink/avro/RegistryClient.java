package pwevent.flink.avro;

import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.HttpURLConnection;
import java.net.URL;
import java.security.GeneralSecurityException;
import javax.net.ssl.HttpsURLConnection;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The JVM fast path's Schema Registry client: {@code GET /schemas/ids/{id}} at the registry of an
 * {@code avro-confluent} input, with what its {@code schema_registry} settings give
 * (jobs/common/config.py, {@code SchemaRegistrySection}): the {@code Authorization} header (HTTP
 * basic or bearer, built by the Python settings, the one definition of it) and, for https, its
 * {@link RegistryTls}. The host name is always checked. Built in the Python
 * client and handed to the job in {@link AvroFields}' instance, never in the SQL text, so the
 * credentials appear in no plan or operator name.
 */
public final class RegistryClient implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String url;
    private final int timeoutMs;
    private final String authorization;
    private final RegistryTls tls;

    /**
     * @param url the registry's base URL
     * @param timeoutMs the connect and the read timeout of one request
     * @param authorization the {@code Authorization} header's value, or null
     * @param tls the CA file and client keystore of an https registry, or null (the JVM's defaults)
     */
    public RegistryClient(String url, int timeoutMs, String authorization, RegistryTls tls) {
        this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
        this.timeoutMs = timeoutMs;
        this.authorization = authorization;
        this.tls = tls;
    }

    @Override
    public String toString() {
        return "RegistryClient(" + url + ")";  // never the credentials
    }

    /** The Avro schema text the registry has for {@code id}; null on any failure. */
    String schema(long id) {
        try {
            HttpURLConnection http = (HttpURLConnection) new URL(url + "/schemas/ids/" + id).openConnection();
            if (http instanceof HttpsURLConnection && tls != null) {
                ((HttpsURLConnection) http).setSSLSocketFactory(tls.sockets());
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
}
