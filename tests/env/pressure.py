"""Producer pressure on a Connect source task, reproduced on loopback, with the worker's metrics
served the way a Strimzi user's Prometheus scrapes them.

The product's founding case: a source task whose producer, at the default ``batch.size``
(16384), took a few dozen records per request to a one-partition topic with one request in
flight (Connect's setting for source tasks), so unacknowledged records piled up in the producer
(tens of thousands) and the committed source offsets trailed what had been produced;
``producer.override.batch.size=327680`` made requests carry hundreds of records and the pile-up
went away. Since Connect 3.1 (KAFKA-12226) offsets are committed for acknowledged records only,
so the pressure shows as a large ``source-record-active-count``, little producer buffer left, few
records per request, and committed offsets behind the records polled.

Loopback hides all of this (a request is acknowledged within a millisecond), so ``PressureEnv``
puts a ``LatencyProxy`` between every client and the broker:

* its own Apache Kafka broker, whose advertised listener is the proxy's port, so every client (the
  worker's own producers and consumers and the task producers) goes through the proxy after
  bootstrap;
* the proxy, adding ``latency_ms`` to every request frame;
* one Connect worker run as Strimzi runs it: the Prometheus JMX exporter's java agent in its JVM
  with Strimzi's Connect rules (``ConnectWorker(metrics_port=...)``, tests/env/jmx), serving at
  ``metrics_url``, and ``floodsource.jar`` (a rate-limited source whose offsets count records);
* after a change that restarts a task under pressure, ``served_after_restart`` tells whether the
  exporter serves the new task's producer and, when it does not, applies the operator's remedy:
  the graceful stop timed out, Connect cancelled the task, and the old producer's last close
  (by the old task's thread, after the new producer registered) unregistered the new producer's
  MBeans, which share its client id and so its names (Kafka's ``JmxReporter.close`` unregisters
  by name). One more restart, which the relieved task survives gracefully, has it served;
* ``promreporter.jar`` as a metric reporter (``metric.reporters`` and
  ``producer.metric.reporters``), read for one figure only, at ``raw_metrics_url``: Strimzi's
  rules serve no ``offset-commit-failure-percentage`` (the task rule knows no ``-percentage``),
  and the founding case's pre-3.1 form is judged by it. Its ``/metrics`` (an imitation of the
  exporter) is read by nothing here;
* the producer settings of Kafka itself (``batch.size`` 16384, ``linger.ms`` 5).

Committed source offsets are read by consuming the worker's offsets topic (``OffsetsTail``);
record counts, where needed, by consuming.

One module of ~600 lines: the environment, the figures it reads and the phases it measures are
used together by the e2e tests and the benchmark, and none of them means anything alone.

    with PressureEnv(root, latency_ms=40) as env:
        env.create_topic("flood")
        env.create_flood("flood", topic="flood", rate=3000)
        figures = env.figures("flood")
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote

import httpx

from tests.env.latencyproxy import PRODUCE, LatencyProxy
from tests.env.plugins import plugin_jar
from tests.env.servers import KAFKA_VERSION, ConnectWorker, KafkaBroker, free_port, wait_until

FLOOD_SOURCE: Final = "io.connectops.testplugins.FloodSourceConnector"
PROM_REPORTER: Final = "io.connectops.testplugins.PromReporter"
BYTE_ARRAY_CONVERTER: Final = "org.apache.kafka.connect.converters.ByteArrayConverter"
#: Kafka 4.3's producer defaults (ProducerConfig): what a connector gets without overrides.
KAFKA_DEFAULT_BATCH_SIZE: Final = 16384
KAFKA_DEFAULT_LINGER_MS: Final = 5
#: The founding case's fix.
SEED_BATCH_SIZE: Final = 327680


@dataclass
class Figures:
    """One scrape's figures for one source task and its producer (None: not served (yet)).

    Names in comments are the series read, as Strimzi's rules name them. ``active_count_max``
    and ``_avg`` are the ``source-record-active-count`` series told apart by their
    ``_objectname`` label: the rules give all three attributes one name (see
    spark/connectops_check/worker_metrics.py).
    """

    # kafka_connect_source_task_source_record_active_count{_objectname=...-count|-max|-avg}
    active_count: float | None = None
    active_count_max: float | None = None
    active_count_avg: float | None = None
    poll_rate: float | None = None  # kafka_connect_source_task_source_record_poll_rate
    poll_total: float | None = None  # kafka_connect_source_task_source_record_poll_total
    write_total: float | None = None  # kafka_connect_source_task_source_record_write_total
    write_rate: float | None = None  # kafka_connect_source_task_source_record_write_rate
    commit_max_ms: float | None = None  # kafka_connect_connector_task_offset_commit_max_time_ms
    commit_avg_ms: float | None = None  # kafka_connect_connector_task_offset_commit_avg_time_ms
    records_per_request_avg: float | None = None  # kafka_producer_records_per_request_avg
    batch_size_avg: float | None = None  # kafka_producer_batch_size_avg
    record_size_avg: float | None = None  # kafka_producer_record_size_avg
    buffer_available_bytes: float | None = None  # kafka_producer_buffer_available_bytes
    buffer_total_bytes: float | None = None  # kafka_producer_buffer_total (buffer-total-bytes, a "counter")
    request_latency_avg: float | None = None  # kafka_producer_request_latency_avg
    record_queue_time_avg: float | None = None  # kafka_producer_record_queue_time_avg
    record_send_total: float | None = None  # kafka_producer_record_send_total
    topic_record_send_rate: float | None = None  # kafka_producer_topic_record_send_rate{topic=...}
    # Not exported by Strimzi's rules (no rule matches "-percentage"): read from PromReporter's /raw.
    commit_failure_percentage: float | None = None
    at: float = field(default_factory=time.monotonic)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: (series name, extra label filter) -> Figures field, for the task's series.
_TASK_SERIES: Final[dict[tuple[str, str | None], str]] = {
    ("kafka_connect_source_task_source_record_active_count", "source-record-active-count"): "active_count",
    ("kafka_connect_source_task_source_record_active_count", "source-record-active-count-max"): "active_count_max",
    ("kafka_connect_source_task_source_record_active_count", "source-record-active-count-avg"): "active_count_avg",
    ("kafka_connect_source_task_source_record_poll_rate", None): "poll_rate",
    ("kafka_connect_source_task_source_record_poll_total", None): "poll_total",
    ("kafka_connect_source_task_source_record_write_total", None): "write_total",
    ("kafka_connect_source_task_source_record_write_rate", None): "write_rate",
    ("kafka_connect_connector_task_offset_commit_max_time_ms", None): "commit_max_ms",
    ("kafka_connect_connector_task_offset_commit_avg_time_ms", None): "commit_avg_ms",
}
_PRODUCER_SERIES: Final[dict[str, str]] = {
    "kafka_producer_records_per_request_avg": "records_per_request_avg",
    "kafka_producer_batch_size_avg": "batch_size_avg",
    "kafka_producer_record_size_avg": "record_size_avg",
    "kafka_producer_buffer_available_bytes": "buffer_available_bytes",
    "kafka_producer_buffer_total": "buffer_total_bytes",
    "kafka_producer_request_latency_avg": "request_latency_avg",
    "kafka_producer_record_queue_time_avg": "record_queue_time_avg",
    "kafka_producer_record_send_total": "record_send_total",
}


def parse_figures(text: str, connector: str, task: int = 0, raw: str = "") -> Figures:
    """Pick one task's figures out of an exposition (and the reporter's ``/raw`` text)."""
    from prometheus_client.parser import text_string_to_metric_families

    figures = Figures()
    client_id = f"connector-producer-{connector}-{task}"
    suffix = f"connector={connector}, task={task}><>"
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("connector") == connector and labels.get("task") == str(task):
                objectname = labels.get("_objectname")
                attribute = objectname.split("><>", 1)[1] if objectname and "><>" in objectname else None
                if objectname is not None and suffix not in objectname:
                    continue
                name = _TASK_SERIES.get((sample.name, attribute))
                if name is not None:
                    setattr(figures, name, sample.value)
            elif labels.get("clientid") == client_id:
                if sample.name == "kafka_producer_topic_record_send_rate":
                    figures.topic_record_send_rate = sample.value
                elif sample.name in _PRODUCER_SERIES:
                    setattr(figures, _PRODUCER_SERIES[sample.name], sample.value)
    bean = f"kafka.connect:type=connector-task-metrics,connector={connector},task={task}"
    for line in raw.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == bean and parts[1] == "offset-commit-failure-percentage":
            with contextlib.suppress(ValueError):
                figures.commit_failure_percentage = float(parts[2])
    return figures


class OffsetsTail:
    """Follows a Connect offsets topic from its start and keeps each flood connector's latest
    committed ``seq`` (by consuming every record, never from end offsets)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self._latest: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.records = 0

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=f"offsets-tail-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def committed(self, connector: str) -> int | None:
        with self._lock:
            return self._latest.get(connector)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"offsets-tail-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 100,
            }
        )
        try:
            while not self._stop.is_set():
                meta = consumer.list_topics(self.topic, timeout=5)
                topic = meta.topics.get(self.topic)
                if topic is not None and topic.error is None and topic.partitions:
                    consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in topic.partitions])
                    break
                self._stop.wait(0.5)
            while not self._stop.is_set():
                for message in consumer.consume(num_messages=500, timeout=0.2):
                    if message.error() is not None:
                        continue
                    self.records += 1
                    self._take(message.key(), message.value())
        finally:
            consumer.close()

    def _take(self, key: bytes | None, value: bytes | None) -> None:
        try:
            name, partition = json.loads(key or b"null")
        except (TypeError, ValueError):
            return
        if not isinstance(partition, dict) or "flood" not in partition:
            return
        seq = None
        if value is not None:
            with contextlib.suppress(TypeError, ValueError, AttributeError):
                seq = int(json.loads(value)["seq"])
        with self._lock:
            if seq is None:
                self._latest.pop(str(name), None)
            else:
                self._latest[str(name)] = seq


