/*
 * Test-only stand-ins for MirrorMaker 2's connectors (connect-mirror is not obtainable in this
 * environment). They write source offsets with exactly MM2's shapes and validate offset
 * alterations the way MM2's connectors do, so the operator's offset handling can be exercised
 * against a real Connect worker. Not a replication tool.
 */
package io.connectops.testplugins;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.connect.errors.ConnectException;

/**
 * MM2's source-partition/offset shapes and the validation rules of MM2's
 * {@code MirrorUtils} (validateSourcePartitionString, validateSourcePartitionPartition,
 * validateSourceOffset), re-implemented with the same semantics and messages.
 */
final class MirrorShapes {

    static final String VERSION = "4.3.0-connectops-mm2-shapes";

    // MirrorSourceConnector: {"cluster": sourceAlias, "topic": t, "partition": p} -> {"offset": n}
    static final String SOURCE_CLUSTER_KEY = "cluster";
    static final String TOPIC_KEY = "topic";
    static final String PARTITION_KEY = "partition";
    static final String OFFSET_KEY = "offset";
    // MirrorCheckpointConnector: {"group": g, "topic": t, "partition": p} -> {"offset": 0}
    static final String CONSUMER_GROUP_ID_KEY = "group";
    // MirrorHeartbeatConnector: {"sourceClusterAlias": s, "targetClusterAlias": t} -> {"offset": 0}
    static final String SOURCE_CLUSTER_ALIAS_KEY = "sourceClusterAlias";
    static final String TARGET_CLUSTER_ALIAS_KEY = "targetClusterAlias";

    private MirrorShapes() {
    }

    static Map<String, Object> sourcePartition(String sourceAlias, String topic, int partition) {
        Map<String, Object> map = new HashMap<>();
        map.put(SOURCE_CLUSTER_KEY, sourceAlias);
        map.put(TOPIC_KEY, topic);
        map.put(PARTITION_KEY, partition);
        return map;
    }

    static Map<String, Object> checkpointPartition(String group, String topic, int partition) {
        Map<String, Object> map = new HashMap<>();
        map.put(CONSUMER_GROUP_ID_KEY, group);
        map.put(TOPIC_KEY, topic);
        map.put(PARTITION_KEY, partition);
        return map;
    }

    static Map<String, Object> heartbeatPartition(String sourceAlias, String targetAlias) {
        Map<String, Object> map = new HashMap<>();
        map.put(SOURCE_CLUSTER_ALIAS_KEY, sourceAlias);
        map.put(TARGET_CLUSTER_ALIAS_KEY, targetAlias);
        return map;
    }

    static Map<String, Object> offset(long offset) {
        Map<String, Object> map = new HashMap<>();
        map.put(OFFSET_KEY, offset);
        return map;
    }

    /** The stored upstream offset, or -1 when none is stored (a reset, or never replicated). */
    static long storedOffset(Map<String, ?> offset) {
        if (offset == null || !(offset.get(OFFSET_KEY) instanceof Number)) {
            return -1L;
        }
        return ((Number) offset.get(OFFSET_KEY)).longValue();
    }

    /** The key must be present and hold a string. */
    static void requireString(Map<String, ?> sourcePartition, String key) {
        if (!sourcePartition.containsKey(key)) {
            throw new ConnectException(String.format(
                    "Source partition %s is missing the '%s' key, which is required", sourcePartition, key));
        }
        Object value = sourcePartition.get(key);
        if (!(value instanceof String)) {
            throw new ConnectException(String.format(
                    "Source partition %s has an invalid value %s for the '%s' key, which must be a string",
                    sourcePartition, value, key));
        }
    }

    /** "partition" must be present and a non-negative integer (a long that fits in an int is fine). */
    static void requirePartition(Map<String, ?> sourcePartition) {
        if (!sourcePartition.containsKey(PARTITION_KEY)) {
            throw new ConnectException(String.format(
                    "Source partition %s is missing the '%s' key, which is required", sourcePartition, PARTITION_KEY));
        }
        Object value = sourcePartition.get(PARTITION_KEY);
        if (!(value instanceof Integer || value instanceof Long) || ((Number) value).longValue() > Integer.MAX_VALUE) {
            throw new ConnectException(String.format(
                    "Source partition %s has an invalid value %s for the '%s' key, which must be an integer",
                    sourcePartition, value, PARTITION_KEY));
        }
        if (((Number) value).intValue() < 0) {
            throw new ConnectException(String.format(
                    "Source partition %s has an invalid value %s for the '%s' key, which cannot be negative",
                    sourcePartition, value, PARTITION_KEY));
        }
    }

    /**
     * A null offset (a tombstone, i.e. a reset) is always valid. Otherwise "offset" must be an
     * integer; with {@code onlyZero} it must be exactly 0 (checkpoint and heartbeat connectors
     * do not use their offsets), else it must not be negative.
     */
    static void requireOffset(Map<String, ?> sourcePartition, Map<String, ?> sourceOffset, boolean onlyZero) {
        if (sourceOffset == null) {
            return;
        }
        if (!sourceOffset.containsKey(OFFSET_KEY)) {
            throw new ConnectException(String.format(
                    "Source offset %s for source partition %s is missing the '%s' key, which is required",
                    sourceOffset, sourcePartition, OFFSET_KEY));
        }
        Object offset = sourceOffset.get(OFFSET_KEY);
        if (!(offset instanceof Integer || offset instanceof Long)) {
            throw new ConnectException(String.format(
                    "Source offset %s for source partition %s has an invalid value %s for the '%s' key, "
                            + "which must be an integer",
                    sourceOffset, sourcePartition, offset, OFFSET_KEY));
        }
        long value = ((Number) offset).longValue();
        if (onlyZero && value != 0) {
            throw new ConnectException(String.format(
                    "Source offset %s for source partition %s has an invalid value %s for the '%s' key; "
                            + "the only accepted value is 0",
                    sourceOffset, sourcePartition, offset, OFFSET_KEY));
        }
        if (!onlyZero && value < 0) {
            throw new ConnectException(String.format(
                    "Source offset %s for source partition %s has an invalid value %s for the '%s' key, "
                            + "which cannot be negative",
                    sourceOffset, sourcePartition, offset, OFFSET_KEY));
        }
    }

    /** Common frame of the three connectors' alterOffsets: tombstones pass, partitions may not be null. */
    static void forEachAlteration(Map<Map<String, ?>, Map<String, ?>> offsets, Check check) {
        for (Map.Entry<Map<String, ?>, Map<String, ?>> entry : offsets.entrySet()) {
            if (entry.getValue() == null) {
                // Tombstones are accepted for anything, so garbage can always be cleaned up.
                continue;
            }
            if (entry.getKey() == null) {
                throw new ConnectException("Source partitions may not be null");
            }
            check.validate(entry.getKey(), entry.getValue());
        }
    }

    @FunctionalInterface
    interface Check {
        void validate(Map<String, ?> sourcePartition, Map<String, ?> sourceOffset);
    }
}
