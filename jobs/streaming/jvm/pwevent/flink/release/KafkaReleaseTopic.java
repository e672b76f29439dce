package pwevent.flink.release;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.KafkaException;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.PartitionInfo;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.errors.RetriableException;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The release and audit topics through the Kafka clients the connector jar ships: one transactional
 * producer with a fixed transactional id (opening it fences any earlier producer of the id, a killed
 * task's included, and aborts what it left open), and a consumer for {@link #recordsFrom} of the
 * release topic, read_committed or read_uncommitted. Releases are keyed by the slot's decimal number,
 * as they always were; spend-log lines have no key, one line per message.
 * A timeout or a retriable error is {@link ReleaseTopic.Unavailable}; any other error is thrown as
 * it is (the task fails and restores).
 */
final class KafkaReleaseTopic implements ReleaseTopic {
    /** How far back each step of the scan for committed releases reads, in offsets. */
    static final int SCAN_STEP = 512;
    /** The longest a scan for committed releases may take. */
    static final Duration SCAN_LIMIT = Duration.ofSeconds(60);

    private final String topic;
    private final String auditTopic;
    private final Properties properties;
    private final KafkaProducer<byte[], byte[]> producer;

    /** The settings of a writer's topics: the clients' properties (bootstrap and security included),
     *  the release and audit topics, and the producer's transactional id. */
    static final class Factory implements ReleaseTopic.Factory {
        private static final long serialVersionUID = 1L;
        private final HashMap<String, String> properties;
        private final String topic;
        private final String auditTopic;
        private final String transactionalId;

        Factory(Map<String, String> properties, String topic, String auditTopic, String transactionalId) {
            this.properties = new HashMap<>(properties);
            this.topic = topic;
            this.auditTopic = auditTopic;
            this.transactionalId = transactionalId;
        }

        @Override
        public ReleaseTopic open() throws Unavailable {
            Properties props = new Properties();
            props.putAll(properties);
            return new KafkaReleaseTopic(topic, auditTopic, props, transactionalId);
        }
    }

    private KafkaReleaseTopic(String topic, String auditTopic, Properties properties, String transactionalId)
            throws Unavailable {
        this.topic = topic;
        this.auditTopic = auditTopic;
        this.properties = properties;
        Properties producerProps = new Properties();
        producerProps.putAll(properties);
        producerProps.put("transactional.id", transactionalId);
        producerProps.put("enable.idempotence", "true");
        producerProps.put("acks", "all");
        KafkaProducer<byte[], byte[]> made = new KafkaProducer<>(producerProps, new ByteArraySerializer(),
                new ByteArraySerializer());
        try {
            made.initTransactions();
        } catch (KafkaException e) {
            made.close(Duration.ZERO);
            throw unavailableOr(e, "initialising the release topic's transactions");
        }
        this.producer = made;
    }

    private static Unavailable unavailableOr(KafkaException e, String doing) {
        if (e instanceof RetriableException || e.getCause() instanceof RetriableException) {
            return new Unavailable(doing + ": " + e, e);
        }
        throw e;
    }

    @Override
    public void write(List<ReleaseLog.Release> releases) throws Unavailable {
        try {
            producer.beginTransaction();
            for (ReleaseLog.Release release : releases) {
                for (byte[] line : release.lines()) {
                    producer.send(new ProducerRecord<>(auditTopic, null, line));
                }
                producer.send(new ProducerRecord<>(topic, release.key().getBytes(StandardCharsets.UTF_8),
                        release.value()));
            }
            producer.commitTransaction();
        } catch (KafkaException e) {
            throw unavailableOr(e, "writing " + releases.size() + " releases");
        }
    }

    @Override
    public Map<Long, List<byte[]>> recordsFrom(long fromSlot, boolean committed) throws Unavailable {
        Properties props = new Properties();
        props.putAll(properties);
        props.put("isolation.level", committed ? "read_committed" : "read_uncommitted");
        props.put("enable.auto.commit", "false");
        props.remove("group.id");
        long deadline = System.nanoTime() + SCAN_LIMIT.toNanos();
        Map<Long, List<byte[]>> found = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            for (PartitionInfo info : consumer.partitionsFor(topic, SCAN_LIMIT)) {
                scan(consumer, new TopicPartition(topic, info.partition()), fromSlot, deadline, found);
            }
        } catch (KafkaException e) {
            throw unavailableOr(e, "reading the release topic " + topic);
        }
        return found;
    }

    /** The partition's releases of slots from `fromSlot` the consumer can read, read backwards from its
     *  end in steps of {@link #SCAN_STEP} until a step holds an earlier slot (the writer writes in slot
     *  order) or the partition's start is reached. */
    private static void scan(KafkaConsumer<byte[], byte[]> consumer, TopicPartition partition, long fromSlot,
            long deadline, Map<Long, List<byte[]>> found) throws Unavailable {
        List<TopicPartition> one = List.of(partition);
        consumer.assign(one);
        long begin = consumer.beginningOffsets(one, SCAN_LIMIT).get(partition);
        long upTo = consumer.endOffsets(one, SCAN_LIMIT).get(partition);  // read_committed: the last stable offset
        List<ConsumerRecord<byte[], byte[]>> step = new ArrayList<>();
        boolean earlier = false;
        while (!earlier && upTo > begin) {
            long from = Math.max(begin, upTo - SCAN_STEP);
            consumer.seek(partition, from);
            step.clear();
            while (consumer.position(partition) < upTo) {
                if (System.nanoTime() > deadline) {
                    throw new Unavailable("reading " + partition + " took longer than " + SCAN_LIMIT, null);
                }
                step.addAll(consumer.poll(Duration.ofMillis(200)).records(partition));
            }
            for (int i = step.size() - 1; i >= 0; i--) {  // backwards, so each slot's values end in offset order
                ConsumerRecord<byte[], byte[]> record = step.get(i);
                Long slot = record.offset() < upTo ? slotOf(record.key()) : null;
                if (slot != null && slot < fromSlot) {
                    earlier = true;
                } else if (slot != null) {
                    found.computeIfAbsent(slot, s -> new ArrayList<>()).add(0, record.value());
                }
            }
            earlier |= from == begin;
            upTo = from;
        }
    }

    /** A message key's slot, or null for a key that is not a positive decimal number. */
    static Long slotOf(byte[] key) {
        if (key == null || key.length == 0 || key.length > 18) {
            return null;
        }
        long slot = 0;
        for (byte b : key) {
            if (b < '0' || b > '9') {
                return null;
            }
            slot = slot * 10 + (b - '0');
        }
        return slot > 0 ? slot : null;
    }

    @Override
    public void close() {
        producer.close(Duration.ofSeconds(5));
    }
}