@dataclass(frozen=True)
class AfterRestart:
    """What followed a change that restarted a task (``PressureEnv.served_after_restart``)."""

    #: task starts before the phase to measure (pass as ``measure(starts_before=...)``)
    starts: int
    #: graceful stops of the task the worker gave up on (cancelled) before the remedy
    cancelled: int
    #: whether the exporter served the new producer once every older producer was closed
    served: bool
    #: whether the task was restarted once more (the operator's remedy) to have it served
    restarted: bool

    def describe(self) -> str:
        if self.served:
            return f"the new producer is served ({self.cancelled} cancelled stop(s))"
        return (
            f"the new producer is not served after a cancelled stop ({self.cancelled}): its MBeans unregistered by "
            "the old producer's close while Kafka had its metrics; served again after one restart of the task"
        )


@dataclass
class Phase:
    """What one measuring phase saw of one connector: a sample per interval of (figures,
    committed seq), where the task's ``poll_total`` counts from (``start_seq``), and how many
    Produce requests crossed the proxy meanwhile (from every client of the worker)."""

    label: str
    start_seq: int = 0
    samples: list[tuple[Figures, int | None]] = field(default_factory=list)
    produce_requests: int = 0

    @property
    def last(self) -> Figures:
        return self.samples[-1][0]

    def seconds(self) -> float:
        return self.samples[-1][0].at - self.samples[0][0].at

    def queue_peak(self) -> float:
        """The largest ``source-record-active-count`` (or its windowed max) seen."""
        return max(max(f.active_count_max or 0, f.active_count or 0) for f, _ in self.samples)

    def queue_median(self) -> float:
        """The median of the sampled ``source-record-active-count``: the queue the phase held, not
        a moment of it. A task's start (a cold producer fetching metadata through the proxy) or a
        stall of the worker's JVM on a loaded machine piles records up for a moment whatever the
        batch size; the windowed max keeps that moment for the whole phase, the median does not."""
        return float(statistics.median(f.active_count or 0 for f, _ in self.samples))

    def acked(self) -> float:
        """Records acknowledged during the phase (``source-record-write-total``)."""
        return (self.last.write_total or 0) - (self.samples[0][0].write_total or 0)

    def acked_per_second(self) -> float:
        return self.acked() / max(self.seconds(), 1e-9)

    def commit_lag(self) -> int:
        """Records polled but not yet committed, at the last sample."""
        figures, committed = self.samples[-1]
        return int(self.start_seq + (figures.poll_total or 0) - (committed or 0))

    def wire_records_per_request(self) -> float | None:
        """Acknowledged records per Produce request that crossed the proxy (an upper-bound
        cross-check of ``records-per-request-avg``: the worker's own offset and status writes are
        Produce requests too)."""
        return self.acked() / self.produce_requests if self.produce_requests else None

    def summary(self) -> str:
        f = self.last
        return (
            f"{self.label}: records/request {f.records_per_request_avg}, batch {f.batch_size_avg} B, "
            f"queue peak {self.queue_peak():.0f}, median {self.queue_median():.0f}, "
            f"acked {self.acked_per_second():.0f}/s, "
            f"commit lag {self.commit_lag()}, buffer available {f.buffer_available_bytes}/{f.buffer_total_bytes}, "
            f"request latency {f.request_latency_avg} ms, queue time {f.record_queue_time_avg} ms, "
            f"commit max {f.commit_max_ms} ms, commit failures {f.commit_failure_percentage} %"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "seconds": round(self.seconds(), 2),
            "start_seq": self.start_seq,
            "queue_peak": self.queue_peak(),
            "queue_median": self.queue_median(),
            "acked_per_second": round(self.acked_per_second(), 1),
            "commit_lag": self.commit_lag(),
            "produce_requests": self.produce_requests,
            "wire_records_per_request": self.wire_records_per_request(),
            "last": self.last.as_dict(),
            "samples": [{**f.as_dict(), "committed": c} for f, c in self.samples],
        }


