package io.connectops.testplugins.versioned;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** See {@link VersionedSourceConnector}. */
public class VersionedSourceTask extends SourceTask {

    private final CountDownLatch stopped = new CountDownLatch(1);
    private String topic;
    private long interval;
    private String name;
    private Map<String, String> partition;
    private long seq;
    private long perStart;
    private long written;

    @Override
    public String version() {
        return VersionedSourceConnector.jarVersion();
    }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(VersionedSourceConnector.CONFIG, props);
        topic = config.getString(VersionedSourceConnector.TOPIC);
        interval = config.getLong(VersionedSourceConnector.INTERVAL);
        perStart = config.getLong(VersionedSourceConnector.PER_START);
        name = props.getOrDefault(VersionedSourceConnector.NAME, "versioned");
        partition = Map.of("versioned", name);
        Map<String, Object> committed = context.offsetStorageReader().offset(partition);
        seq = committed != null && committed.get("seq") instanceof Number ? ((Number) committed.get("seq")).longValue() : 0;
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        if (stopped.await(interval, TimeUnit.MILLISECONDS)) {
            return null;
        }
        if (perStart > 0 && written >= perStart) {
            return null;
        }
        written++;
        seq++;
        String value = name + " " + version() + " " + seq;
        return List.of(new SourceRecord(partition, Map.of("seq", seq), topic, null, null, null, Schema.STRING_SCHEMA, value));
    }

    @Override
    public void stop() {
        stopped.countDown();
    }
}
