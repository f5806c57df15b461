package io.connectops.testplugins;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** See {@link MirrorSourceShapeConnector}. */
public class MirrorSourceShapeTask extends SourceTask {

    private final Object lock = new Object();
    private volatile boolean stopping;
    private KafkaConsumer<byte[], byte[]> consumer;
    private String sourceAlias;
    private String separator;
    private Duration pollTimeout;

    @Override
    public String version() {
        return MirrorShapes.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(MirrorSourceShapeConnector.CONFIG_DEF, props);
        sourceAlias = config.getString(MirrorSourceShapeConnector.SOURCE_CLUSTER_ALIAS);
        separator = config.getString(MirrorSourceShapeConnector.SEPARATOR);
        pollTimeout = Duration.ofMillis(config.getLong(MirrorSourceShapeConnector.POLL_TIMEOUT_MS));

        Map<String, Object> consumerConfig = new HashMap<>();
        consumerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                config.getList(MirrorSourceShapeConnector.SOURCE_BOOTSTRAP_SERVERS));
        consumerConfig.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        consumerConfig.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        // No group.id, no commits: like MM2, the stored source offsets are the only position.
        consumerConfig.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        consumerConfig.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerConfig.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        consumerConfig.put(ConsumerConfig.CLIENT_ID_CONFIG, "mm2-shape-source-" + sourceAlias);
        consumer = new KafkaConsumer<>(consumerConfig);

        List<TopicPartition> assignment = new ArrayList<>();
        for (String topic : config.getList(MirrorSourceShapeConnector.TOPICS)) {
            List<PartitionInfo> partitions = consumer.partitionsFor(topic, Duration.ofSeconds(30));
            if (partitions != null) {
                for (PartitionInfo info : partitions) {
                    assignment.add(new TopicPartition(info.topic(), info.partition()));
                }
            }
        }
        consumer.assign(assignment);
        for (TopicPartition tp : assignment) {
            long stored = MirrorShapes.storedOffset(context.offsetStorageReader()
                    .offset(MirrorShapes.sourcePartition(sourceAlias, tp.topic(), tp.partition())));
            if (stored >= 0) {
                // The stored offset is the last record replicated: resume right after it.
                consumer.seek(tp, stored + 1);
            }
            // Nothing stored: auto.offset.reset=earliest, the whole partition is replicated again.
        }
    }

    @Override
    public List<SourceRecord> poll() {
        synchronized (lock) {
            if (stopping) {
                return null;
            }
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = consumer.poll(pollTimeout);
            } catch (WakeupException e) {
                return null;
            }
            List<SourceRecord> out = new ArrayList<>(records.count());
            for (ConsumerRecord<byte[], byte[]> record : records) {
                out.add(new SourceRecord(
                        MirrorShapes.sourcePartition(sourceAlias, record.topic(), record.partition()),
                        MirrorShapes.offset(record.offset()),
                        sourceAlias + separator + record.topic(),
                        record.partition(),
                        Schema.OPTIONAL_BYTES_SCHEMA, record.key(),
                        Schema.OPTIONAL_BYTES_SCHEMA, record.value(),
                        record.timestamp()));
            }
            return out.isEmpty() ? null : out;
        }
    }

    @Override
    public void stop() {
        stopping = true;
        KafkaConsumer<byte[], byte[]> current = consumer;
        if (current == null) {
            return;
        }
        current.wakeup();  // the only thread-safe KafkaConsumer method: ends a poll() in progress
        synchronized (lock) {
            current.close();
        }
    }
}