class PressureEnv:
    """An Apache Kafka broker behind a ``LatencyProxy``, and a Connect worker whose metrics a Prometheus endpoint
    serves under Strimzi's names (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        latency_ms: float = 40.0,
        worker_properties: Mapping[str, str] | None = None,
        heap: str = "768m",
        name: str = "pressure",
        jar_dir: Path | None = None,
        version: str = KAFKA_VERSION,
    ) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.latency_ms = latency_ms
        self.proxy_port = free_port()
        self.kafka = KafkaBroker(root, name=f"{name}-kafka", advertised_port=self.proxy_port)
        self.proxy = LatencyProxy(("127.0.0.1", self.kafka.port), delay=latency_ms / 1000, port=self.proxy_port)
        self.metrics_port = free_port()
        self.raw_port = free_port()
        reporters = f"org.apache.kafka.common.metrics.JmxReporter,{PROM_REPORTER}"
        properties = {
            "metric.reporters": reporters,
            "producer.metric.reporters": reporters,
            "connectops.prom.port": str(self.raw_port),
            "producer.batch.size": str(KAFKA_DEFAULT_BATCH_SIZE),
            "producer.linger.ms": str(KAFKA_DEFAULT_LINGER_MS),
            **(worker_properties or {}),
        }
        self.connect = ConnectWorker(
            root,
            self.proxy.address,
            name=f"{name}-connect",
            extra_properties=properties,
            extra_classpath=[plugin_jar("promreporter"), plugin_jar("floodsource")],
            heap=heap,
            metrics_port=self.metrics_port,
            # another Connect release (tests/env/connect_versions), e.g. one before KAFKA-12226
            jar_dir=jar_dir,
            version=version,
        )
        self.http = httpx.Client(timeout=15)
        self.tail: OffsetsTail | None = None
        self.startup_seconds: float | None = None

    # -- endpoints ---------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """What clients bootstrap to: the proxy (metadata advertises it too)."""
        return self.proxy.address

    @property
    def connect_url(self) -> str:
        return self.connect.url

    @property
    def metrics_url(self) -> str:
        """The JMX exporter agent's endpoint (Strimzi's rules)."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def raw_metrics_url(self) -> str:
        """PromReporter's dump of every Kafka metric: for what Strimzi's rules do not serve."""
        return f"http://127.0.0.1:{self.raw_port}/raw"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        t0 = time.monotonic()
        try:
            self.proxy.start()
            self.kafka.start()
            self.connect.start()
            wait_until(self._metrics_up, timeout=30, what="the JMX exporter's /metrics and PromReporter's /raw")
            self.tail = OffsetsTail(self.bootstrap, self.connect.offset_topic).start()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        if self.tail is not None:
            self.tail.stop()
        self.connect.stop()
        self.kafka.stop()
        self.proxy.stop()
        self.http.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _metrics_up(self) -> bool:
        return all(self.http.get(url).status_code == 200 for url in (self.metrics_url, self.raw_metrics_url))

    # -- Kafka and Connect -------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        futures[topic].result(timeout=30)

    def flood_config(
        self, topic: str, *, rate: float, record_bytes: int = 1000, extra: Mapping[str, str | int] | None = None
    ) -> dict[str, str]:
        """A FloodSource config: ``rate`` records/s of ``record_bytes`` each (bytes as they are),
        plus ``extra`` (e.g. ``{"producer.override.batch.size": 327680}``)."""
        config: dict[str, str] = {
            "connector.class": FLOOD_SOURCE,
            "tasks.max": "1",
            "topic": topic,
            "records.per.second": str(rate),
            "record.bytes": str(record_bytes),
            "key.converter": BYTE_ARRAY_CONVERTER,
            "value.converter": BYTE_ARRAY_CONVERTER,
        }
        config.update({key: str(value) for key, value in (extra or {}).items()})
        return config

    def put_config(self, name: str, config: Mapping[str, str]) -> None:
        """Create or reconfigure a connector (PUT /connectors/<name>/config)."""
        response = self.http.put(f"{self.connect_url}/connectors/{quote(name, safe='')}/config", json=dict(config))
        response.raise_for_status()

    def create_flood(
        self,
        name: str,
        topic: str,
        *,
        rate: float,
        record_bytes: int = 1000,
        extra: Mapping[str, str | int] | None = None,
    ) -> None:
        self.put_config(name, self.flood_config(topic, rate=rate, record_bytes=record_bytes, extra=extra))

    def delete_connector(self, name: str) -> None:
        self.http.delete(f"{self.connect_url}/connectors/{quote(name, safe='')}").raise_for_status()

    def task_running(self, name: str) -> bool:
        response = self.http.get(f"{self.connect_url}/connectors/{quote(name, safe='')}/status")
        if response.status_code != 200:
            return False
        tasks = response.json().get("tasks") or []
        return bool(tasks) and all(t["state"] == "RUNNING" for t in tasks)

    # -- metrics -----------------------------------------------------------------------------

    def scrape(self) -> str:
        """The exposition text at ``metrics_url``."""
        response = self.http.get(self.metrics_url)
        response.raise_for_status()
        return response.text

    def figures(self, connector: str, task: int = 0) -> Figures:
        """One scrape of the exporter, parsed with prometheus_client, for one task and its producer
        (and PromReporter's ``/raw`` for the commit failure percentage)."""
        raw = self.http.get(self.raw_metrics_url).text
        return parse_figures(self.scrape(), connector, task, raw)

    def task_starts(self, connector: str) -> list[int]:
        """The ``seq`` each start of the connector's task began after, in order (from the worker
        log, where FloodSourceTask prints it): a task's ``poll_total`` counts from there."""
        marker = f"FloodSourceTask {connector} starting at seq "
        text = self.connect.log_path.read_text(errors="replace")
        return [int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(marker)]

    def restart_task(self, connector: str, task: int = 0) -> None:
        """``POST /connectors/<name>/tasks/<task>/restart``: what the operator does when a running
        task's producer is not served (operator/connectops/planning/producer_metrics.py)."""
        url = f"{self.connect_url}/connectors/{quote(connector, safe='')}/tasks/{task}/restart"
        self.http.post(url).raise_for_status()

    def _log_count(self, line: str) -> int:
        return self.connect.log_path.read_text(errors="replace").count(line)

    def graceful_stop_failures(self, connector: str, task: int = 0) -> int:
        """How often the worker gave up stopping the task gracefully (``task.shutdown.graceful.timeout.ms``)
        and cancelled it: its thread was blocked, e.g. in ``send()`` on a full producer buffer."""
        return self._log_count(f"Graceful stop of task {connector}-{task} failed.")

    def producer_closes(self, connector: str, task: int = 0) -> int:
        """How often a producer of the task was closed (``AppInfoParser`` logs each close)."""
        return self._log_count(f"App info kafka.producer for connector-producer-{connector}-{task} unregistered")

    def old_producers_closed(self, connector: str, task: int = 0) -> bool:
        """Whether every producer of the task's earlier starts is closed for the last time: once per
        stop, and a cancelled task's twice (``cancel()`` closes it at once from another thread,
        the task's thread again when it exits)."""
        stops = len(self.task_starts(connector)) - 1
        return self.producer_closes(connector, task) >= stops + self.graceful_stop_failures(connector, task)

    def producer_served(self, connector: str, task: int = 0) -> bool:
        """Whether the exporter serves the task's producer (its producer-metrics MBean), as the
        check judges it (connectops_check.worker_metrics.producer_served)."""
        from connectops_check.worker_metrics import parse_worker_metrics, producer_served

        figures = parse_worker_metrics(self.scrape(), connector).get((connector, task))
        return figures is not None and producer_served([figures])

    def producer_registered(self, connector: str, task: int = 0) -> bool:
        """Whether the task's producer has live metrics in Kafka (PromReporter's ``/raw``, which
        keeps each reporter's own metrics instead of the JVM's MBean names)."""
        bean = f"kafka.producer:type=producer-metrics,client-id=connector-producer-{connector}-{task}"
        line = f"{bean}\tbuffer-total-bytes\t"
        return line in self.http.get(self.raw_metrics_url).text

    def served_after_restart(self, connector: str, *, starts_before: int, task: int = 0) -> AfterRestart:
        """After a change that restarts the task: once every earlier producer is closed for the
        last time, is the new one served by the exporter? If not (the clobbering of the module
        docstring: a cancelled stop, Kafka has the producer's metrics), restart the task once as
        the operator does and wait for that producer to be served. Raises ``AssertionError``
        when what is seen is not that defect (not served without a cancelled stop, or served
        neither after the remedy)."""
        wait_until(
            lambda: len(self.task_starts(connector)) > starts_before,
            timeout=90,
            what=f"task start {starts_before + 1} of {connector}",
        )
        wait_until(lambda: self.old_producers_closed(connector, task), timeout=60, what="the old producer closed")
        wait_until(lambda: self.producer_registered(connector, task), timeout=30, what="the new producer in Kafka")
        cancelled = self.graceful_stop_failures(connector, task)
        if self.producer_served(connector, task):
            return AfterRestart(starts_before, cancelled, served=True, restarted=False)
        assert cancelled >= 1, "the exporter does not serve the new producer, yet no stop of the task was cancelled"
        self.restart_task(connector, task)
        wait_until(
            lambda: len(self.task_starts(connector)) > starts_before + 1,
            timeout=90,
            what=f"task start {starts_before + 2} of {connector}",
        )
        wait_until(lambda: self.old_producers_closed(connector, task), timeout=60, what="the old producer closed")
        assert self.graceful_stop_failures(connector, task) == cancelled, "the relieved task's stop was cancelled too"
        wait_until(
            lambda: self.producer_served(connector, task), timeout=30, what="the restarted task's producer served"
        )
        return AfterRestart(starts_before + 1, cancelled, served=False, restarted=True)

    def committed(self, connector: str) -> int | None:
        """The connector's latest committed ``seq`` in the offsets topic (None: none yet)."""
        assert self.tail is not None, "start() first"
        return self.tail.committed(connector)

    def measure(
        self, connector: str, label: str, *, starts_before: int, seconds: float, interval: float = 1.0
    ) -> Phase:
        """Wait for the connector's next task start (its ``starts_before + 1``-th) and for its
        producer's metrics, then sample figures and the committed seq every ``interval`` for
        ``seconds``."""
        wait_until(
            lambda: len(self.task_starts(connector)) > starts_before,
            timeout=90,
            what=f"{label}: task start {starts_before + 1} of {connector}",
        )
        phase = Phase(label, start_seq=self.task_starts(connector)[-1])
        wait_until(
            lambda: self.figures(connector).records_per_request_avg is not None,
            timeout=30,
            what=f"{label}: producer metrics of {connector}",
        )
        produce_before = self.proxy.counts().get(PRODUCE, 0)
        t0 = time.monotonic()
        while True:
            phase.samples.append((self.figures(connector), self.committed(connector)))
            if time.monotonic() - t0 >= seconds:
                break
            time.sleep(interval)
        phase.produce_requests = self.proxy.counts().get(PRODUCE, 0) - produce_before
        return phase
