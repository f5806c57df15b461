"""One source task's producer-pressure figures, read from a Kafka Connect worker's Prometheus text.

The names are the ones Strimzi's example JMX-exporter rules produce, derived from
``packaging/examples/metrics/kafka-connect-metrics.yaml`` in strimzi/strimzi-kafka-operator at
commit 8541da1e336bdcda9647aeacfbc2048e57580a52 (file last changed in 17a687258f01, "Add support
for Kafka 4.3.1"), as run by the jmx_exporter Strimzi ships (``JMX_EXPORTER_VERSION=1.6.0`` in
``docker-images/kafka-based/kafka/Dockerfile``). ``lowercaseOutputName`` and
``lowercaseOutputLabelNames`` are on, so ``clientId`` is served as ``clientid``.

Three facts of jmx_exporter 1.6.0 (prometheus/jmx_exporter, tag 1.6.0) shape the names, and a
reader that ignores them gets wrong numbers rather than errors:

* Patterns are not anchored: ``JmxCollector`` compiles ``"^.*(?:" + pattern + ").*$"`` and
  matches it against ``domain<key=value, ...><>attribute: value``. The Connect task rule's
  first alternative ``.+-count`` therefore also matches ``source-record-active-count-max`` and
  ``-avg`` (``.*`` swallows the suffix): all three become
  ``kafka_connect_source_task_source_record_active_count{connector,task}``. Likewise the
  counter rule ``(.+-total)``, tried first, turns ``buffer-total-bytes`` into
  ``kafka_producer_buffer_total{clientid}`` (a COUNTER).
* When one name carries equal label sets, ``MatchedRuleToMetricSnapshotsConverter`` adds an
  ``_objectname`` label to every sample of that name: the match string up to its last colon,
  i.e. ``kafka.connect<type=source-task-metrics, connector=c, task=0><>source-record-active-count-max``.
  That label is the only way to tell the three active-count figures apart; a sample without it
  (an older exporter that drops duplicates) is read as the current count only.
* Attributes no rule matches are not served. ``offset-commit-failure-percentage`` (the
  connector-task rule knows ``-count|-ms|-ratio|...`` but no ``-percentage``) and the
  producer-wide ``record-send-rate`` (the client-id rule has no ``-rate``) are absent from a
  Strimzi worker. The per-topic ``record-send-rate`` is served, so the task producer's rate is
  their sum over topics. For the failure percentage the name the same scheme would give, were a
  user to add ``-percentage`` to the rule, is read when present; ``pressure`` falls back to
  ``offset-commit-max-time-ms``.

The test environment runs ``jmx_prometheus_javaagent`` 1.0.1 (Maven Central's newest; 1.6.0 is
published only as a release download) with these rules, and on a Kafka 4.3.1 worker it serves
the same ``kafka_*`` series as 1.6.0 would: names, label sets, types and help texts. From the
exporter's source between the two tags, the collector's matching (the unanchored pattern, the
first matching rule winning, ``valueFactor``) and ``MatchedRuleToMetricSnapshotsConverter``'s
``_objectname`` are unchanged; what only 1.6.0 has is configuration Strimzi's rules do not use
(``inferCounterTypeFromName``, ``excludeJvmMetrics``, ``attributesAsLabels``,
``includeObjectNameAttributes``, ``metricCustomizers``/``extraMetrics``, ``startDelaySeconds`` in
the agent, an OpenTelemetry push), a per-bean/attribute rule cache, and client_java 1.7.0 under it
instead of 1.3.1: UTF-8 metric names with an ``escaping=`` term in ``Accept`` (the rules'
names are already ``[a-zA-Z0-9:_]``, so no difference) and families of one name merged before
writing (the converter already groups by name). 1.0.1 throws on a match string without a colon
where 1.6.0 keeps it whole as ``_objectname``; a Kafka attribute's always has ``: value``.
So the shape read here does not depend on which of the two serves it; what this module knows
only from 1.6.0's source stays pinned by the unit tests' 1.6.0-shaped text.

Which series belong to which task (apache/kafka): Connect's task metrics carry
``connector=<name>`` and ``task=<id>`` (``ConnectMetricsRegistry``: groups
``source-task-metrics`` and ``connector-task-metrics``); a source task's producer has client id
``"connector-producer-" + id`` where ``ConnectorTaskId`` prints ``<connector>-<task>``
(``Worker.java``). Kafka's ``JmxReporter`` passes tag values through ``Sanitizer.jmxSanitize``,
which ``ObjectName.quote``-s any value with a character outside ``[\\w-%. \\t]``; such a
connector's labels arrive quoted, and both spellings are accepted here. A
``producer.override.client.id`` breaks the link: that task then has no producer figures.

A worker serves the metrics of all its connectors; only the requested connector's series are
read, per task, never added across connectors or tasks.

The exposition comes from a URL a user configures: ``read_exposition`` stops reading past
``max_bytes`` and ``parse_worker_metrics`` refuses a larger text, both with
``ExpositionTooLarge``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

#: Several hundred connectors' worth of series fit in a few MiB; a larger answer is not a
#: Connect worker's metrics endpoint, and parsing it would hold it all in memory.
DEFAULT_MAX_EXPOSITION_BYTES: Final = 8 * 1024 * 1024

PRODUCER_CLIENT_ID_PREFIX: Final = "connector-producer-"
#: Kafka's Sanitizer.MBEAN_PATTERN; Java's \\w is ASCII-only without UNICODE_CHARACTER_CLASS
_MBEAN_SAFE: Final = re.compile(r"[\w\-%. \t]*", re.ASCII)
_OBJECTNAME_LABEL: Final = "_objectname"


class ExpositionError(ValueError):
    """The worker's answer cannot be read as Prometheus text."""


