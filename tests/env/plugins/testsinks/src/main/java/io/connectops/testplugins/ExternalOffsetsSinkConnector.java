package io.connectops.testplugins;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
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
 * A sink that writes record values to a file, one per line, and does NOT override
 * {@code alterOffsets}: like most real sinks that keep (or could keep) their position in the
 * target system, it leaves Connect's default, which returns false. Connect then answers an offsets
 * PATCH/DELETE with "The Connect framework-managed offsets for this connector have been ...
 * However, if this connector manages offsets externally ...", which the operator must surface.
 * FileStreamSink overrides alterOffsets to return true, so it cannot show this.
 */
public class ExternalOffsetsSinkConnector extends SinkConnector {

    static final String VERSION = "4.3.0-connectops-test-sinks";
    static final String FILE = "file";

    static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(FILE, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    Importance.HIGH, "File the record values are appended to.");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        new AbstractConfig(CONFIG_DEF, props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return Writer.class;
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
        return VERSION;
    }

    /** Appends each record's value and a newline. */
    public static class Writer extends SinkTask {
        private Path file;

        @Override
        public String version() {
            return VERSION;
        }

        @Override
        public void start(Map<String, String> props) {
            file = Paths.get(props.get(FILE));
        }

        @Override
        public void put(Collection<SinkRecord> records) {
            StringBuilder lines = new StringBuilder();
            for (SinkRecord record : records) {
                lines.append(record.value()).append('\n');
            }
            try {
                Files.write(file, lines.toString().getBytes(StandardCharsets.UTF_8),
                        StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            } catch (IOException e) {
                throw new ConnectException("cannot write " + file, e);
            }
        }

        @Override
        public void stop() {
        }
    }
}
