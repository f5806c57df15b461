package io.connectops.testplugins;

import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * Like MM2's MirrorSourceConnector: its task really replicates {@code topics} from the source
 * cluster, reading by assign() with no consumer group (as MM2 does), into
 * {@code <source.cluster.alias><separator><topic>} on the worker's cluster, same partition, same
 * key/value bytes (use ByteArrayConverter for exact copies). Source offsets are MM2's:
 * {@code {"cluster","topic","partition"} -> {"offset": last replicated upstream offset}}; a
 * restarted task resumes at stored offset + 1, and with nothing stored from the earliest record.
 * No offset-syncs topic, no topic/ACL/config sync, a single task.
 */
public class MirrorSourceShapeConnector extends SourceConnector {

    static final String SOURCE_CLUSTER_ALIAS = "source.cluster.alias";
    static final String SOURCE_BOOTSTRAP_SERVERS = "source.cluster.bootstrap.servers";
    static final String TOPICS = "topics";
    static final String SEPARATOR = "replication.policy.separator";
    static final String POLL_TIMEOUT_MS = "poll.timeout.ms";

    static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(SOURCE_CLUSTER_ALIAS, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    Importance.HIGH, "Alias of the source cluster (the 'cluster' key of every source partition).")
            .define(SOURCE_BOOTSTRAP_SERVERS, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH,
                    "Bootstrap servers of the source cluster.")
            .define(TOPICS, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH,
                    "Source topics to replicate (exact names, comma separated).")
            .define(SEPARATOR, Type.STRING, ".", Importance.LOW,
                    "Separator between the source alias and the topic name in remote topic names.")
            .define(POLL_TIMEOUT_MS, Type.LONG, 500L, Importance.LOW, "Source consumer poll timeout.");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        new AbstractConfig(CONFIG_DEF, props);  // fail fast on a bad config
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return MirrorSourceShapeTask.class;
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

    /** As MirrorSourceConnector: string cluster/topic, integer partition >= 0, offset >= 0. */
    @Override
    public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        MirrorShapes.forEachAlteration(offsets, (partition, offset) -> {
            MirrorShapes.requireString(partition, MirrorShapes.SOURCE_CLUSTER_KEY);
            MirrorShapes.requireString(partition, MirrorShapes.TOPIC_KEY);
            MirrorShapes.requirePartition(partition);
            MirrorShapes.requireOffset(partition, offset, false);
        });
        // Nothing is committed to the source cluster: the stored source offsets are all there is.
        return true;
    }
}
