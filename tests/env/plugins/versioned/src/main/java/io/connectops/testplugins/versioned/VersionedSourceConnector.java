package io.connectops.testplugins.versioned;

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A source built into one jar per version (tests/env/plugins/build.sh): the classes are the same,
 * only the jar's manifest {@code Implementation-Version} differs. Each jar sits in its own
 * {@code plugin.path} directory, so the worker loads it in its own class loader and
 * {@link #version()} answers that jar's version (KIP-891: several versions side by side).
 *
 * <p>The task writes what ran into every record: {@code "<connector> <version> <seq>"} (a string
 * value), one record per {@code interval.ms} to {@code topic}, {@code records.per.start} records
 * after each start (0: no end), then idles. {@code seq} counts on from the committed offset. A test
 * reads the topic to learn which version's code ran, independently of what the REST API reports.
 */
public class VersionedSourceConnector extends SourceConnector {

    static final String TOPIC = "topic";
    static final String INTERVAL = "interval.ms";
    static final String PER_START = "records.per.start";
    static final String NAME = "name";

    static final ConfigDef CONFIG = new ConfigDef()
        .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "Topic to write to")
        .define(INTERVAL, ConfigDef.Type.LONG, 200L, ConfigDef.Range.atLeast(1), ConfigDef.Importance.LOW,
            "Milliseconds between records")
        .define(PER_START, ConfigDef.Type.LONG, 0L, ConfigDef.Range.atLeast(0), ConfigDef.Importance.LOW,
            "Records written after each start of the task; 0: no end");

    private Map<String, String> props;

    /** The version of the jar this class was loaded from. */
    static String jarVersion() {
        String version = VersionedSourceConnector.class.getPackage().getImplementationVersion();
        return version != null ? version : "unversioned";
    }

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return VersionedSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return jarVersion();
    }
}
