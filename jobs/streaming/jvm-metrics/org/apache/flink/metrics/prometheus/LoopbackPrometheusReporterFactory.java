package org.apache.flink.metrics.prometheus;

import java.util.Properties;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;

/** Creates {@link LoopbackPrometheusReporter}s: {@code metrics.reporter.NAME.factory.class}. */
public class LoopbackPrometheusReporterFactory implements MetricReporterFactory {
    @Override
    public MetricReporter createMetricReporter(Properties properties) {
        return new LoopbackPrometheusReporter();
    }
}
