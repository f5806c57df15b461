package io.connectops.testplugins;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** A task that emits a fixed set of records at once and then every {@code emit.interval.ms}. */
abstract class PeriodicShapeTask extends SourceTask {

    static final String EMIT_INTERVAL_MS = "emit.interval.ms";

    private final CountDownLatch stopped = new CountDownLatch(1);
    private long intervalMs;
    private boolean emitted;

    protected abstract void configure(Map<String, String> props);

    protected abstract List<SourceRecord> records();

    @Override
    public String version() {
        return MirrorShapes.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        intervalMs = Long.parseLong(props.getOrDefault(EMIT_INTERVAL_MS, "1000"));
        configure(props);
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        if (emitted && stopped.await(intervalMs, TimeUnit.MILLISECONDS)) {
            return null;
        }
        if (stopped.getCount() == 0) {
            return null;
        }
        emitted = true;
        List<SourceRecord> records = records();
        // WorkerSourceTask expects null, not an empty list, when there is nothing
        return records.isEmpty() ? null : records;
    }

    @Override
    public void stop() {
        stopped.countDown();
    }
}
