package io.connectops.testplugins;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsContext;
import org.apache.kafka.common.metrics.MetricsReporter;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.management.ObjectName;

/**
 * A Kafka {@link MetricsReporter} that serves the JVM's Kafka metrics in the Prometheus text
 * exposition format 0.0.4 at {@code http://HOST:PORT/metrics}, with exactly the names, labels and
 * types that Strimzi's example Kafka Connect metrics configuration gives them when Prometheus's
 * JMX exporter runs as a Java agent.
 *
 * <p><b>A test-environment stand-in.</b> Real deployments (Strimzi) run
 * {@code jmx_prometheus_javaagent} with a rules file; that jar is not obtainable here (no Maven
 * repository is reachable), so this reporter applies the same rules, the same way, to the metrics
 * Kafka registers, and the tests and benchmarks of this project read the same series a Strimzi
 * user's Prometheus would. It has no dependency beyond the JDK (com.sun.net.httpserver) and
 * kafka-clients, and is not meant for production.
 *
 * <p><b>Where the rules come from.</b> {@link #RULES} is the {@code rules:} list of
 * {@code packaging/examples/metrics/kafka-connect-metrics.yaml} in strimzi/strimzi-kafka-operator,
 * read at commit 8541da1e336bdcda9647aeacfbc2048e57580a52 (file last changed in
 * 17a687258f01f5bf0aee1ac8d71ee872d67f633a, "Add support for Kafka 4.3.1"), with
 * {@code lowercaseOutputName: true} and {@code lowercaseOutputLabelNames: true}. Strimzi's Kafka
 * images ship jmx_exporter 1.6.0 (docker-images/kafka-based/kafka/Dockerfile), whose behaviour is
 * reproduced here from prometheus/jmx_exporter v1.6.0 (JmxCollector, JmxMBeanPropertyCache,
 * MatchedRule, MatchedRuleToMetricSnapshotsConverter) and prometheus/client_java 1.7.0
 * (PrometheusNaming, PrometheusTextFormatWriter):
 * <ul>
 *   <li>the JMX bean name is Kafka's JmxReporter's: {@code <namespace>:type=<group>,<tag>=<value>...}
 *       in tag order, values quoted by {@code Sanitizer.jmxSanitize} (ObjectName.quote unless they
 *       match {@code [\w-%\. \t]*});</li>
 *   <li>a rule's pattern is compiled as {@code ^.*(?:PATTERN).*$} and matched against
 *       {@code domain<k1=v1, k2=v2><>attribute: value}; the first matching rule wins, even when it
 *       then drops the value (a non-numeric value without a {@code value:} in the rule);</li>
 *   <li>names and label names go through {@code $n} substitution, then every character outside
 *       {@code [a-zA-Z0-9:_]} becomes {@code _}, runs of {@code _} collapse, then lower case; names
 *       then lose the reserved suffixes {@code _total}, {@code _created}, {@code _bucket},
 *       {@code _info}; counters are written with {@code _total} appended again;</li>
 *   <li>labels are sorted by name; when several samples of one name have the same labels, each
 *       gets an {@code _objectname} label (the match string up to its last colon).</li>
 * </ul>
 *
 * <p>Consequences of the rules that matter to readers of these metrics (they hold for a real
 * Strimzi deployment too): because patterns are unanchored at the end, the task rule's first
 * alternative {@code .+-count} also matches {@code source-record-active-count-max} and
 * {@code -avg}, so all three come out as {@code kafka_connect_source_task_source_record_active_count}
 * told apart only by {@code _objectname}; {@code offset-commit-failure-percentage} and
 * {@code offset-commit-success-percentage} match no rule and are not exported; the producer's
 * {@code record-send-rate} is exported per topic only
 * ({@code kafka_producer_topic_record_send_rate{clientid,topic}}), producer-wide there is the counter
 * {@code kafka_producer_record_send_total{clientid}}; and the counter rule {@code (.+-total)}, tried
 * before the gauge rule, also matches {@code buffer-total-bytes}, which so becomes the counter
 * {@code kafka_producer_buffer_total{clientid}}, while {@code buffer-available-bytes} is the gauge
 * {@code kafka_producer_buffer_available_bytes}.
 *
 * <p>Only the Kafka series the rules map are served: not the agent's own series
 * ({@code jmx_scrape_duration_seconds}, {@code jmx_scrape_error}, {@code jmx_exporter_build_info},
 * ...) nor the JVM and process series ({@code jvm_*}, {@code process_*}) a real agent adds.
 *
 * <p>{@code /raw} serves every registered metric, rule or not, as tab-separated
 * {@code bean<TAB>attribute<TAB>value} lines (for test diagnostics such as the commit failure
 * percentage that the rules drop); it is not part of what Strimzi serves.
 *
 * <p><b>Configuration.</b> {@code metric.reporters=io.connectops.testplugins.PromReporter} on the
 * worker (Connect passes the worker's configs to {@code configure}) with
 * {@code connectops.prom.port=PORT} (and optionally {@code connectops.prom.host}, default
 * 127.0.0.1). Connect builds task producers from the worker's {@code producer.}-prefixed configs
 * (Worker.baseProducerConfigs), not from {@code metric.reporters}, so the producers' metrics need
 * {@code producer.metric.reporters=io.connectops.testplugins.PromReporter} too. All instances in a
 * JVM share one HTTP server and one registry (static), so the jar must be on the worker's class
 * path, not in a plugin directory (a plugin class loader would load a second copy of the statics).
 * The first instance configured with a port starts the server; instances without a port only
 * register their metrics.
 */