class ExpositionTooLarge(ExpositionError):
    """The worker's answer is larger than the configured bound."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(
            f"metrics exposition exceeds {max_bytes} bytes (read {size} so far): refusing to parse it; "
            "check that the metrics URL points at a Kafka Connect worker's Prometheus endpoint"
        )
        self.size = size
        self.max_bytes = max_bytes


class Scope(Enum):
    """How a series is tied to one task."""

    #: labels ``connector`` and ``task`` (Connect's task metrics)
    TASK = "task"
    #: label ``clientid`` = ``connector-producer-<connector>-<task>`` (the task's producer)
    PRODUCER = "producer"


@dataclass(frozen=True, slots=True)
class MetricSource:
    """One served series a figure can be read from.

    ``attribute`` is the Kafka metric the series carries; ``spelled`` the attribute its name
    spells, when Strimzi's rules collapse several attributes into one name (then
    ``_objectname`` must name ``attribute``). ``summed_over``: a label whose series are added
    (per-topic rates of one producer). ``strimzi`` False: not produced by the example rules,
    only by a user's extended rules, read when present.
    """

    sample: str
    scope: Scope
    attribute: str
    spelled: str | None = None
    summed_over: str | None = None
    strimzi: bool = True

    def takes(self, objectname: str | None) -> bool:
        """Whether a sample with this ``_objectname`` (or none) carries ``attribute``."""
        if objectname is None:
            return (self.spelled or self.attribute) == self.attribute
        return objectname.rpartition("><>")[2] == self.attribute


def _task(sample: str, attribute: str, spelled: str | None = None, *, strimzi: bool = True) -> MetricSource:
    return MetricSource(sample, Scope.TASK, attribute, spelled, strimzi=strimzi)


def _producer(sample: str, attribute: str, *, summed_over: str | None = None, strimzi: bool = True) -> MetricSource:
    return MetricSource(sample, Scope.PRODUCER, attribute, summed_over=summed_over, strimzi=strimzi)


_ACTIVE: Final = "kafka_connect_source_task_source_record_active_count"

#: Logical figure -> the series it is read from, first served one wins. The one place that
#: knows served names: everything else uses ``TaskFigures`` fields.
FIGURE_SOURCES: Final[Mapping[str, tuple[MetricSource, ...]]] = {
    # source-task-metrics: records polled and not yet acknowledged by the producer
    "source_record_active_count": (_task(_ACTIVE, "source-record-active-count"),),
    "source_record_active_count_max": (
        _task(_ACTIVE, "source-record-active-count-max", "source-record-active-count"),
        _task(f"{_ACTIVE}_max", "source-record-active-count-max", strimzi=False),
    ),
    "source_record_active_count_avg": (
        _task(_ACTIVE, "source-record-active-count-avg", "source-record-active-count"),
        _task(f"{_ACTIVE}_avg", "source-record-active-count-avg", strimzi=False),
    ),
    "source_record_poll_rate": (_task("kafka_connect_source_task_source_record_poll_rate", "source-record-poll-rate"),),
    # connector-task-metrics
    "offset_commit_failure_percentage": (
        _task(
            "kafka_connect_connector_task_offset_commit_failure_percentage",
            "offset-commit-failure-percentage",
            strimzi=False,
        ),
    ),
    "offset_commit_max_time_ms": (
        _task("kafka_connect_connector_task_offset_commit_max_time_ms", "offset-commit-max-time-ms"),
    ),
    "offset_commit_avg_time_ms": (
        _task("kafka_connect_connector_task_offset_commit_avg_time_ms", "offset-commit-avg-time-ms"),
    ),
    # producer-metrics / producer-topic-metrics of client connector-producer-<connector>-<task>
    "record_send_rate": (
        _producer("kafka_producer_record_send_rate", "record-send-rate", strimzi=False),
        _producer("kafka_producer_topic_record_send_rate", "record-send-rate", summed_over="topic"),
    ),
    "records_per_request_avg": (_producer("kafka_producer_records_per_request_avg", "records-per-request-avg"),),
    "batch_size_avg": (_producer("kafka_producer_batch_size_avg", "batch-size-avg"),),
    "record_size_avg": (_producer("kafka_producer_record_size_avg", "record-size-avg"),),
    "buffer_available_bytes": (_producer("kafka_producer_buffer_available_bytes", "buffer-available-bytes"),),
    "buffer_total_bytes": (
        _producer("kafka_producer_buffer_total", "buffer-total-bytes"),
        _producer("kafka_producer_buffer_total_bytes", "buffer-total-bytes", strimzi=False),
    ),
    "request_latency_avg_ms": (_producer("kafka_producer_request_latency_avg", "request-latency-avg"),),
    "record_queue_time_avg_ms": (_producer("kafka_producer_record_queue_time_avg", "record-queue-time-avg"),),
}


#: Figures of the task producer's ``producer-metrics`` MBean itself (not per topic). Kafka
#: registers that MBean when the producer is built and ``buffer-total-bytes`` has a value from
#: then on, so a task whose series are served while none of these is has no producer MBean in
#: the worker's JMX: see ``producer_served``.
PRODUCER_BEAN_FIGURES: Final = tuple(
    name
    for name, sources in FIGURE_SOURCES.items()
    if all(source.scope is Scope.PRODUCER and source.summed_over is None for source in sources)
)


@dataclass(frozen=True, slots=True)
class TaskFigures:
    """One scrape of one source task and its producer; None: not served.

    Units are Kafka's: counts, records/s, bytes, milliseconds. ``offset_commit_failure_percentage``
    is a ratio in [0, 1] despite its name (Connect records it with ``Frequencies``).
    ``record_size_avg`` is Kafka's mean of each batch's *largest* record (``Sender`` records
    ``batch.maxRecordSize``), so it errs high.
    """

    connector: str
    task: int
    source_record_active_count: float | None = None
    source_record_active_count_max: float | None = None
    source_record_active_count_avg: float | None = None
    source_record_poll_rate: float | None = None
    offset_commit_failure_percentage: float | None = None
    offset_commit_max_time_ms: float | None = None
    offset_commit_avg_time_ms: float | None = None
    record_send_rate: float | None = None
    records_per_request_avg: float | None = None
    batch_size_avg: float | None = None
    record_size_avg: float | None = None
    buffer_available_bytes: float | None = None
    buffer_total_bytes: float | None = None
    request_latency_avg_ms: float | None = None
    record_queue_time_avg_ms: float | None = None


def jmx_sanitize(value: str) -> str:
    """Kafka's ``Sanitizer.jmxSanitize``: the value as it appears in an MBean name."""
    if _MBEAN_SAFE.fullmatch(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("*", "\\*").replace("?", "\\?")
    return '"' + escaped.replace("\n", "\\n") + '"'


def read_exposition(chunks: Iterable[bytes], max_bytes: int = DEFAULT_MAX_EXPOSITION_BYTES) -> str:
    """Join a response body's chunks, refusing as soon as they pass ``max_bytes``.

    Meant for a streamed body (``httpx.Response.iter_bytes()``): an endless or huge answer is
    cut off after at most one chunk beyond the bound instead of being buffered whole.
    """
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise ExpositionTooLarge(size, max_bytes)
        parts.append(chunk)
    return b"".join(parts).decode("utf-8", errors="replace")


def _bounded_text(exposition: str | bytes, max_bytes: int) -> str:
    if isinstance(exposition, bytes):
        if len(exposition) > max_bytes:
            raise ExpositionTooLarge(len(exposition), max_bytes)
        return exposition.decode("utf-8", errors="replace")
    # every character is at least one byte: a text this long is over the bound, no need to encode it
    if len(exposition) > max_bytes:
        raise ExpositionTooLarge(len(exposition), max_bytes)
    size = len(exposition.encode("utf-8"))
    if size > max_bytes:
        raise ExpositionTooLarge(size, max_bytes)
    return exposition


def _task_id(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _key(
    source: MetricSource, labels: Mapping[str, str], names: frozenset[str], prefixes: tuple[str, ...]
) -> int | None:
    """The task a sample belongs to, or None when it is another connector's (or no task's)."""
    if source.scope is Scope.TASK:
        if labels.get("connector") not in names:
            return None
        return _task_id(labels.get("task", ""))
    client = labels.get("clientid", "")
    for prefix in prefixes:
        if client.startswith(prefix):
            # quoted client ids close with the quote: "connector-producer-a/b-0"
            rest = client[len(prefix) :]
            return _task_id(rest[:-1] if prefix.startswith('"') and rest.endswith('"') else rest)
    return None


def parse_worker_metrics(
    exposition: str | bytes,
    connector: str,
    *,
    max_bytes: int = DEFAULT_MAX_EXPOSITION_BYTES,
) -> dict[tuple[str, int], TaskFigures]:
    """The figures of ``connector``'s tasks in one scrape, keyed by ``(connector, task)``.

    Series of other connectors are skipped. A figure whose series is not served is None, and so
    is a NaN (Kafka's averages over an empty window). Raises ``ExpositionTooLarge`` past
    ``max_bytes`` and ``ExpositionError`` on text that is not Prometheus exposition.
    """
    text = _bounded_text(exposition, max_bytes)
    names = frozenset({connector, jmx_sanitize(connector)})
    prefixes = _client_id_prefixes(connector)

    by_sample: dict[str, list[tuple[str, int, MetricSource]]] = {}
    for field, sources in FIGURE_SOURCES.items():
        for rank, source in enumerate(sources):
            by_sample.setdefault(source.sample, []).append((field, rank, source))

    # (task, field, rank) -> value; summed sources add up
    found: dict[tuple[int, str, int], float] = {}
    tasks: set[int] = set()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                candidates = by_sample.get(sample.name)
                if not candidates:
                    continue
                objectname = sample.labels.get(_OBJECTNAME_LABEL)
                for field, rank, source in candidates:
                    task = _key(source, sample.labels, names, prefixes)
                    if task is None or not source.takes(objectname):
                        continue
                    tasks.add(task)
                    value = float(sample.value)
                    if math.isnan(value):
                        continue
                    slot = (task, field, rank)
                    found[slot] = found.get(slot, 0.0) + value if source.summed_over else value
    except ValueError as exc:
        raise ExpositionError(f"metrics exposition is not Prometheus text: {exc}") from exc

    return {(connector, task): _figures(connector, task, found) for task in sorted(tasks)}


def _client_id_prefixes(connector: str) -> tuple[str, ...]:
    """How a task's producer client id starts, plain and as the JMX exporter quotes it."""
    quoted = jmx_sanitize(PRODUCER_CLIENT_ID_PREFIX + connector + "-0")
    prefixes: tuple[str, ...] = (PRODUCER_CLIENT_ID_PREFIX + connector + "-",)
    if quoted.startswith('"'):
        # the whole client id is quoted, so its prefix is the quoted form minus the task and quote
        prefixes += (quoted[: -len('-0"')] + "-",)
    return prefixes


def _figures(connector: str, task: int, found: dict[tuple[int, str, int], float]) -> TaskFigures:
    """One task's figures: for each, the first of its sources (by rank) that was served."""
    # Any: the keys are TaskFigures' float fields (FIGURE_SOURCES' keys), not its connector/task
    values: dict[str, Any] = {}
    for field, sources in FIGURE_SOURCES.items():
        for rank in range(len(sources)):
            if (task, field, rank) in found:
                values[field] = found[(task, field, rank)]
                break
    return dataclasses.replace(TaskFigures(connector, task), **values)


def producer_served(samples: Iterable[TaskFigures]) -> bool:
    """Whether any scrape served a figure of the task producer's ``producer-metrics`` MBean.

    False for a task whose own series are served while its producer's are not: Kafka's
    ``JmxReporter`` registers and unregisters MBeans by name, and a task's producer keeps its
    client id across task restarts (``connector-producer-<connector>-<task>``). When the old
    task's producer is closed after the new one registered (Connect's ``cancel()`` of a task
    whose graceful stop timed out closes it from another thread, and the task thread closes it
    again when it exits), the old reporter's ``close()`` unregisters the new producer's MBeans;
    nothing registers them again until that producer is closed and a new one is built (a
    restart of the task). A ``producer.override.client.id`` also leaves a task without them.
    """
    return any(getattr(s, name) is not None for s in samples for name in PRODUCER_BEAN_FIGURES)
