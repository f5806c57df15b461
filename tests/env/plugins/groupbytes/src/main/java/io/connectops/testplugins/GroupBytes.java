package io.connectops.testplugins;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;

/**
 * The bytes a Java consumer puts into a group's member metadata and member assignment, made by
 * kafka-clients' own {@link ConsumerProtocol}: what a DescribeGroups answer of an Apache Kafka
 * broker carries for a Connect sink's consumer group. The test broker lists no group members, so
 * tests put these bytes into DescribeGroups answers to check that ownership is read from them.
 *
 * <p>One request per stdin line, one base64 answer per stdout line (a line protocol: one JVM for
 * many requests):
 * <pre>
 *   assignment VERSION USERDATA TOPIC:PARTITION,TOPIC:PARTITION...   ("-" for none)
 *   subscription VERSION USERDATA TOPIC,TOPIC... OWNED               (OWNED as above, or "-")
 * </pre>
 * USERDATA is a UTF-8 string put in the user-data field, or "-" for none.
 */
public final class GroupBytes {
    private GroupBytes() {}

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String[] f = line.trim().split(" ");
            short version = Short.parseShort(f[1]);
            ByteBuffer userData = "-".equals(f[2]) ? null : ByteBuffer.wrap(f[2].getBytes(StandardCharsets.UTF_8));
            ByteBuffer out;
            if ("assignment".equals(f[0])) {
                out = ConsumerProtocol.serializeAssignment(new Assignment(partitions(f[3]), userData), version);
            } else if ("subscription".equals(f[0])) {
                List<String> topics = Arrays.asList(f[3].split(","));
                out = ConsumerProtocol.serializeSubscription(
                        new Subscription(topics, userData, partitions(f.length > 4 ? f[4] : "-")), version);
            } else {
                throw new IllegalArgumentException("unknown request: " + f[0]);
            }
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            System.out.println(Base64.getEncoder().encodeToString(bytes));
            System.out.flush();
        }
    }

    private static List<TopicPartition> partitions(String spec) {
        List<TopicPartition> out = new ArrayList<>();
        if ("-".equals(spec)) {
            return out;
        }
        for (String tp : spec.split(",")) {
            int colon = tp.lastIndexOf(':');
            out.add(new TopicPartition(tp.substring(0, colon), Integer.parseInt(tp.substring(colon + 1))));
        }
        return out;
    }
}