public class PromReporter implements MetricsReporter {

    public static final String PORT_CONFIG = "connectops.prom.port";
    public static final String HOST_CONFIG = "connectops.prom.host";

    /** One Strimzi rule: pattern, name, labels (sorted by name, as jmx_exporter's TreeMap), type. */
    static final class Rule {
        final Pattern pattern;
        final String name;
        final String help;
        final String type;
        final String value;
        final double valueFactor;
        final TreeMap<String, String> labels = new TreeMap<>();

        Rule(String pattern, String name, String help, String type, String value, double valueFactor,
             String... labelPairs) {
            this.pattern = Pattern.compile("^.*(?:" + pattern + ").*$");
            this.name = name;
            this.help = help;
            this.type = type;
            this.value = value;
            this.valueFactor = valueFactor;
            for (int i = 0; i < labelPairs.length; i += 2) {
                labels.put(labelPairs[i], labelPairs[i + 1]);
            }
        }
    }

    private static Rule gauge(String pattern, String name, String help, String... labels) {
        return new Rule(pattern, name, help, "GAUGE", null, 1.0, labels);
    }

    private static Rule counter(String pattern, String name, String help, String... labels) {
        return new Rule(pattern, name, help, "COUNTER", null, 1.0, labels);
    }

    /** Strimzi's rules, in their order (see the class comment for the source file and commit). */
    static final List<Rule> RULES = List.of(
        new Rule("kafka.(.+)<type=app-info, client-id=(.+)><>start-time-ms", "kafka_$1_start_time_seconds",
            "Kafka $1 JMX metric start time seconds", "GAUGE", null, 0.001, "clientId", "$2"),
        new Rule("kafka.(.+)<type=app-info, client-id=(.+)><>(commit-id|version): (.+)", "kafka_$1_$3_info",
            "Kafka $1 JMX metric info version and commit-id", "UNTYPED", "1", 1.0, "clientId", "$2", "$3", "$4"),
        counter("kafka.consumer<type=consumer-fetch-manager-metrics, client-id=(.+), topic=(.+), partition=(.+)><>(.+-total)",
            "kafka_consumer_fetch_manager_$4", "Kafka Consumer JMX metric type consumer-fetch-manager-metrics",
            "clientId", "$1", "topic", "$2", "partition", "$3"),
        gauge("kafka.consumer<type=consumer-fetch-manager-metrics, client-id=(.+), topic=(.+), partition=(.+)><>(compression-rate|.+-avg|.+-replica|.+-lag|.+-lead)",
            "kafka_consumer_fetch_manager_$4", "Kafka Consumer JMX metric type consumer-fetch-manager-metrics",
            "clientId", "$1", "topic", "$2", "partition", "$3"),
        counter("kafka.producer<type=producer-topic-metrics, client-id=(.+), topic=(.+)><>(.+-total)",
            "kafka_producer_topic_$3", "Kafka Producer JMX metric type producer-topic-metrics",
            "clientId", "$1", "topic", "$2"),
        gauge("kafka.producer<type=producer-topic-metrics, client-id=(.+), topic=(.+)><>(compression-rate|.+-avg|.+rate)",
            "kafka_producer_topic_$3", "Kafka Producer JMX metric type producer-topic-metrics",
            "clientId", "$1", "topic", "$2"),
        counter("kafka.(.+)<type=(.+)-metrics, client-id=(.+), node-id=(.+)><>(.+-total)",
            "kafka_$2_$5", "Kafka $1 JMX metric type $2", "clientId", "$3", "nodeId", "$4"),
        gauge("kafka.(.+)<type=(.+)-metrics, client-id=(.+), node-id=(.+)><>(.+-avg|.+-rate)",
            "kafka_$2_$5", "Kafka $1 JMX metric type $2", "clientId", "$3", "nodeId", "$4"),
        counter("kafka.(.+)<type=(.+)-metrics, client-id=(.*)><>(.+-total)",
            "kafka_$2_$4", "Kafka $1 JMX metric type $2", "clientId", "$3"),
        gauge("kafka.(.+)<type=(.+)-metrics, client-id=(.*)><>(.+-avg|.+-bytes|.+-count|.+-ratio|.+-age|.+-flight|.+-threads|.+-connectors|.+-tasks|.+-ago)",
            "kafka_$2_$4", "Kafka $1 JMX metric type $2", "clientId", "$3"),
        new Rule("kafka.connect<type=connector-metrics, connector=(.+)><>(connector-class|connector-type|connector-version|status): (.+)",
            "kafka_connect_connector_$2", "Kafka Connect $2 JMX metric type connector", "GAUGE", "1", 1.0,
            "connector", "$1", "$2", "$3"),
        new Rule("kafka.connect<type=connector-task-metrics, connector=(.+), task=(.+)><>status: ([a-z-]+)",
            "kafka_connect_connector_task_status", "Kafka Connect JMX Connector task status", "GAUGE", "1", 1.0,
            "connector", "$1", "task", "$2", "status", "$3"),
        counter("kafka.connect<type=(.+)-metrics, connector=(.+), task=(.+)><>(.+-total)",
            "kafka_connect_$1_$4", "Kafka Connect JMX metric type $1", "connector", "$2", "task", "$3"),
        gauge("kafka.connect<type=(.+)-metrics, connector=(.+), task=(.+)><>(.+-count|.+-ms|.+-ratio|.+-seq-no|.+-rate|.+-max|.+-avg|.+-failures|.+-requests|.+-timestamp|.+-logged|.+-errors|.+-retries|.+-skipped)",
            "kafka_connect_$1_$4", "Kafka Connect JMX metric type $1", "connector", "$2", "task", "$3"),
        gauge("kafka.connect<type=connect-worker-metrics, connector=(.+)><>([a-z-]+)",
            "kafka_connect_worker_$2", "Kafka Connect JMX metric $1", "connector", "$1"),
        counter("kafka.connect<type=connect-worker-metrics><>([a-z-]+-total)",
            "kafka_connect_worker_$1", "Kafka Connect JMX metric worker"),
        gauge("kafka.connect<type=connect-worker-metrics><>([a-z-]+)",
            "kafka_connect_worker_$1", "Kafka Connect JMX metric worker"),
        new Rule("kafka.connect<type=connect-worker-rebalance-metrics><>(leader-name|connect-protocol): (.+)",
            "kafka_connect_worker_rebalance_$1", "Kafka Connect $2 JMX metric type worker rebalance", "UNTYPED", "1", 1.0,
            "$1", "$2"),
        counter("kafka.connect<type=connect-worker-rebalance-metrics><>([a-z-]+-total)",
            "kafka_connect_worker_rebalance_$1", "Kafka Connect JMX metric rebalance information"),
        gauge("kafka.connect<type=connect-worker-rebalance-metrics><>([a-z-]+)",
            "kafka_connect_worker_rebalance_$1", "Kafka Connect JMX metric rebalance information"),
        gauge("kafka.connect<type=connect-coordinator-metrics><>(assigned-connectors|assigned-tasks)",
            "kafka_connect_coordinator_$1", "Kafka Connect JMX metric assignment information")
    );

