package io.connectops.testplugins;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Like MM2's MirrorCheckpointConnector: emits records to
 * {@code <source.cluster.alias><sep>checkpoints<sep>internal} with source partition
 * {@code {"group","topic","partition"}} and source offset always {@code {"offset": 0}} (MM2 does
 * not use these offsets, so it accepts no other value in an alteration).
 *
 * <p>Two modes. Without {@code source.cluster.bootstrap.servers}: a fixed record per configured
 * (group, topic, partition), for tests that need only the offset shapes. With it, as
 * MirrorCheckpointTask does: every interval, each group's committed offsets on the source
 * cluster (topics in {@code topics} only) become checkpoints whose key and value have MM2's
 * encoding (Checkpoint.java: key group/topic/partition, value version 0, upstreamOffset,
 * downstream offset, metadata), whose topic is the upstream topic renamed to
 * {@code <source alias><sep><topic>}, and which are emitted only when new for the key, after an
 * upstream rewind, or when the downstream offset advances. One simplification: MM2 translates
 * upstream to downstream offsets through the offset-syncs topic; this shape's source connector
 * copies every record of a partition in order, so downstream = upstream + the records the remote
 * partition held before replication began, given as {@code downstream.offset.shift} (default 0,
 * a fresh remote topic). Use ByteArrayConverter for key and value.
 */
public class MirrorCheckpointShapeConnector extends SourceConnector {

    static final String SOURCE_CLUSTER_ALIAS = "source.cluster.alias";
    static final String GROUPS = "groups";
    static final String TOPICS = "topics";
    static final String PARTITIONS = "partitions";
    static final String SEPARATOR = "replication.policy.separator";
    static final String SOURCE_BOOTSTRAP_SERVERS = "source.cluster.bootstrap.servers";
    static final String DOWNSTREAM_SHIFT = "downstream.offset.shift";

    static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(SOURCE_CLUSTER_ALIAS, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    Importance.HIGH, "Alias of the source cluster.")
            .define(GROUPS, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH, "Consumer groups to checkpoint.")
            .define(TOPICS, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH, "Topics of those groups.")
            .define(PARTITIONS, Type.INT, 1, ConfigDef.Range.atLeast(1), Importance.MEDIUM, "Partitions per topic.")
            .define(SEPARATOR, Type.STRING, ".", Importance.LOW, "replication.policy.separator")
            .define(SOURCE_BOOTSTRAP_SERVERS, Type.STRING, "", Importance.MEDIUM,
                    "Source cluster: when set, checkpoints follow the groups' committed offsets there.")
            .define(DOWNSTREAM_SHIFT, Type.LONG, 0L, ConfigDef.Range.atLeast(0), Importance.LOW,
                    "Records each remote partition held before replication began.")
            .define(PeriodicShapeTask.EMIT_INTERVAL_MS, Type.LONG, 1000L, Importance.LOW, "Emit interval.");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        new AbstractConfig(CONFIG_DEF, props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return Checkpoints.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return Collections.singletonList(props);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG_DEF;
    }

    @Override
    public String version() {
        return MirrorShapes.VERSION;
    }

