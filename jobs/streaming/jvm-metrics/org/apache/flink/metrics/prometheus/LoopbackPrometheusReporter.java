package org.apache.flink.metrics.prometheus;

import io.prometheus.client.exporter.HTTPServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.Iterator;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.util.PortRange;

/**
 * Flink's Prometheus reporter on one address instead of every interface (the stock reporter binds
 * the wildcard address and has no host option). pwevent's local runs and tests keep every port on
 * loopback; docs/operations.md, "Metrics". In this package only to reach the registry the stock
 * base class fills; the metric names and labels are the stock reporter's.
 *
 * <p>Options: {@code host} (default 127.0.0.1) and {@code port} (a port or a range, default 9249).
 */
public class LoopbackPrometheusReporter extends AbstractPrometheusReporter {
    private HTTPServer httpServer;
    private int port;

    @Override
    public void open(MetricConfig config) {
        super.open(config);
        String host = config.getString("host", "127.0.0.1");
        Iterator<Integer> ports = new PortRange(config.getString("port", "9249")).getPortsIterator();
        IOException last = null;
        while (httpServer == null && ports.hasNext()) {
            int candidate = ports.next();
            try {
                httpServer = new HTTPServer(new InetSocketAddress(host, candidate), registry, true);
                port = candidate;
            } catch (IOException e) {
                last = e;
            }
        }
        if (httpServer == null) {
            throw new RuntimeException("no free port for the Prometheus reporter on " + host + " in "
                    + config.getString("port", "9249"), last);
        }
        log.info("Started the Prometheus reporter on {}:{}", host, port);
    }

    @Override
    public void close() {
        if (httpServer != null) {
            httpServer.stop();
        }
        super.close();
    }
}
