import java.io.FileReader;
import java.io.Reader;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/**
 * Readiness probe for kafka.sh, run as a single-file source program against the broker's
 * kafka-clients jar:  java -cp '<cache>/kafka/*' KafkaReady.java BOOTSTRAP TIMEOUT_MS [CLIENT_PROPERTIES]
 * (CLIENT_PROPERTIES: a file of client settings, e.g. the admin user's on a secured broker).
 * Exits 0 once a metadata request (describeCluster + listTopics) succeeds, 1 at the deadline.
 */
public class KafkaReady {
    public static void main(String[] args) throws Exception {
        long deadline = System.currentTimeMillis() + Long.parseLong(args[1]);
        Properties props = new Properties();
        if (args.length > 2) {
            try (Reader in = new FileReader(args[2])) {
                props.load(in);
            }
        }
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000");
        String last = "";
        try (Admin admin = Admin.create(props)) {
            while (System.currentTimeMillis() < deadline) {
                try {
                    int nodes = admin.describeCluster().nodes().get(3, TimeUnit.SECONDS).size();
                    admin.listTopics().names().get(3, TimeUnit.SECONDS);
                    if (nodes > 0) {
                        return;
                    }
                    last = "no brokers in metadata";
                } catch (Exception e) {
                    last = e.toString();
                }
                Thread.sleep(200);
            }
        }
        System.err.println("kafka not ready: " + last);
        System.exit(1);
    }
}
