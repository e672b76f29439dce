package pwevent.flink;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.PartitionInfo;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link PartitionEnds} read from the broker with the job's client properties (bootstrap and security
 * included), as a read_committed reader sees the topic: per partition, the offset after its last
 * committed record, found by reading back from the last stable offset in steps of {@link #STEP}
 * offsets (a topic written in transactions ends in a marker, and maybe in aborted records, which no
 * such reader is given; a partition with no committed record at all ends at 0). A broker that does
 * not answer is asked again until {@link #PATIENCE} has passed; then the task fails (and Flink
 * restarts it).
 */
public final class KafkaPartitionEnds implements PartitionEnds {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(KafkaPartitionEnds.class);
    static final int STEP = 100;
    static final Duration PATIENCE = Duration.ofMinutes(5);
    private static final Duration CALL = Duration.ofSeconds(30);

    private final HashMap<String, String> properties;
    private final String topic;

    /** `properties`: the Kafka clients' (py4j hands a java.util.Map over). */
    public KafkaPartitionEnds(Map<String, String> properties, String topic) {
        this.properties = new HashMap<>(properties);
        this.topic = topic;
    }

    @Override
    public Map<Integer, Long> owned(int subtask, int subtasks) throws Exception {
        long deadline = System.nanoTime() + PATIENCE.toNanos();
        while (true) {
            try {
                return read(subtask, subtasks);
            } catch (RuntimeException err) {  // the clients' errors are unchecked: a timeout, an unreachable broker
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("where the partitions of " + topic + " end is unknown after "
                            + PATIENCE.toMinutes() + " minutes: " + err, err);
                }
                LOG.warn("valid event time: cannot read where the partitions of {} end yet ({}); asking again", topic,
                        err.toString());
                Thread.sleep(2_000);
            }
        }
    }

    private Map<Integer, Long> read(int subtask, int subtasks) {
        Properties props = new Properties();
        props.putAll(properties);
        props.put("isolation.level", "read_committed");
        props.put("enable.auto.commit", "false");
        Map<Integer, Long> ends = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            List<PartitionInfo> partitions = consumer.partitionsFor(topic, CALL);
            if (partitions == null || partitions.isEmpty()) {
                throw new IllegalStateException("topic " + topic + " has no partitions (does it exist?)");
            }
            for (PartitionInfo info : partitions) {
                if (PartitionTimes.owns(info.partition(), subtasks) == subtask) {
                    ends.put(info.partition(), end(consumer, new TopicPartition(topic, info.partition())));
                }
            }
        }
        LOG.info("valid event time: the backlog of {} ends at {} (partition: one past its last committed record)",
                topic, ends);
        return ends;
    }

    /** One past `partition`'s last committed record (0: none). */
    private static long end(KafkaConsumer<byte[], byte[]> consumer, TopicPartition partition) {
        List<TopicPartition> one = List.of(partition);
        consumer.assign(one);
        long begin = consumer.beginningOffsets(one, CALL).get(partition);
        long upTo = consumer.endOffsets(one, CALL).get(partition);  // read_committed: the last stable offset
        long deadline = System.nanoTime() + CALL.toNanos();
        for (long to = upTo; to > begin; to = Math.max(begin, to - STEP)) {
            long from = Math.max(begin, to - STEP);
            consumer.seek(partition, from);
            long last = -1;
            while (consumer.position(partition, CALL) < to) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("reading " + partition + " back from " + upTo + " took over " + CALL);
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200)).records(partition)) {
                    if (record.offset() < to) {
                        last = Math.max(last, record.offset());
                    }
                }
            }
            if (last >= 0) {
                return last + 1;
            }
        }
        return 0;
    }
}
