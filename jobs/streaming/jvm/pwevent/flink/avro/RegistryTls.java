package pwevent.flink.avro;

import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * The TLS material of {@link RegistryClient}'s requests to an https registry, from the input's
 * {@code schema_registry} settings (jobs/common/config.py): the CA file (PEM) the registry's
 * certificate must chain to, else the JVM's trusted CAs, and the client's key and certificate as a
 * PKCS12 or JKS keystore (TLS client authentication), else none.
 */
public final class RegistryTls implements Serializable {
    private static final long serialVersionUID = 1L;

    private final String caFile;
    private final String keystoreLocation;
    private final String keystoreType;
    private final String keystorePassword;
    private final String keyPassword;
    private transient SSLSocketFactory sockets;

    /**
     * @param caFile a PEM file of the CA certificates to trust, or null (the JVM's)
     * @param keystoreLocation the client's keystore, or null
     * @param keystoreType its type, PKCS12 or JKS
     * @param keystorePassword its password, or null
     * @param keyPassword the private key's password, or null (the keystore's)
     */
    public RegistryTls(String caFile, String keystoreLocation, String keystoreType, String keystorePassword,
                       String keyPassword) {
        this.caFile = caFile;
        this.keystoreLocation = keystoreLocation;
        this.keystoreType = keystoreType;
        this.keystorePassword = keystorePassword;
        this.keyPassword = keyPassword;
    }

    @Override
    public String toString() {
        return "RegistryTls(" + caFile + ", " + keystoreLocation + ")";  // never the passwords
    }

    /** The TLS sockets of this material (built once per instance). */
    SSLSocketFactory sockets() throws IOException, GeneralSecurityException {
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
