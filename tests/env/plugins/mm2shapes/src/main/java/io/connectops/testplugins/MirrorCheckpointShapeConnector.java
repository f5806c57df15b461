package io.connectops.testplugins;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Like MM2's MirrorCheckpointConnector: emits checkpoint records for every (group, topic,
 * partition) to {@code <source.cluster.alias><sep>checkpoints<sep>internal}, with source
 * partition {@code {"group","topic","partition"}} and source offset always {@code {"offset": 0}}
 * (MM2 does not use these offsets, so it accepts no other value in an alteration).
 */
public class MirrorCheckpointShapeConnector extends SourceConnector {

    static final String SOURCE_CLUSTER_ALIAS = "source.cluster.alias";
    static final String GROUPS = "groups";
    static final String TOPICS = "topics";
    static final String PARTITIONS = "partitions";
    static final String SEPARATOR = "replication.policy.separator";

    static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(SOURCE_CLUSTER_ALIAS, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    Importance.HIGH, "Alias of the source cluster.")
            .define(GROUPS, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH, "Consumer groups to checkpoint.")
            .define(TOPICS, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH, "Topics of those groups.")
            .define(PARTITIONS, Type.INT, 1, ConfigDef.Range.atLeast(1), Importance.MEDIUM, "Partitions per topic.")
            .define(SEPARATOR, Type.STRING, ".", Importance.LOW, "replication.policy.separator")
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
        private String topic;

        @Override
        protected void configure(Map<String, String> props) {
            AbstractConfig config = new AbstractConfig(CONFIG_DEF, props);
            String sep = config.getString(SEPARATOR);
            topic = config.getString(SOURCE_CLUSTER_ALIAS) + sep + "checkpoints" + sep + "internal";
            for (String group : config.getList(GROUPS)) {
                for (String t : config.getList(TOPICS)) {
                    for (int p = 0; p < config.getInt(PARTITIONS); p++) {
                        partitions.add(MirrorShapes.checkpointPartition(group, t, p));
                    }
                }
            }
        }

        @Override
        protected List<SourceRecord> records() {
            List<SourceRecord> out = new ArrayList<>();
            for (Map<String, Object> partition : partitions) {
                out.add(new SourceRecord(partition, MirrorShapes.offset(0L), topic, 0,
                        Schema.STRING_SCHEMA, "checkpoint " + partition));
            }
            return out;
        }
    }
}