    /** A metric as JMX would show it: one attribute of one bean. */
    private static final class Entry {
        final PromReporter owner;
        final KafkaMetric metric;
        final String beanName;
        final String domain;
        final LinkedHashMap<String, String> properties;
        final String attribute;

        Entry(PromReporter owner, KafkaMetric metric, String domain, LinkedHashMap<String, String> properties,
              String beanName, String attribute) {
            this.owner = owner;
            this.metric = metric;
            this.domain = domain;
            this.properties = properties;
            this.beanName = beanName;
            this.attribute = attribute;
        }
    }

    /** A sample after a rule matched (jmx_exporter's MatchedRule). */
    private static final class Sample {
        final String name;
        final String type;
        final String help;
        final TreeMap<String, String> labels;
        final String matchName;
        final double value;

        Sample(String name, String type, String help, TreeMap<String, String> labels, String matchName, double value) {
            this.name = name;
            this.type = type;
            this.help = help;
            this.labels = labels;
            this.matchName = matchName;
            this.value = value;
        }
    }

    // One registry and one server per JVM (per class loader that loads this class): keyed by bean
    // name and attribute, like the platform MBean server (a later registration of the same bean
    // attribute replaces the earlier one, as JmxReporter's re-registration does).
    private static final Map<String, Entry> REGISTRY = new ConcurrentHashMap<>();
    private static final Object SERVER_LOCK = new Object();
    private static HttpServer server;
    private static int serverPort = -1;

