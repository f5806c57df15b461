"""Producer pressure: worker metrics as Strimzi serves them, the diagnosis, the computed batch.size,
and the before/after comparison.

Expected numbers are derived here from the formula each test states, never read back from the
module's constants.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Iterator

import pytest

from connectops.models.connector import ProducerOverrides
from connectops_check.pressure import (
    CommitForm,
    ProducerSettings,
    Verdict,
    WorkerSettings,
    compare,
    diagnose,
    recommend,
    summarize,
)
from connectops_check.worker_metrics import (
    DEFAULT_MAX_EXPOSITION_BYTES,
    FIGURE_SOURCES,
    ExpositionError,
    ExpositionTooLarge,
    TaskFigures,
    jmx_sanitize,
    parse_worker_metrics,
    read_exposition,
)

KIB16 = 16 * 1024


def round_up_16k(n: float) -> int:
    return math.ceil(n / KIB16) * KIB16


# --- the names: Strimzi's rules, applied the way jmx_exporter applies them ----------------------

#: The rules of packaging/examples/metrics/kafka-connect-metrics.yaml (strimzi/strimzi-kafka-operator
#: 8541da1e336bdcda9647aeacfbc2048e57580a52) that can match task, source-task and producer beans, in
#: file order (the first match wins): (pattern, name template).
STRIMZI_RULES = [
    (
        r"kafka.consumer<type=consumer-fetch-manager-metrics, client-id=(.+), topic=(.+), partition=(.+)><>(.+-total)",
        "kafka_consumer_fetch_manager_$4",
    ),
    (r"kafka.producer<type=producer-topic-metrics, client-id=(.+), topic=(.+)><>(.+-total)", "kafka_producer_topic_$3"),
    (
        r"kafka.producer<type=producer-topic-metrics, client-id=(.+), topic=(.+)><>(compression-rate|.+-avg|.+rate)",
        "kafka_producer_topic_$3",
    ),
    (r"kafka.(.+)<type=(.+)-metrics, client-id=(.+), node-id=(.+)><>(.+-total)", "kafka_$2_$5"),
    (r"kafka.(.+)<type=(.+)-metrics, client-id=(.+), node-id=(.+)><>(.+-avg|.+-rate)", "kafka_$2_$5"),
    (r"kafka.(.+)<type=(.+)-metrics, client-id=(.*)><>(.+-total)", "kafka_$2_$4"),
    (
        r"kafka.(.+)<type=(.+)-metrics, client-id=(.*)><>"
        r"(.+-avg|.+-bytes|.+-count|.+-ratio|.+-age|.+-flight|.+-threads|.+-connectors|.+-tasks|.+-ago)",
        "kafka_$2_$4",
    ),
    (r"kafka.connect<type=connector-task-metrics, connector=(.+), task=(.+)><>status: ([a-z-]+)", "x_status"),
    (r"kafka.connect<type=(.+)-metrics, connector=(.+), task=(.+)><>(.+-total)", "kafka_connect_$1_$4"),
    (
        r"kafka.connect<type=(.+)-metrics, connector=(.+), task=(.+)><>(.+-count|.+-ms|.+-ratio|.+-seq-no|.+-rate|"
        r".+-max|.+-avg|.+-failures|.+-requests|.+-timestamp|.+-logged|.+-errors|.+-retries|.+-skipped)",
        "kafka_connect_$1_$4",
    ),
]


def strimzi_name(bean: str, attribute: str) -> str | None:
    """jmx_exporter 1.6.0: ``^.*(?:pattern).*$`` against ``bean<>attribute: value``; safe, lowercased."""
    match_name = f"{bean}<>{attribute}: 1.0"
    for pattern, template in STRIMZI_RULES:
        m = re.fullmatch(f"^.*(?:{pattern}).*$", match_name)
        if m:
            name = m.expand(re.sub(r"\$(\d)", r"\\g<\1>", template))
            # toSafeName: every run of unsafe characters and underscores becomes one underscore
            return re.sub(r"[^a-zA-Z0-9:]+", "_", name).lower()
    return None


def bean(source_scope: str) -> str:
    return {
        "source-task": "kafka.connect<type=source-task-metrics, connector=c, task=0>",
        "connector-task": "kafka.connect<type=connector-task-metrics, connector=c, task=0>",
        "producer": "kafka.producer<type=producer-metrics, client-id=connector-producer-c-0>",
        "producer-topic": "kafka.producer<type=producer-topic-metrics, client-id=connector-producer-c-0, topic=t>",
    }[source_scope]


@pytest.mark.parametrize(
    ("scope", "attribute"),
    [
        ("source-task", "source-record-active-count"),
        ("source-task", "source-record-active-count-max"),
        ("source-task", "source-record-active-count-avg"),
        ("source-task", "source-record-poll-rate"),
        ("connector-task", "offset-commit-failure-percentage"),
        ("connector-task", "offset-commit-max-time-ms"),
        ("connector-task", "offset-commit-avg-time-ms"),
        ("producer", "record-send-rate"),
        ("producer-topic", "record-send-rate"),
        ("producer", "records-per-request-avg"),
        ("producer", "batch-size-avg"),
        ("producer", "record-size-avg"),
        ("producer", "buffer-available-bytes"),
        ("producer", "buffer-total-bytes"),
        ("producer", "request-latency-avg"),
        ("producer", "record-queue-time-avg"),
    ],
)
def test_mapped_names_are_what_the_strimzi_rules_produce(scope: str, attribute: str) -> None:
    served = strimzi_name(bean(scope), attribute)
    topic_level = scope == "producer-topic"
    sources = [
        s
        for sources in FIGURE_SOURCES.values()
        for s in sources
        if s.attribute == attribute and (s.summed_over == "topic") == topic_level
    ]
    strimzi_sources = [s for s in sources if s.strimzi]
    if served is None:
        # not served by the example rules: only a user's extended rule could provide it
        assert not strimzi_sources, f"{attribute} is mapped to a Strimzi name, but no rule matches it"
    else:
        assert [s.sample for s in strimzi_sources] == [served]


def test_rules_collapse_active_count_figures_and_drop_percentages() -> None:
    # the facts the mapping is built on, checked against the quoted rules themselves
    names = {
        strimzi_name(bean("source-task"), a) for a in ("source-record-active-count", "source-record-active-count-max")
    }
    assert names == {"kafka_connect_source_task_source_record_active_count"}
    assert strimzi_name(bean("producer"), "buffer-total-bytes") == "kafka_producer_buffer_total"
    assert strimzi_name(bean("connector-task"), "offset-commit-failure-percentage") is None
    assert strimzi_name(bean("producer"), "record-send-rate") is None


def test_every_figure_has_a_source() -> None:
    figures = {f.name for f in dataclasses.fields(TaskFigures)} - {"connector", "task"}
    assert set(FIGURE_SOURCES) == figures


# --- parsing ------------------------------------------------------------------------------------


def objectname(connector: str, task: int, attribute: str) -> str:
    return f"kafka.connect<type=source-task-metrics, connector={connector}, task={task}><>{attribute}"


def active_lines(connector: str, task: int, now: float, peak: float, avg: float) -> str:
    label = jmx_sanitize(connector).replace("\\", "\\\\").replace('"', '\\"')
    name = "kafka_connect_source_task_source_record_active_count"
    out = []
    for attribute, value in (
        ("source-record-active-count", now),
        ("source-record-active-count-max", peak),
        ("source-record-active-count-avg", avg),
    ):
        on = objectname(label, task, attribute)
        out.append(f'{name}{{connector="{label}",task="{task}",_objectname="{on}"}} {value}')
    return "\n".join(out)


#: One worker, as jmx_exporter 1.6.0 serves it with Strimzi's rules: connectors inventory-cdc
#: (tasks 0, 1), orders-cdc and inventory (a prefix of inventory-cdc) whose values all lie in
#: [9000, 9200) so a leak shows, and crm/leads (quoted by Kafka's Sanitizer).
EXPOSITION = f"""\
# HELP kafka_connect_source_task_source_record_active_count Kafka Connect JMX metric type source-task
# TYPE kafka_connect_source_task_source_record_active_count gauge
{active_lines("inventory-cdc", 0, 41000.0, 60000.0, 35000.5)}
{active_lines("inventory-cdc", 1, 120.0, 300.0, 150.0)}
{active_lines("orders-cdc", 0, 9001.0, 9002.0, 9003.0)}
{active_lines("crm/leads", 0, 7.0, 8.0, 7.5)}
{active_lines("inventory", 0, 9101.0, 9102.0, 9103.0)}
# HELP kafka_connect_source_task_source_record_poll_rate Kafka Connect JMX metric type source-task
# TYPE kafka_connect_source_task_source_record_poll_rate gauge
kafka_connect_source_task_source_record_poll_rate{{connector="inventory-cdc",task="0"}} 2480.5
kafka_connect_source_task_source_record_poll_rate{{connector="inventory-cdc",task="1"}} 12.0
kafka_connect_source_task_source_record_poll_rate{{connector="orders-cdc",task="0"}} 9004.0
# HELP kafka_connect_source_task_source_record_poll_total Kafka Connect JMX metric type source-task
# TYPE kafka_connect_source_task_source_record_poll_total counter
kafka_connect_source_task_source_record_poll_total{{connector="inventory-cdc",task="0"}} 1.2E7
# HELP kafka_connect_connector_task_offset_commit_max_time_ms Kafka Connect JMX metric type connector-task
# TYPE kafka_connect_connector_task_offset_commit_max_time_ms gauge
kafka_connect_connector_task_offset_commit_max_time_ms{{connector="inventory-cdc",task="0"}} 5004.0
kafka_connect_connector_task_offset_commit_max_time_ms{{connector="inventory-cdc",task="1"}} 12.0
kafka_connect_connector_task_offset_commit_max_time_ms{{connector="orders-cdc",task="0"}} 9005.0
# HELP kafka_connect_connector_task_offset_commit_avg_time_ms Kafka Connect JMX metric type connector-task
# TYPE kafka_connect_connector_task_offset_commit_avg_time_ms gauge
kafka_connect_connector_task_offset_commit_avg_time_ms{{connector="inventory-cdc",task="0"}} 2600.0
kafka_connect_connector_task_offset_commit_avg_time_ms{{connector="orders-cdc",task="0"}} 9006.0
# HELP kafka_connect_connector_task_batch_size_avg Kafka Connect JMX metric type connector-task
# TYPE kafka_connect_connector_task_batch_size_avg gauge
kafka_connect_connector_task_batch_size_avg{{connector="inventory-cdc",task="0"}} 2048.0
# HELP kafka_producer_records_per_request_avg Kafka producer JMX metric type producer
# TYPE kafka_producer_records_per_request_avg gauge
kafka_producer_records_per_request_avg{{clientid="connector-producer-inventory-cdc-0"}} 25.1
kafka_producer_records_per_request_avg{{clientid="connector-producer-inventory-cdc-1"}} 1.5
kafka_producer_records_per_request_avg{{clientid="connector-producer-orders-cdc-0"}} 9007.0
kafka_producer_records_per_request_avg{{clientid="connector-producer-inventory-0"}} 9107.0
kafka_producer_records_per_request_avg{{clientid="producer-1"}} 9008.0
# HELP kafka_producer_batch_size_avg Kafka producer JMX metric type producer
# TYPE kafka_producer_batch_size_avg gauge
kafka_producer_batch_size_avg{{clientid="connector-producer-inventory-cdc-0"}} 16290.0
kafka_producer_batch_size_avg{{clientid="connector-producer-inventory-cdc-1"}} 980.0
kafka_producer_batch_size_avg{{clientid="connector-producer-orders-cdc-0"}} 9009.0
kafka_producer_batch_size_avg{{clientid="\\"connector-producer-crm/leads-0\\""}} 700.0
# HELP kafka_producer_record_size_avg Kafka producer JMX metric type producer
# TYPE kafka_producer_record_size_avg gauge
kafka_producer_record_size_avg{{clientid="connector-producer-inventory-cdc-0"}} 712.0
kafka_producer_record_size_avg{{clientid="connector-producer-orders-cdc-0"}} 9010.0
# HELP kafka_producer_buffer_available_bytes Kafka producer JMX metric type producer
# TYPE kafka_producer_buffer_available_bytes gauge
kafka_producer_buffer_available_bytes{{clientid="connector-producer-inventory-cdc-0"}} 1200000.0
kafka_producer_buffer_available_bytes{{clientid="connector-producer-inventory-cdc-1"}} 3.3554432E7
kafka_producer_buffer_available_bytes{{clientid="connector-producer-orders-cdc-0"}} 9011.0
# HELP kafka_producer_buffer_total Kafka producer JMX metric type producer
# TYPE kafka_producer_buffer_total counter
kafka_producer_buffer_total{{clientid="connector-producer-inventory-cdc-0"}} 3.3554432E7
kafka_producer_buffer_total{{clientid="connector-producer-inventory-cdc-1"}} 3.3554432E7
kafka_producer_buffer_total{{clientid="connector-producer-orders-cdc-0"}} 9012.0
# HELP kafka_producer_request_latency_avg Kafka producer JMX metric type producer
# TYPE kafka_producer_request_latency_avg gauge
kafka_producer_request_latency_avg{{clientid="connector-producer-inventory-cdc-0"}} 98.0
kafka_producer_request_latency_avg{{clientid="connector-producer-inventory-cdc-1"}} NaN
kafka_producer_request_latency_avg{{clientid="connector-producer-orders-cdc-0"}} 9013.0
# HELP kafka_producer_record_queue_time_avg Kafka producer JMX metric type producer
# TYPE kafka_producer_record_queue_time_avg gauge
kafka_producer_record_queue_time_avg{{clientid="connector-producer-inventory-cdc-0"}} 4100.0
# HELP kafka_producer_topic_record_send_rate Kafka Producer JMX metric type producer-topic-metrics
# TYPE kafka_producer_topic_record_send_rate gauge
kafka_producer_topic_record_send_rate{{clientid="connector-producer-inventory-cdc-0",topic="inventory.customers"}} 150.0
kafka_producer_topic_record_send_rate{{clientid="connector-producer-inventory-cdc-0",topic="inventory.orders"}} 106.0
kafka_producer_topic_record_send_rate{{clientid="connector-producer-orders-cdc-0",topic="orders"}} 9014.0
# HELP kafka_producer_node_request_latency_avg Kafka producer JMX metric type producer-node
# TYPE kafka_producer_node_request_latency_avg gauge
kafka_producer_node_request_latency_avg{{clientid="connector-producer-inventory-cdc-0",nodeid="node-1"}} 97.0
# HELP kafka_connect_worker_connector_count Kafka Connect JMX metric worker
# TYPE kafka_connect_worker_connector_count gauge
kafka_connect_worker_connector_count 4.0
"""


def test_parse_reads_one_connectors_tasks_and_nothing_else() -> None:
    figures = parse_worker_metrics(EXPOSITION, "inventory-cdc")
    assert set(figures) == {("inventory-cdc", 0), ("inventory-cdc", 1)}
    t0 = figures[("inventory-cdc", 0)]
    assert (t0.connector, t0.task) == ("inventory-cdc", 0)
    # the three collapsed active-count figures are told apart by _objectname
    assert (t0.source_record_active_count, t0.source_record_active_count_max, t0.source_record_active_count_avg) == (
        41000.0,
        60000.0,
        35000.5,
    )
    assert t0.source_record_poll_rate == 2480.5
    assert t0.offset_commit_max_time_ms == 5004.0
    assert t0.offset_commit_avg_time_ms == 2600.0
    assert t0.records_per_request_avg == 25.1
    assert t0.batch_size_avg == 16290.0
    assert t0.record_size_avg == 712.0
    assert t0.buffer_available_bytes == 1200000.0
    assert t0.buffer_total_bytes == 33554432.0
    assert t0.request_latency_avg_ms == 98.0
    assert t0.record_queue_time_avg_ms == 4100.0
    # per-topic send rates of the task's producer, added up
    assert t0.record_send_rate == 150.0 + 106.0
    # a worker serves every connector: no figure of another connector may leak into this one's
    leaked = [
        (t.task, f.name, getattr(t, f.name))
        for t in figures.values()
        for f in dataclasses.fields(TaskFigures)
        if isinstance(getattr(t, f.name), float) and 9000 <= getattr(t, f.name) < 9200
    ]
    assert leaked == []


def test_parse_missing_and_nan_figures_are_none() -> None:
    t1 = parse_worker_metrics(EXPOSITION, "inventory-cdc")[("inventory-cdc", 1)]
    assert t1.request_latency_avg_ms is None  # NaN: Kafka's average over an empty window
    assert t1.record_size_avg is None  # not served for this task
    assert t1.record_send_rate is None
    # Strimzi's rules serve no failure percentage at all
    assert t1.offset_commit_failure_percentage is None
    assert t1.source_record_active_count_max == 300.0


def test_parse_other_connectors_separately() -> None:
    orders = parse_worker_metrics(EXPOSITION, "orders-cdc")
    assert set(orders) == {("orders-cdc", 0)}
    assert orders[("orders-cdc", 0)].records_per_request_avg == 9007.0
    assert orders[("orders-cdc", 0)].source_record_active_count_max == 9002.0
    # a connector whose name is a prefix of another's gets only its own series
    inventory = parse_worker_metrics(EXPOSITION, "inventory")[("inventory", 0)]
    assert inventory.records_per_request_avg == 9107.0
    assert inventory.source_record_active_count == 9101.0
    assert inventory.batch_size_avg is None


def test_parse_quoted_connector_name() -> None:
    # "/" is outside Kafka's MBean-safe characters, so the tag values arrive ObjectName.quote-d
    leads = parse_worker_metrics(EXPOSITION, "crm/leads")
    assert set(leads) == {("crm/leads", 0)}
    assert leads[("crm/leads", 0)].source_record_active_count_max == 8.0
    assert leads[("crm/leads", 0)].batch_size_avg == 700.0


def test_parse_extended_rules_and_older_exporters() -> None:
    # a user who adds -percentage to the rule gets the failure figure by the same naming scheme;
    # an exporter that drops duplicate names (no _objectname) leaves only the current count readable
    text = (
        "# TYPE kafka_connect_connector_task_offset_commit_failure_percentage gauge\n"
        'kafka_connect_connector_task_offset_commit_failure_percentage{connector="a",task="2"} 0.5\n'
        "# TYPE kafka_connect_source_task_source_record_active_count gauge\n"
        'kafka_connect_source_task_source_record_active_count{connector="a",task="2"} 77.0\n'
    )
    t = parse_worker_metrics(text.encode(), "a")[("a", 2)]
    assert t.offset_commit_failure_percentage == 0.5
    assert t.source_record_active_count == 77.0
    assert t.source_record_active_count_max is None


def test_parse_refuses_an_exposition_over_the_cap() -> None:
    with pytest.raises(ExpositionTooLarge, match="exceeds 1024 bytes"):
        parse_worker_metrics("#" * 1025, "a", max_bytes=1024)
    with pytest.raises(ExpositionTooLarge):
        parse_worker_metrics(b"#" * 1025, "a", max_bytes=1024)
    # 600 characters, 1200 bytes in UTF-8: the bound is on bytes
    with pytest.raises(ExpositionTooLarge):
        parse_worker_metrics("# " + "é" * 599, "a", max_bytes=1024)
    # the default bound
    with pytest.raises(ExpositionTooLarge):
        parse_worker_metrics("#" * (DEFAULT_MAX_EXPOSITION_BYTES + 1), "a")
    assert issubclass(ExpositionTooLarge, ValueError)


def test_read_exposition_stops_an_endless_body() -> None:
    endless: Iterator[bytes] = itertools.repeat(b"x" * 4096)
    with pytest.raises(ExpositionTooLarge):
        read_exposition(endless, max_bytes=64 * 1024)
    # what is left unread proves it stopped early, not after exhausting memory
    assert next(endless) == b"x" * 4096
    assert read_exposition([b"# a\n", b"# b\n"], max_bytes=8) == "# a\n# b\n"


def test_parse_rejects_text_that_is_not_an_exposition() -> None:
    with pytest.raises(ExpositionError):
        parse_worker_metrics('kafka_producer_batch_size_avg{clientid="x" 1.0\n', "a")


# --- diagnosis ------------------------------------------------------------------------------------


def scrape(**figures: float | None) -> TaskFigures:
    return TaskFigures("inventory-cdc", 0, **figures)


def seed_before(**changes: float | None) -> list[TaskFigures]:
    """The seed under load, three scrapes: full 16 KiB batches of ~25 records, 98 ms per request
    with one in flight (so ~256 records/s delivered), Debezium polling ~2,500/s, tens of thousands
    outstanding, a commit lasting past offset.flush.timeout.ms (Strimzi serves no failure percentage)."""
    base = {
        "batch_size_avg": 16290.0,
        "records_per_request_avg": 25.1,
        "record_size_avg": 712.0,
        "request_latency_avg_ms": 98.0,
        "source_record_poll_rate": 2520.0,
        "record_send_rate": 256.0,
        "offset_commit_max_time_ms": 5004.0,
        "buffer_available_bytes": 1_200_000.0,
        "buffer_total_bytes": 33554432.0,
    }
    active = [(40000.0, 52000.0), (55000.0, 60000.0), (58000.0, 60000.0)]
    return [
        scrape(**(base | {"source_record_active_count": now, "source_record_active_count_max": peak} | changes))
        for now, peak in active
    ]


def seed_after() -> list[TaskFigures]:
    """After batch.size=327680: ~500 records per request, 2,000-3,000 outstanding, commits <= 60 ms."""
    return [
        scrape(
            batch_size_avg=325000.0,
            records_per_request_avg=500.0,
            request_latency_avg_ms=100.0,
            source_record_poll_rate=2500.0,
            record_send_rate=2500.0,
            source_record_active_count=now,
            source_record_active_count_max=2500.0,
            offset_commit_failure_percentage=0.0,
            offset_commit_max_time_ms=60.0,
            buffer_available_bytes=31_000_000.0,
            buffer_total_bytes=33554432.0,
        )
        for now in (2100.0, 2400.0, 1900.0)
    ]


PRE_31 = WorkerSettings(worker_version="3.0.0")
NEW = WorkerSettings(worker_version="4.1.0")


def test_seed_pre_31_commits_fail() -> None:
    d = diagnose(seed_before(), PRE_31, ProducerSettings.from_connector_config({}, "3.0.0"))
    assert d is not None
    assert d.code == "ProducerPressure"
    assert d.form is CommitForm.COMMITS_FAIL
    assert (d.connector, d.task) == ("inventory-cdc", 0)
    assert "Failed to flush" in d.message
    assert "offset.flush.timeout.ms" in d.message
    assert d.figures.queue_peak == 60000.0
    # the drain budget is the delivered rate times the flush timeout: 256/s x 5 s
    assert d.figures.drain_budget == pytest.approx(256.0 * 5)
    assert d.recommendation is not None
    assert d.recommendation.batch_size > 16384
    assert f"{d.recommendation.batch_size:,}" in d.message


def test_pre_31_failure_percentage_is_read_when_served() -> None:
    samples = seed_before(offset_commit_max_time_ms=900.0, offset_commit_failure_percentage=0.5)
    d = diagnose(samples, PRE_31, ProducerSettings())
    assert d is not None
    assert any("50% of attempts" in e for e in d.evidence)


def test_pre_31_without_failures_is_not_diagnosed() -> None:
    # before 3.1 a commit covers everything or nothing: a big queue with commits succeeding is not this case
    samples = seed_before(offset_commit_max_time_ms=800.0)
    assert diagnose(samples, PRE_31, ProducerSettings()) is None


@pytest.mark.parametrize("version", ["3.0.1", "3.0.2", "3.1.0"])
def test_kafka_12226_backport_to_301_commits_trail(version: str) -> None:
    # connect-runtime 3.0.1 and 3.0.2 carry KAFKA-12226 (SubmittedRecords, no "Failed to flush"):
    # their commits trail, so a trailing queue without failed commits is the pressure there too
    d = diagnose(new_worker_trailing(), WorkerSettings(worker_version=version), ProducerSettings())
    assert d is not None
    assert d.form is CommitForm.COMMITS_TRAIL
    assert WorkerSettings(worker_version=version).commits_wait_for_all is False
    assert WorkerSettings(worker_version="3.0.0").commits_wait_for_all is True
    assert WorkerSettings(worker_version="2.8.2").commits_wait_for_all is True
    assert WorkerSettings().commits_wait_for_all is None


def new_worker_trailing() -> list[TaskFigures]:
    """Connect 4.1: ~1 KiB records, full 16 KiB batches (16 per request), 40 ms per request,
    the active count never below 18,000, commits quick and successful, buffer 6% free."""
    return [
        scrape(
            batch_size_avg=16100.0,
            records_per_request_avg=16.0,
            request_latency_avg_ms=40.0,
            source_record_poll_rate=420.0,
            record_send_rate=400.0,
            source_record_active_count=now,
            source_record_active_count_max=24000.0,
            offset_commit_max_time_ms=35.0,
            buffer_available_bytes=2_100_000.0,
            buffer_total_bytes=33554432.0,
        )
        for now in (18000.0, 21000.0, 19500.0)
    ]


def test_31_plus_commits_trail() -> None:
    d = diagnose(new_worker_trailing(), NEW, ProducerSettings.from_connector_config({}, "4.1.0"))
    assert d is not None
    assert d.form is CommitForm.COMMITS_TRAIL
    assert "KAFKA-12226" in d.message
    assert "trail" in d.message
    assert any("never fell below 18,000" in e for e in d.evidence)
    assert any("nearly exhausted" in e for e in d.evidence)


def test_31_plus_one_scrape_needs_the_offset_trail() -> None:
    one = new_worker_trailing()[:1]
    # one scrape cannot tell a persistent queue from a burst
    assert diagnose(one, NEW, ProducerSettings()) is None
    # the committed-offset trail can: records produced beyond the last committed offset
    d = diagnose(one, NEW, ProducerSettings(), trail=[17500.0])
    assert d is not None
    assert d.form is CommitForm.COMMITS_TRAIL
    # a trail within what the producer delivers in offset.flush.timeout.ms (400/s x 5 s) is normal
    assert diagnose(one, NEW, ProducerSettings(), trail=[1500.0]) is None


def test_unknown_version_lets_the_evidence_decide() -> None:
    unknown = WorkerSettings()
    failing = diagnose(seed_before(), unknown, ProducerSettings())
    trailing = diagnose(new_worker_trailing(), unknown, ProducerSettings())
    assert failing is not None
    assert failing.form is CommitForm.COMMITS_FAIL
    assert trailing is not None
    assert trailing.form is CommitForm.COMMITS_TRAIL


def test_healthy_figures_are_not_diagnosed() -> None:
    producer = ProducerSettings(batch_size=327680)
    # after the fix: batches still full, but the queue drains in well under the flush timeout
    assert diagnose(seed_after(), PRE_31, producer) is None
    assert diagnose(seed_after(), NEW, producer) is None
    # light load: small batches, a handful outstanding
    light = [
        scrape(
            batch_size_avg=1300.0,
            records_per_request_avg=2.0,
            request_latency_avg_ms=3.0,
            source_record_poll_rate=40.0,
            record_send_rate=40.0,
            source_record_active_count=n,
            source_record_active_count_max=9.0,
            offset_commit_max_time_ms=4.0,
            buffer_available_bytes=33554432.0,
            buffer_total_bytes=33554432.0,
        )
        for n in (3.0, 5.0, 2.0)
    ]
    assert diagnose(light, NEW, ProducerSettings()) is None


def test_pressure_without_small_batches_is_not_this_diagnosis() -> None:
    # huge queue but batches far from full and carrying more than the rate needs: not batch.size
    samples = [
        dataclasses.replace(s, batch_size_avg=4000.0, records_per_request_avg=400.0) for s in new_worker_trailing()
    ]
    assert diagnose(samples, NEW, ProducerSettings()) is None


def test_diagnose_one_task_at_a_time() -> None:
    other = TaskFigures("orders-cdc", 0, batch_size_avg=16000.0)
    with pytest.raises(ValueError, match="one task at a time"):
        diagnose([*seed_before(), other], PRE_31, ProducerSettings())
    with pytest.raises(ValueError, match="no samples"):
        diagnose([], PRE_31, ProducerSettings())


def test_missing_latency_still_diagnoses_without_a_size() -> None:
    samples = seed_before(request_latency_avg_ms=None)
    d = diagnose(samples, PRE_31, ProducerSettings())
    assert d is not None
    assert d.recommendation is None
    assert "request-latency-avg" in d.message


# --- the recommendation follows the data ----------------------------------------------------------

FULL = ProducerSettings()  # batch.size 16384, linger.ms 5, max.request.size 1 MiB, one in flight


def formula(rate: float, latency_ms: float, record_bytes: float, headroom: float = 2.0, in_flight: int = 1) -> float:
    """batch.size before rounding: rate x latency x headroom / in-flight x record size."""
    return rate * latency_ms / 1000 * headroom / in_flight * record_bytes


def test_recommendation_is_the_formula_rounded_up() -> None:
    r = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=True, headroom=2.0)
    assert r.unrounded_batch_bytes == pytest.approx(formula(1000, 50, 800))
    assert r.batch_size == round_up_16k(formula(1000, 50, 800))
    assert r.batch_size % KIB16 == 0
    # the arithmetic is shown
    assert any("1,000/s x 0.050 s x headroom 2 / 1" in line for line in r.reasoning)


@pytest.mark.parametrize(("rate", "latency_ms", "record_bytes"), [(1000, 50, 800), (2500, 98, 649), (333, 7.5, 1234)])
def test_doubling_rate_or_latency_doubles_the_size(rate: float, latency_ms: float, record_bytes: float) -> None:
    def size(r: float, lat: float) -> float:
        rec = recommend(rate=r, latency_ms=lat, record_bytes=record_bytes, producer=FULL, batches_full=True)
        return rec.unrounded_batch_bytes

    assert size(2 * rate, latency_ms) == pytest.approx(2 * size(rate, latency_ms))
    assert size(rate, 2 * latency_ms) == pytest.approx(2 * size(rate, latency_ms))


def test_larger_records_need_larger_batches() -> None:
    small = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=True)
    large = recommend(rate=1000, latency_ms=50, record_bytes=1600, producer=FULL, batches_full=True)
    assert large.batch_size > small.batch_size
    assert large.batch_size == round_up_16k(formula(1000, 50, 1600))


def test_more_requests_in_flight_need_smaller_batches() -> None:
    two = dataclasses.replace(FULL, max_in_flight=2)
    one = recommend(rate=4000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=True)
    r = recommend(rate=4000, latency_ms=50, record_bytes=800, producer=two, batches_full=True)
    assert r.unrounded_batch_bytes == pytest.approx(one.unrounded_batch_bytes / 2)


def test_never_recommends_a_smaller_batch() -> None:
    large = ProducerSettings(batch_size=1_000_000, max_request_size=4 * 1024 * 1024)
    r = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=large, batches_full=True)
    assert formula(1000, 50, 800) < 1_000_000
    assert r.batch_size == 1_000_000
    assert not r.changes
    assert any("not what limits" in line for line in r.reasoning)


def test_capped_below_max_request_size() -> None:
    need = formula(20_000, 100, 1000)
    assert need > FULL.max_request_size
    r = recommend(rate=20_000, latency_ms=100, record_bytes=1000, producer=FULL, batches_full=True)
    assert r.capped
    largest_step_below = (FULL.max_request_size - 1) // KIB16 * KIB16
    assert r.batch_size == largest_step_below
    assert r.batch_size < FULL.max_request_size
    text = " ".join(r.reasoning)
    assert "max.request.size" in text
    assert "partitions" in text


def test_linger_only_when_batches_leave_before_they_fill() -> None:
    full = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=True)
    assert full.linger_ms is None
    assert full.as_patch() == {"spec": {"producerOverrides": {"batchSize": full.batch_size}}}

    part = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=False)
    # enough to fill the recommended batch at the rate, at most 100 ms
    fill_ms = part.batch_size / 800 / 1000 * 1000
    assert part.linger_ms == min(100, math.ceil(fill_ms))
    slow = recommend(rate=50, latency_ms=900, record_bytes=800, producer=FULL, batches_full=False)
    assert slow.linger_ms == 100


def test_patch_is_admitted_by_the_connector_crd_model() -> None:
    r = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=False)
    overrides = ProducerOverrides.model_validate(r.as_patch()["spec"]["producerOverrides"])
    # the operator renders it as producer.override.*, the string values Connect receives
    assert overrides.as_properties() == r.as_properties()
    assert r.as_properties() == {"batch.size": str(r.batch_size), "linger.ms": str(r.linger_ms)}


def test_alternatives_are_listed_with_their_drawbacks() -> None:
    r = recommend(rate=1000, latency_ms=50, record_bytes=800, producer=FULL, batches_full=True)
    settings = " ".join(a.setting for a in r.alternatives)
    for name in ("max.batch.size", "max.queue.size", "buffer.memory", "offset.flush.timeout.ms"):
        assert name in settings
    assert all(a.drawback for a in r.alternatives)


def test_seed_reproduction() -> None:
    """The seed under load, from plausible seed inputs:

    * record size: batch-size-avg 16,290 B / records-per-request-avg 25.1 = 649 B (full batches of
      ~25 records at the default 16384; 16384/25 = 655 B),
    * rate: source-record-poll-rate 2,520 records/s (Debezium under load), headroom 2: 5,040/s,
    * outstanding queue peak 60,000 within offset.flush.timeout.ms 5 s: 12,000/s,
    * latency: request-latency-avg 98 ms with one request in flight,
    so a batch must hold max(5,040, 12,000) x 0.098 = 1,176 records = 763,229 B -> 770,048 after
    rounding: at least the 327,680 that cured the seed (the rate term alone gives that, 494 records).
    """
    record_bytes = 16290 / 25.1
    rate_term = formula(2520, 98, record_bytes)
    backlog_term = 60000 / 5.0 * 0.098 * record_bytes
    assert backlog_term > rate_term
    d = diagnose(seed_before(), PRE_31, ProducerSettings.from_connector_config({}, "3.0.0"))
    assert d is not None
    assert d.recommendation is not None
    assert d.recommendation.record_bytes == pytest.approx(record_bytes)
    assert d.recommendation.unrounded_batch_bytes == pytest.approx(backlog_term)
    assert d.recommendation.batch_size == round_up_16k(backlog_term) == 770048
    assert round_up_16k(rate_term) == 327680  # the seed's cure, which this never goes below
    assert d.recommendation.drain_needed == pytest.approx(12000)
    assert d.recommendation.backlog == 60000
    assert any("60,000 (the queue peak), i.e. 12,000/s" in line for line in d.recommendation.reasoning)
    # full batches: linger.ms would only add latency
    assert d.recommendation.linger_ms is None


def test_a_throttled_rate_is_sized_by_the_queue_it_left() -> None:
    """Measured on Connect 4.3 (tests/e2e/test_producer_pressure_cr.py, a FloodSource offering
    3,000 records/s through 40 ms per request): the check read 872.7/s polled, because send()
    blocked once the buffer ran out and Kafka's rate of a young task divides by at least 30 s.
    Sized for the rate alone (81,920) the producer carried ~1,900/s and the buffer ran out again;
    sized to deliver the 32,448 outstanding records within 5 s it carries ~6,700/s."""
    figures = {
        "batch_size_avg": 16205.0,
        "records_per_request_avg": 16.0,
        "request_latency_avg_ms": 43.15,
        "source_record_poll_rate": 872.7,
        "record_send_rate": 70.9,
        "buffer_available_bytes": 360448.0,
        "buffer_total_bytes": 33554432.0,
    }
    samples = [
        scrape(**(figures | {"source_record_active_count": now, "source_record_active_count_max": 32448.0}))
        for now in (32000.0, 32300.0, 32100.0)
    ]
    d = diagnose(samples, WorkerSettings(worker_version="4.3.0"), ProducerSettings.from_connector_config({}, "4.3.0"))
    assert d is not None
    assert d.recommendation is not None
    record_bytes = 16205 / 16
    assert round_up_16k(formula(872.7, 43.15, record_bytes)) == 81920  # what the rate alone gave
    expected = round_up_16k(32448 / 5.0 * 0.04315 * record_bytes)
    assert d.recommendation.batch_size == expected == 294912
    # what the new size carries: about 6,700 records/s against the 3,000 offered
    assert expected / record_bytes / 0.04315 > 2 * 3000


def test_rate_and_record_size_sources() -> None:
    s = summarize(seed_before(), PRE_31, ProducerSettings())
    assert s.rate == 2520.0  # the poll rate (demand), not the send rate (the ceiling)
    assert s.record_bytes == pytest.approx(16290 / 25.1)
    no_poll = summarize(seed_before(source_record_poll_rate=None), PRE_31, ProducerSettings())
    assert no_poll.rate == 256.0
    no_ratio = summarize(seed_before(records_per_request_avg=None), PRE_31, ProducerSettings())
    assert no_ratio.record_bytes == 712.0
    # no send rate: the delivered rate is modelled as records per request x in flight / latency
    no_send = summarize(seed_before(record_send_rate=None), PRE_31, ProducerSettings())
    assert no_send.drain_rate == pytest.approx(25.1 * 1 / 0.098)


def test_producer_settings_from_connector_config() -> None:
    config = {"producer.override.batch.size": "327680", "producer.override.max.request.size": 2097152, "x": "y"}
    p = ProducerSettings.from_connector_config(config, "3.9.0")
    assert (p.batch_size, p.max_request_size) == (327680, 2097152)
    # KIP-1030: linger.ms defaults to 5 from Kafka 4.0, 0 before
    assert p.linger_ms == 0
    assert ProducerSettings.from_connector_config({}, "4.0.0").linger_ms == 5
    # Connect's task producers run one request in flight unless overridden
    assert p.max_in_flight == 1
    with pytest.raises(ValueError, match=r"batch\.size"):
        ProducerSettings.from_connector_config({"producer.override.batch.size": "big"})


# --- before / after -------------------------------------------------------------------------------


def test_compare_seed_before_after_improved() -> None:
    before = seed_before(offset_commit_failure_percentage=0.5)
    effect = compare(before, seed_after())
    verdicts = {c.figure: c.verdict for c in effect.changes}
    assert verdicts == {
        "records per request": Verdict.IMPROVED,
        "outstanding queue peak": Verdict.IMPROVED,
        "lowest free producer buffer": Verdict.IMPROVED,
        "offset commit failures": Verdict.IMPROVED,
        "longest offset commit": Verdict.IMPROVED,
    }
    assert effect.verdict is Verdict.IMPROVED
    assert "60,000 records -> 2,500 records" in effect.message
    assert "25.1 -> 500" in effect.message


def test_compare_worse_and_unchanged() -> None:
    worse = [dataclasses.replace(s, source_record_active_count_max=90000.0) for s in seed_before()]
    effect = compare(seed_before(), worse)
    assert effect.verdict is Verdict.WORSE
    assert [c.figure for c in effect.changes if c.verdict is Verdict.WORSE] == ["outstanding queue peak"]

    # a few percent is the noise of windowed averages
    jitter = [dataclasses.replace(s, records_per_request_avg=25.1 * 1.03) for s in seed_before()]
    assert compare(seed_before(), jitter).verdict is Verdict.UNCHANGED


def test_compare_reports_what_it_could_not_compare() -> None:
    effect = compare(seed_before(), seed_after())
    # Strimzi serves no failure percentage: the seed's "before" has none
    assert "offset commit failures" in effect.not_compared
    with pytest.raises(ValueError, match="compare one task with itself"):
        compare(seed_before(), [TaskFigures("inventory-cdc", 1, records_per_request_avg=1.0)])


def test_a_slower_but_harmless_commit_does_not_make_a_cure_worse() -> None:
    # measured in the pressure environment: the override took requests from 16 to 130 records and
    # the queue from 33,000 to 1,260, while the longest commit went 59 -> 89 ms (timeout 5,000 ms)
    from connectops_check.pressure import Verdict as EffectVerdict
    from connectops_check.pressure import compare as compare_effect
    from connectops_check.worker_metrics import TaskFigures as Figures

    before = [Figures("c", 0, records_per_request_avg=16.0, source_record_active_count_max=33000.0,
                      offset_commit_max_time_ms=59.0)]  # fmt: skip
    after = [Figures("c", 0, records_per_request_avg=130.0, source_record_active_count_max=1260.0,
                     offset_commit_max_time_ms=89.0)]  # fmt: skip
    effect = compare_effect(before, after)
    assert effect.verdict is EffectVerdict.IMPROVED
    commit = next(c for c in effect.changes if c.figure == "longest offset commit")
    assert commit.verdict is EffectVerdict.WORSE  # still reported
