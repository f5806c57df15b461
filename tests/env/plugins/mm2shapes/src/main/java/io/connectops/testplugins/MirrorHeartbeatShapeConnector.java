package io.connectops.testplugins;

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
 * Like MM2's MirrorHeartbeatConnector: emits heartbeats to {@code heartbeats} with source
 * partition {@code {"sourceClusterAlias","targetClusterAlias"}} and source offset always
 * {@code {"offset": 0}} (only 0 is accepted in an alteration).
 */
public class MirrorHeartbeatShapeConnector extends SourceConnector {

    static final String SOURCE_CLUSTER_ALIAS = "source.cluster.alias";
    static final String TARGET_CLUSTER_ALIAS = "target.cluster.alias";
    static final String HEARTBEATS_TOPIC = "heartbeats.topic";

    static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(SOURCE_CLUSTER_ALIAS, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    Importance.HIGH, "Alias of the source cluster.")
            .define(TARGET_CLUSTER_ALIAS, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    Importance.HIGH, "Alias of the target cluster.")
            .define(HEARTBEATS_TOPIC, Type.STRING, "heartbeats", Importance.LOW, "Heartbeats topic.")
            .define(PeriodicShapeTask.EMIT_INTERVAL_MS, Type.LONG, 1000L, Importance.LOW, "Emit interval.");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        new AbstractConfig(CONFIG_DEF, props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return Heartbeats.class;
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

    /** As MirrorHeartbeatConnector: string sourceClusterAlias/targetClusterAlias, offset exactly 0. */
    @Override
    public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        MirrorShapes.forEachAlteration(offsets, (partition, offset) -> {
            MirrorShapes.requireString(partition, MirrorShapes.SOURCE_CLUSTER_ALIAS_KEY);
            MirrorShapes.requireString(partition, MirrorShapes.TARGET_CLUSTER_ALIAS_KEY);
            MirrorShapes.requireOffset(partition, offset, true);
        });
        return true;
    }

    /** The heartbeat task. */
    public static class Heartbeats extends PeriodicShapeTask {
        private Map<String, Object> partition;
        private String topic;

        @Override
        protected void configure(Map<String, String> props) {
            AbstractConfig config = new AbstractConfig(CONFIG_DEF, props);
            partition = MirrorShapes.heartbeatPartition(
                    config.getString(SOURCE_CLUSTER_ALIAS), config.getString(TARGET_CLUSTER_ALIAS));
            topic = config.getString(HEARTBEATS_TOPIC);
        }

        @Override
        protected List<SourceRecord> records() {
            return Collections.singletonList(new SourceRecord(partition, MirrorShapes.offset(0L), topic, 0,
                    Schema.STRING_SCHEMA, "heartbeat " + partition + " at " + System.currentTimeMillis()));
        }
    }
}