    /** As MirrorCheckpointConnector: string group/topic, integer partition >= 0, offset exactly 0. */
    @Override
    public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        MirrorShapes.forEachAlteration(offsets, (partition, offset) -> {
            MirrorShapes.requireString(partition, MirrorShapes.CONSUMER_GROUP_ID_KEY);
            MirrorShapes.requireString(partition, MirrorShapes.TOPIC_KEY);
            MirrorShapes.requirePartition(partition);
            MirrorShapes.requireOffset(partition, offset, true);
        });
        return true;
    }

    /** The checkpoint task. */
    public static class Checkpoints extends PeriodicShapeTask {
        private final List<Map<String, Object>> partitions = new ArrayList<>();
        private final Map<Map<String, Object>, long[]> lastEmitted = new HashMap<>();
        private String topic;
        private String sourceAlias;
        private String separator;
        private List<String> groups;
        private List<String> topics;
        private Admin sourceAdmin;
        private long shift;

        @Override
        protected void configure(Map<String, String> props) {
            AbstractConfig config = new AbstractConfig(CONFIG_DEF, props);
            separator = config.getString(SEPARATOR);
            sourceAlias = config.getString(SOURCE_CLUSTER_ALIAS);
            topic = sourceAlias + separator + "checkpoints" + separator + "internal";
            groups = config.getList(GROUPS);
            topics = config.getList(TOPICS);
            shift = config.getLong(DOWNSTREAM_SHIFT);
            String bootstrap = config.getString(SOURCE_BOOTSTRAP_SERVERS);
            if (!bootstrap.isEmpty()) {
                Map<String, Object> adminConfig = new HashMap<>();
                adminConfig.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                adminConfig.put(AdminClientConfig.CLIENT_ID_CONFIG, "mm2-shape-checkpoint-" + sourceAlias);
                sourceAdmin = Admin.create(adminConfig);
                return;
            }
            for (String group : groups) {
                for (String t : topics) {
                    for (int p = 0; p < config.getInt(PARTITIONS); p++) {
                        partitions.add(MirrorShapes.checkpointPartition(group, t, p));
                    }
                }
            }
        }

        @Override
        protected List<SourceRecord> records() {
            if (sourceAdmin != null) {
                return checkpoints();
            }
            List<SourceRecord> out = new ArrayList<>();
            for (Map<String, Object> partition : partitions) {
                out.add(new SourceRecord(partition, MirrorShapes.offset(0L), topic, 0,
                        Schema.STRING_SCHEMA, "checkpoint " + partition));
            }
            return out;
        }

        private List<SourceRecord> checkpoints() {
            List<SourceRecord> out = new ArrayList<>();
            long now = System.currentTimeMillis();
            for (String group : groups) {
                Map<TopicPartition, OffsetAndMetadata> committed;
                try {
                    committed = sourceAdmin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                            .get(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return out;
                } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                    continue;  // as MM2: a group that cannot be read is skipped this round
                }
                for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : committed.entrySet()) {
                    TopicPartition upstream = entry.getKey();
                    OffsetAndMetadata offset = entry.getValue();
                    if (offset == null || !topics.contains(upstream.topic())) {
                        continue;
                    }
                    String remote = sourceAlias + separator + upstream.topic();
                    long upstreamOffset = offset.offset();
                    long downstreamOffset = upstreamOffset + shift;  // see the class comment
                    Map<String, Object> partition = MirrorShapes.checkpointPartition(group, remote, upstream.partition());
                    long[] last = lastEmitted.get(partition);
                    boolean emit = last == null || upstreamOffset < last[0] || downstreamOffset > last[1];
                    if (!emit) {
                        continue;
                    }
                    lastEmitted.put(partition, new long[] {upstreamOffset, downstreamOffset});
                    String metadata = offset.metadata() == null ? "" : offset.metadata();
                    out.add(new SourceRecord(partition, MirrorShapes.offset(0L), topic, 0,
                            Schema.BYTES_SCHEMA, checkpointKey(group, remote, upstream.partition()),
                            Schema.BYTES_SCHEMA, checkpointValue(upstreamOffset, downstreamOffset, metadata),
                            now));
                }
            }
            return out;
        }

        @Override
        public void stop() {
            super.stop();
            if (sourceAdmin != null) {
                sourceAdmin.close(java.time.Duration.ofSeconds(5));
            }
        }
    }

    /** Kafka protocol STRING: int16 length, UTF-8 bytes. */
    private static void putString(ByteBuffer buffer, byte[] utf8) {
        buffer.putShort((short) utf8.length);
        buffer.put(utf8);
    }

    /** MM2's checkpoint key: group STRING, topic STRING, partition INT32. */
    static byte[] checkpointKey(String group, String topic, int partition) {
        byte[] g = group.getBytes(StandardCharsets.UTF_8);
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        ByteBuffer buffer = ByteBuffer.allocate(2 + g.length + 2 + t.length + 4);
        putString(buffer, g);
        putString(buffer, t);
        buffer.putInt(partition);
        return buffer.array();
    }

    /** MM2's checkpoint value: header version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING. */
    static byte[] checkpointValue(long upstreamOffset, long downstreamOffset, String metadata) {
        byte[] m = metadata.getBytes(StandardCharsets.UTF_8);
        ByteBuffer buffer = ByteBuffer.allocate(2 + 8 + 8 + 2 + m.length);
        buffer.putShort((short) 0);
        buffer.putLong(upstreamOffset);
        buffer.putLong(downstreamOffset);
        putString(buffer, m);
        return buffer.array();
    }
}