    private static final Pattern MBEAN_SAFE = Pattern.compile("[\\w-%\\. \t]*");
    private static final String[] RESERVED_SUFFIXES = {"_total", "_created", "_bucket", "_info"};

    private volatile String prefix = "";

    @Override
    public void configure(Map<String, ?> configs) {
        Object port = configs.get(PORT_CONFIG);
        if (port == null || port.toString().isEmpty()) {
            return;
        }
        Object host = configs.get(HOST_CONFIG);
        startServer(host == null ? "127.0.0.1" : host.toString(), Integer.parseInt(port.toString().trim()));
    }

    @Override
    public void contextChange(MetricsContext metricsContext) {
        String namespace = metricsContext.contextLabels().get(MetricsContext.NAMESPACE);
        if (namespace != null && !namespace.isEmpty()) {
            prefix = namespace;
        }
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
        for (KafkaMetric metric : metrics) {
            metricChange(metric);
        }
    }

    @Override
    public void metricChange(KafkaMetric metric) {
        MetricName name = metric.metricName();
        LinkedHashMap<String, String> properties = new LinkedHashMap<>();
        StringBuilder bean = new StringBuilder(prefix).append(":type=").append(name.group());
        properties.put("type", name.group());
        for (Map.Entry<String, String> tag : name.tags().entrySet()) {
            if (tag.getKey().isEmpty() || tag.getValue().isEmpty()) {
                continue;
            }
            String value = jmxSanitize(tag.getValue());
            properties.put(tag.getKey(), value);
            bean.append(',').append(tag.getKey()).append('=').append(value);
        }
        String beanName = bean.toString();
        REGISTRY.put(beanName + '\u0000' + name.name(), new Entry(this, metric, prefix, properties, beanName, name.name()));
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
        // Only this instance's own registration of this very metric: a newer client with the same
        // client id may have taken the key meanwhile.
        REGISTRY.values().removeIf(e -> e.owner == this && e.metric == metric);
    }

