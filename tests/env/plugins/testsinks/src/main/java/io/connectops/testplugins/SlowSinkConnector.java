package io.connectops.testplugins;

import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * A sink that takes {@code delay.ms} per record and writes nothing: a consumer of known speed,
 * so a test can have a sink that catches up on a backlog (consumes faster than records arrive)
 * or falls behind (slower), and check the lag rates and ETA the check reports against it.
 */
public class SlowSinkConnector extends SinkConnector {

    static final String DELAY_MS = "delay.ms";

    static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(DELAY_MS, Type.LONG, 10L, ConfigDef.Range.between(0L, 60_000L),
                    Importance.HIGH, "Milliseconds spent on each record.");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        new AbstractConfig(CONFIG_DEF, props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return Slow.class;
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
        return ExternalOffsetsSinkConnector.VERSION;
    }

    /** Sleeps {@code delay.ms} per record. */
    public static class Slow extends SinkTask {
        private long delayMs;

        @Override
        public String version() {
            return ExternalOffsetsSinkConnector.VERSION;
        }

        @Override
        public void start(Map<String, String> props) {
            delayMs = new AbstractConfig(CONFIG_DEF, props).getLong(DELAY_MS);
        }

        @Override
        public void put(Collection<SinkRecord> records) {
            try {
                Thread.sleep(delayMs * records.size());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ConnectException("interrupted", e);
            }
        }

        @Override
        public void stop() {
        }
    }
}
