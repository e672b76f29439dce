package pwevent.flink.time;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetAndTimestamp;
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
 * such reader is given; a partition with no committed record at all ends at 0). A job without
 * restored state reads its source from `start` (the source's own OffsetsInitializer: `kafka.start`),
 * so a partition it starts reading after its last record (e.g. `latest`) has no backlog either and
 * ends at 0. A broker that does not answer is asked again until {@link #PATIENCE} has passed; then
 * the task fails (and Flink restarts it).
 */
public final class KafkaPartitionEnds implements PartitionEnds {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(KafkaPartitionEnds.class);
    static final int STEP = 100;
    static final Duration PATIENCE = Duration.ofMinutes(5);
    private static final Duration CALL = Duration.ofSeconds(30);

    private final HashMap<String, String> properties;
    private final String topic;
    private final OffsetsInitializer start;

    /** `properties`: the Kafka clients' (py4j hands a java.util.Map over), with the source's
     *  `group.id`; `start`: where the source starts without restored state. */
    public KafkaPartitionEnds(Map<String, String> properties, String topic, OffsetsInitializer start) {
        this.properties = new HashMap<>(properties);
        this.topic = topic;
        this.start = start;
    }

    @Override
    public Map<Integer, Long> owned(int subtask, int subtasks, boolean restored) throws Exception {
        long deadline = System.nanoTime() + PATIENCE.toNanos();
        while (true) {
            try {
                return read(subtask, subtasks, restored);
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

    private Map<Integer, Long> read(int subtask, int subtasks, boolean restored) {
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
            List<TopicPartition> owned = new ArrayList<>();
            for (PartitionInfo info : partitions) {
                if (PartitionTimes.owns(info.partition(), subtasks) == subtask) {
                    owned.add(new TopicPartition(topic, info.partition()));
                }
            }
            Map<TopicPartition, Long> first =
                    restored ? Map.of() : start.getPartitionOffsets(owned, new Offsets(consumer));
            for (TopicPartition partition : owned) {
                long end = end(consumer, partition);
                ends.put(partition.partition(), first.getOrDefault(partition, 0L) >= end ? 0L : end);
            }
        }
        LOG.info("valid event time: the backlog of {} ends at {} (partition: one past its last committed record)",
                topic, ends);
        return ends;
    }

    /** The connector's questions about offsets, answered by `consumer`. */
    private static final class Offsets implements OffsetsInitializer.PartitionOffsetsRetriever {
        private final KafkaConsumer<byte[], byte[]> consumer;

        Offsets(KafkaConsumer<byte[], byte[]> consumer) {
            this.consumer = consumer;
        }

        @Override
        public Map<TopicPartition, Long> committedOffsets(Collection<TopicPartition> partitions) {
            Map<TopicPartition, Long> out = new HashMap<>();
            consumer.committed(new HashSet<>(partitions), CALL).forEach((partition, committed) -> {
                if (committed != null) {
                    out.put(partition, committed.offset());
                }
            });
            return out;
        }

        @Override
        public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
            return consumer.endOffsets(partitions, CALL);
        }

        @Override
        public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions) {
            return consumer.beginningOffsets(partitions, CALL);
        }

        @Override
        public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> times) {
            return consumer.offsetsForTimes(times, CALL);
        }
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
                    throw new IllegalStateException(
                            "reading " + partition + " back from " + upTo + " took over " + CALL);
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