    @Override
    public void close() {
        REGISTRY.values().removeIf(e -> e.owner == this);
    }

    static String jmxSanitize(String value) {
        return MBEAN_SAFE.matcher(value).matches() ? value : ObjectName.quote(value);
    }

    private static void startServer(String host, int port) {
        synchronized (SERVER_LOCK) {
            if (server != null) {
                if (port != serverPort) {
                    System.err.println("PromReporter: already serving on port " + serverPort + ", ignoring " + port);
                }
                return;
            }
            try {
                HttpServer http = HttpServer.create(new InetSocketAddress(host, port), 0);
                http.createContext("/metrics", exchange -> respond(exchange, "text/plain; version=0.0.4; charset=utf-8", exposition()));
                http.createContext("/raw", exchange -> respond(exchange, "text/plain; charset=utf-8", raw()));
                http.setExecutor(Executors.newSingleThreadExecutor(r -> {
                    Thread t = new Thread(r, "connectops-prom-reporter");
                    t.setDaemon(true);
                    return t;
                }));
                // The JDK server's dispatcher thread inherits daemon status from the thread that
                // starts it: start it from a daemon thread, so it never keeps a JVM alive.
                Thread starter = new Thread(http::start, "connectops-prom-reporter-start");
                starter.setDaemon(true);
                starter.start();
                starter.join();
                server = http;
                serverPort = port;
                System.err.println("PromReporter: serving Prometheus metrics on http://" + host + ":" + port + "/metrics");
            } catch (IOException e) {
                throw new IllegalStateException("PromReporter could not listen on " + host + ":" + port, e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("PromReporter interrupted while starting its server", e);
            }
        }
    }

    private static void respond(HttpExchange exchange, String contentType, String body) throws IOException {
        try {
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", contentType);
            exchange.sendResponseHeaders(200, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        } finally {
            exchange.close();
        }
    }

    static String raw() {
        StringBuilder out = new StringBuilder();
        for (Entry e : new ArrayList<>(REGISTRY.values())) {
            Object value = e.metric.metricValue();
            out.append(e.beanName).append('\t').append(e.attribute).append('\t')
                .append(String.valueOf(value).replace('\n', ' ')).append('\n');
        }
        return out.toString();
    }

    /** The exposition of every registered metric a rule maps, as jmx_exporter 1.6.0 would write it. */
    static String exposition() {
        Map<String, List<Sample>> byName = new TreeMap<>();
        for (Entry e : new ArrayList<>(REGISTRY.values())) {
            Sample sample = match(e);
            if (sample != null) {
                byName.computeIfAbsent(sample.name, k -> new ArrayList<>()).add(sample);
            }
        }
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, List<Sample>> family : byName.entrySet()) {
            writeFamily(out, family.getKey(), family.getValue());
        }
        return out.toString();
    }

    private static Sample match(Entry e) {
        Object beanValue = e.metric.metricValue();
        if (beanValue == null) {
            return null;  // the JMX scraper skips null attribute values
        }
        StringBuilder props = new StringBuilder();
        for (Map.Entry<String, String> p : e.properties.entrySet()) {
            if (props.length() > 0) {
                props.append(", ");
            }
            props.append(p.getKey()).append('=').append(p.getValue());
        }
        String matchName = e.domain + "<" + props + "><>" + e.attribute + ": " + beanValue;
        for (Rule rule : RULES) {
            Matcher matcher = rule.pattern.matcher(matchName);
            if (!matcher.matches()) {
                continue;
            }
            double value;
            if (rule.value != null) {
                try {
                    value = Double.parseDouble(matcher.replaceAll(rule.value));
                } catch (NumberFormatException ex) {
                    return null;
                }
            } else if (beanValue instanceof Number) {
                value = ((Number) beanValue).doubleValue();
            } else if (beanValue instanceof Boolean) {
                value = (Boolean) beanValue ? 1 : 0;
            } else {
                return null;  // first matching rule wins, even when it drops the value
            }
            value *= rule.valueFactor;
            String name = safeName(matcher.replaceAll(rule.name));
            if (name.isEmpty()) {
                return null;
            }
            name = stripReservedSuffixes(name.toLowerCase());
            TreeMap<String, String> labels = new TreeMap<>();
            for (Map.Entry<String, String> label : rule.labels.entrySet()) {
                String labelName = safeName(matcher.replaceAll(label.getKey())).toLowerCase();
                String labelValue = matcher.replaceAll(label.getValue());
                if (!labelName.isEmpty() && !labelValue.isEmpty()) {
                    labels.put(labelName, labelValue);
                }
            }
            return new Sample(name, rule.type, matcher.replaceAll(rule.help), labels, matchName, value);
        }
        return null;
    }

    private static void writeFamily(StringBuilder out, String name, List<Sample> samples) {
        Set<String> types = new HashSet<>();
        Set<TreeMap<String, String>> seen = new HashSet<>();
        boolean unique = true;
        for (Sample s : samples) {
            types.add(s.type);
            unique &= seen.add(s.labels);
        }
        String type = types.size() == 1 ? types.iterator().next() : "UNKNOWN";
        String exposed;
        String typeText;
        switch (type) {
            case "COUNTER":
                exposed = name + "_total";
                typeText = "counter";
                break;
            case "GAUGE":
                exposed = name;
                typeText = "gauge";
                break;
            default:
                exposed = name;
                typeText = "untyped";
        }
        String help = samples.get(0).help;
        if (help != null && !help.isEmpty()) {
            out.append("# HELP ").append(exposed).append(' ')
                .append(help.replace("\\", "\\\\").replace("\n", "\\n")).append('\n');
        }
        out.append("# TYPE ").append(exposed).append(' ').append(typeText).append('\n');
        for (Sample s : samples) {
            TreeMap<String, String> labels = s.labels;
            if (!unique) {
                labels = new TreeMap<>(labels);
                int colon = s.matchName.lastIndexOf(':');
                labels.put("_objectname", colon <= 0 ? s.matchName : s.matchName.substring(0, colon));
            }
            out.append(exposed);
            if (!labels.isEmpty()) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<String, String> l : labels.entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    out.append(l.getKey()).append("=\"").append(l.getValue()
                        .replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")).append('"');
                }
                out.append('}');
            }
            out.append(' ').append(formatDouble(s.value)).append('\n');
        }
    }

