package io.connectops.testplugins;

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A source that produces fixed-size records as fast as a rate limit (or the producer) allows, for
 * producer-pressure tests (tests/env/pressure.py).
 *
 * <p>One task, one source partition {@code {"flood": <connector name>}}; the source offset of the
 * n-th record (counting from 1) is {@code {"seq": n}}, so a committed offset says how many records
 * have been acknowledged by Kafka and committed, comparable with the task's
 * {@code source-record-poll-total}. A restarted task continues after its committed offset.
 *
 * <p>Configs: {@code topic} (required), {@code record.bytes} (value size, default 1000; the key
 * is null), {@code records.per.second} (default 0: unlimited), {@code poll.max.records} (records
 * per poll, default 500). Values are bytes (schema BYTES): use
 * {@code value.converter=org.apache.kafka.connect.converters.ByteArrayConverter} to put exactly
 * {@code record.bytes} bytes in each record.
 */
public class FloodSourceConnector extends SourceConnector {

    static final String TOPIC = "topic";
    static final String RECORD_BYTES = "record.bytes";
    static final String RATE = "records.per.second";
    static final String POLL_MAX = "poll.max.records";
    static final String NAME = "name";

    static final ConfigDef CONFIG = new ConfigDef()
        .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "Topic to write to")
        .define(RECORD_BYTES, ConfigDef.Type.INT, 1000, ConfigDef.Range.atLeast(0), ConfigDef.Importance.MEDIUM,
            "Bytes per record value")
        .define(RATE, ConfigDef.Type.DOUBLE, 0.0, ConfigDef.Range.atLeast(0), ConfigDef.Importance.MEDIUM,
            "Records per second; 0: as fast as the producer accepts them")
        .define(POLL_MAX, ConfigDef.Type.INT, 500, ConfigDef.Range.atLeast(1), ConfigDef.Importance.LOW,
            "Most records returned by one poll");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return FloodSourceTask.class;
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
        return "1.0";
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    @Override
    public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        return true;
    }
}
