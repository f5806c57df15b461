package io.connectops.testplugins;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** See {@link FloodSourceConnector}. */
public class FloodSourceTask extends SourceTask {

    private final CountDownLatch stopped = new CountDownLatch(1);
    private String topic;
    private byte[] value;
    private double rate;
    private int pollMax;
    private Map<String, String> partition;
    private long seq;
    private long startSeq;
    private long startNanos;

    @Override
    public String version() {
        return "1.0";
    }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(FloodSourceConnector.CONFIG, props);
        topic = config.getString(FloodSourceConnector.TOPIC);
        value = new byte[config.getInt(FloodSourceConnector.RECORD_BYTES)];
        Arrays.fill(value, (byte) 'x');
        rate = config.getDouble(FloodSourceConnector.RATE);
        pollMax = config.getInt(FloodSourceConnector.POLL_MAX);
        partition = Map.of("flood", props.getOrDefault(FloodSourceConnector.NAME, "flood"));
        Map<String, Object> committed = context.offsetStorageReader().offset(partition);
        seq = committed != null && committed.get("seq") instanceof Number ? ((Number) committed.get("seq")).longValue() : 0;
        startSeq = seq;
        startNanos = System.nanoTime();
        // Read by tests/env/pressure.py (PressureEnv.start_seq): where this task's poll-total counts from.
        System.out.println("FloodSourceTask " + partition.get("flood") + " starting at seq " + seq);
        System.out.flush();
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        int n = pollMax;
        if (rate > 0) {
            while (true) {
                double elapsed = (System.nanoTime() - startNanos) / 1e9;
                long due = (long) (elapsed * rate) - (seq - startSeq);
                if (due > 0) {
                    n = (int) Math.min(due, pollMax);
                    break;
                }
                long waitMs = Math.max(1, (long) Math.ceil(1000.0 / rate));
                if (stopped.await(Math.min(waitMs, 100), TimeUnit.MILLISECONDS)) {
                    return null;
                }
            }
        } else if (stopped.getCount() == 0) {
            return null;
        }
        List<SourceRecord> records = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            seq++;
            records.add(new SourceRecord(partition, Map.of("seq", seq), topic, null, null, null,
                Schema.BYTES_SCHEMA, value));
        }
        return records;
    }

    @Override
    public void stop() {
        stopped.countDown();
    }
}