    private static String formatDouble(double d) {
        if (d == Double.POSITIVE_INFINITY) {
            return "+Inf";
        }
        if (d == Double.NEGATIVE_INFINITY) {
            return "-Inf";
        }
        return Double.toString(d);
    }

    /** jmx_exporter's toSafeName: [^a-zA-Z0-9:_] to '_', runs of '_' collapsed, no leading digit. */
    static String safeName(String name) {
        StringBuilder b = new StringBuilder(name.length());
        if (!name.isEmpty() && Character.isDigit(name.charAt(0))) {
            b.append('_');
        }
        boolean prevUnderscore = false;
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            boolean legal = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':';
            if (!legal) {
                if (!prevUnderscore) {
                    b.append('_');
                    prevUnderscore = true;
                }
            } else {
                b.append(c);
                prevUnderscore = false;
            }
        }
        return b.toString();
    }

    /** client_java's PrometheusNaming.sanitizeMetricName (jmx_exporter's MatchedRule applies it). */
    static String stripReservedSuffixes(String name) {
        boolean stripped = true;
        while (stripped) {
            stripped = false;
            for (String suffix : RESERVED_SUFFIXES) {
                if (name.equals(suffix)) {
                    return suffix.substring(1);
                }
            }
            for (String suffix : RESERVED_SUFFIXES) {
                if (name.endsWith(suffix)) {
                    name = name.substring(0, name.length() - suffix.length());
                    stripped = true;
                    break;
                }
            }
        }
        return name;
    }
}
