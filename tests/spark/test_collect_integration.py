"""collect_snapshot against a real Apache Kafka broker and a real Connect worker, then the verdict."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # not re-exported
from pyspark.sql import SparkSession

from connectops_check.collect import collect_snapshot
from connectops_check.job import run_check
from connectops_check.snapshot import Snapshot
from connectops_check.verdict import Settings

pytestmark = pytest.mark.spark


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except httpx.HTTPError as error:
            last = error
        else:
            if last:
                return last
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


class Sink:
    """A FileStreamSink connector on its own topic, removed afterwards."""

    def __init__(
        self, kafka: Any, connect: Any, tmp_path: Path, partitions: int, config: dict[str, str] | None = None
    ) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.name = f"check-sink-{suffix}"
        self.topic = f"check-{suffix}"
        self.group = f"connect-{self.name}"
        self.url = f"{connect.url}/connectors/{quote(self.name, safe='')}"
        self.bootstrap = kafka.bootstrap
        self.connect_url = connect.url
        self.admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        self.partitions = partitions
        for f in self.admin.create_topics([NewTopic(self.topic, partitions, 1)]).values():
            f.result(30)
        self.producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
        config = {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(tmp_path / f"{self.name}.out"),
            **(config or {}),
            "tasks.max": "1",
            "topics": self.topic,
        }
        httpx.put(f"{self.url}/config", json=config, timeout=30).raise_for_status()
        self.wait_state("RUNNING")

    def state(self) -> tuple[str, list[str]] | None:
        response = httpx.get(f"{self.url}/status", timeout=10)
        if response.status_code != 200:  # 404 until the worker has the new config
            return None
        status = response.json()
        return status["connector"]["state"], [t["state"] for t in status.get("tasks", [])]

    def wait_state(self, state: str) -> None:
        wait_for(lambda: self.state() == (state, [state]), 90, f"{self.name} {state}")

    def produce(self, partition: int, count: int, key: bytes | None = None) -> None:
        for i in range(count):
            self.producer.produce(self.topic, value=str(i).encode(), key=key, partition=partition)
        assert self.producer.flush(10) == 0

    def committed(self) -> dict[int, int]:
        request = [
            ConsumerGroupTopicPartitions(
                self.group, [KafkaTopicPartition(self.topic, p) for p in range(self.partitions)]
            )
        ]
        answer = self.admin.list_consumer_group_offsets(request)[self.group].result(30)
        return {tp.partition: tp.offset for tp in answer.topic_partitions}

    def wait_committed(self, expected: dict[int, int]) -> None:
        wait_for(lambda: self.committed() == expected, 90, f"{self.group} committed {expected}")

    def snapshot(self, samples: int, interval_s: float, sleep: Callable[[float], None] = time.sleep) -> Snapshot:
        return collect_snapshot(self.bootstrap, self.connect_url, self.name, samples, interval_s, sleep=sleep)

    def delete(self) -> None:
        httpx.delete(self.url, timeout=30)


@pytest.fixture
def make_sink(kafka: Any, connect: Any, tmp_path: Path) -> Iterator[Callable[[int], Sink]]:
    made: list[Sink] = []

    def make(partitions: int) -> Sink:
        made.append(Sink(kafka, connect, tmp_path, partitions))
        return made[-1]

    yield make
    for sink in made:
        sink.delete()


def test_paused_sink_lag_is_exact_then_zero_after_resume(make_sink: Callable[[int], Sink], spark: SparkSession) -> None:
    sink = make_sink(2)
    sink.produce(0, 3)
    sink.produce(1, 2)
    sink.wait_committed({0: 3, 1: 2})  # the group has real commits before the pause

    httpx.put(f"{sink.url}/pause", timeout=30).raise_for_status()
    sink.wait_state("PAUSED")
    # sampling starts while the sink is still caught up; records arrive during the sampling
    result: dict[str, Snapshot] = {}
    first_sample, produced = threading.Event(), threading.Event()

    def between_samples(seconds: float) -> None:
        # the collector sleeps only after a sample: after the first one, hold it until the
        # records are in (a late first sample makes the next ones run back to back)
        if not first_sample.is_set():
            first_sample.set()
            produced.wait(60)
        time.sleep(seconds)

    collector = threading.Thread(
        target=lambda: result.update(snap=sink.snapshot(samples=5, interval_s=1.0, sleep=between_samples))
    )
    collector.start()
    # not a fixed delay: on a loaded machine the first sample can take longer than any guess (CI12)
    assert first_sample.wait(60)
    sink.produce(0, 7)
    sink.produce(1, 4)
    produced.set()
    collector.join(timeout=120)
    early = result["snap"]
    assert [p.log_end for p in early.samples[0].partitions] == [3, 2]  # caught up at the first sample
    assert [p.log_end for p in early.samples[-1].partitions] == [10, 6]
    assert [p.committed for p in early.samples[-1].partitions] == [3, 2]
    # Burrow at this point: the broker's recent log-ends (3, 2) are <= the last commits, so not
    # STOP (checkIfRecentLagZero), and the lag was 0 at a commit (rule 1): OK on both partitions
    doc = run_check(early, Settings(), spark)
    assert doc["lag"]["total"] == 11
    assert {(p["partition"], p["lag"], p["basis"]) for p in doc["lag"]["topPartitions"]} == {
        (0, 7, "committed"),
        (1, 4, "committed"),
    }
    assert doc["lag"]["burrow"]["statusCounts"] == {"OK": 2}
    paused = run_check(early, Settings(desired_state="paused"), spark)
    assert paused["verdict"] == "PAUSED"
    assert paused["headline"]["totalLag"] == 11

    # once every broker log-end in the window is past the commits: STOP, and the connector ERR
    late = sink.snapshot(samples=3, interval_s=1.0)
    doc = run_check(late, Settings(), spark)
    assert doc["lag"]["burrow"]["statusCounts"] == {"STOP": 2}
    assert doc["verdict"] == "UNHEALTHY"
    assert {"BURROW_ERR", "CONNECTOR_NOT_RUNNING"} <= {r["code"] for r in doc["reasons"]}
    # ... unless it is paused on purpose: PAUSED with its lag, failing past maxLagWhilePaused
    assert run_check(late, Settings(desired_state="paused"), spark)["verdict"] == "PAUSED"
    over = run_check(late, Settings(desired_state="paused", max_lag_while_paused=10), spark)
    assert over["verdict"] == "UNHEALTHY"
    assert "LAG_WHILE_PAUSED_ABOVE_MAX" in {r["code"] for r in over["reasons"]}

    httpx.put(f"{sink.url}/resume", timeout=30).raise_for_status()
    sink.wait_state("RUNNING")
    sink.wait_committed({0: 10, 1: 6})
    doc = run_check(sink.snapshot(samples=2, interval_s=1.0), Settings(), spark)
    assert doc["lag"]["total"] == 0
    assert doc["lag"]["burrow"]["status"] == "OK"
    assert doc["verdict"] == "HEALTHY", doc["reasons"]


class Timeline:
    """Produces a record to partition 0 every ``period_s``, remembering when each
    offset was acknowledged: the truth a time lag is compared with."""

    def __init__(self, sink: Sink, period_s: float, first_offset: int) -> None:
        self.sink, self.period_s = sink, period_s
        self.written_ms: dict[int, float] = {}
        self.next_offset = first_offset
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sink.produce(0, 1)  # flushed: acknowledged when this returns
            self.written_ms[self.next_offset] = time.time() * 1000
            self.next_offset += 1
            self._stop.wait(self.period_s)

    def __enter__(self) -> Timeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_time_lag_matches_the_produce_timeline(make_sink: Callable[[int], Sink], spark: SparkSession) -> None:
    """A paused sink at offset 0 while a record arrives every 0.25 s: its time lag is how long
    ago offset 0 was written, within one sample interval (1 s)."""
    sink = make_sink(1)
    httpx.put(f"{sink.url}/pause", timeout=30).raise_for_status()
    sink.wait_state("PAUSED")
    with Timeline(sink, 0.25, first_offset=0) as timeline:
        time.sleep(3.0)
        snap = sink.snapshot(samples=5, interval_s=1.0)
    last = snap.samples[-1]
    committed = last.partitions[0].committed
    assert committed in (None, 0)  # nothing consumed: position 0 (no commit, or the first)
    truth_s = (last.ts_ms - timeline.written_ms[0]) / 1000
    doc = run_check(snap, Settings(desired_state="paused"), spark)
    measured = doc["headline"]["timeLagSeconds"]
    assert measured is not None, doc["lag"]
    assert abs(measured - truth_s) <= 1.0, (measured, truth_s)
    assert doc["lag"]["etaSeconds"] is None
    assert "not gaining" in doc["lag"]["etaReason"]


@pytest.fixture
def slow_sink(kafka: Any, connect_factory: Any, tmp_path: Path) -> Iterator[Callable[[int], Sink]]:
    """Sinks of known speed (``SlowSinkConnector``: ``delay.ms`` per record) on their own worker."""
    from tests.env.plugins import sinks_jar

    worker = connect_factory("slow", extra_classpath=[sinks_jar()])
    made: list[Sink] = []

    def make(delay_ms: int) -> Sink:
        config = {
            "connector.class": "io.connectops.testplugins.SlowSinkConnector",
            "delay.ms": str(delay_ms),
            "consumer.override.max.poll.records": "5",
        }
        made.append(Sink(kafka, worker, tmp_path, 1, config=config))
        return made[-1]

    yield make
    for sink in made:
        sink.delete()
    worker.stop()  # an idle JVM, and its fetches on the broker, for the rest of the session otherwise


def test_eta_for_a_sink_catching_up_and_none_for_one_falling_behind(
    slow_sink: Callable[[int], Sink], spark: SparkSession
) -> None:
    # 40 ms per record: at most 25 records/s. One record first, so the group has joined and
    # committed before the measurement (a consumer group takes seconds to form).
    catching = slow_sink(40)
    catching.produce(0, 1)
    catching.wait_committed({0: 1})
    catching.produce(0, 200)  # a backlog of 8 s at 25/s; then 4 records/s arrive while sampled
    with Timeline(catching, 0.25, first_offset=201):
        snap = catching.snapshot(samples=5, interval_s=1.0)
    doc = run_check(snap, Settings(after_reset="toEarliest", max_lag=10), spark)
    lag = doc["lag"]
    assert lag["total"] > 0, lag  # still in its backlog at the last sample
    assert lag["consumeRate"] > lag["produceRate"], lag
    assert lag["etaSeconds"] == pytest.approx(lag["total"] / (lag["consumeRate"] - lag["produceRate"]))
    assert doc["verdict"] == "CATCHING_UP", doc["reasons"]

    # 500 ms per record: 2 records/s against 4 arriving
    behind = slow_sink(500)
    behind.produce(0, 1)
    behind.wait_committed({0: 1})
    with Timeline(behind, 0.25, first_offset=1):
        time.sleep(2.0)
        snap = behind.snapshot(samples=5, interval_s=1.5)
    doc = run_check(snap, Settings(after_reset="toEarliest"), spark)
    lag = doc["lag"]
    assert lag["total"] > 0
    assert lag["etaSeconds"] is None
    assert lag["consumeRate"] < lag["produceRate"], lag
    assert "not gaining" in lag["etaReason"]
    assert "NOT_CATCHING_UP" in {r["code"] for r in doc["reasons"]}


def test_records_keyed_to_one_partition_flag_balance(make_sink: Callable[[int], Sink], spark: SparkSession) -> None:
    sink = make_sink(4)
    result: dict[str, Snapshot] = {}
    collector = threading.Thread(target=lambda: result.update(snap=sink.snapshot(samples=4, interval_s=2.0)))
    collector.start()
    time.sleep(1.0)  # let the first sample (the window's start) be taken
    sink.produce(2, 120, key=b'"the-only-key"')
    collector.join(timeout=120)
    snap = result["snap"]

    doc = run_check(snap, Settings(min_traffic=10), spark)
    topic = doc["balance"]["traffic"]["topics"][0]
    assert topic["topic"] == sink.topic
    assert topic["total"] == topic["max"] >= 10  # every record of the window went to one partition
    assert topic["maxOverMean"] == pytest.approx(4.0)
    assert topic["gini"] == pytest.approx(0.75)
    assert doc["verdict"] in ("DEGRADED", "UNHEALTHY")
    assert {"TRAFFIC_SKEW", "TRAFFIC_GINI"} <= {r["code"] for r in doc["reasons"]}


class _MirrorRest(BaseHTTPRequestHandler):
    """The four Connect REST answers a MirrorSourceConnector gives (no MM2 jars exist here)."""

    routes: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        body = self.routes.get(self.path)
        payload = json.dumps(body if body is not None else {"error_code": 404}).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:  # keep the test output clean
        pass


def test_mirror_source_lag_from_stored_offsets(kafka: Any, spark: SparkSession) -> None:
    """MM2 lag = source log-end - (stored + 1), with log-ends read from the real broker."""
    topic = f"mm2-src-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for partition, count in ((0, 9), (1, 5)):
        for i in range(count):
            producer.produce(topic, value=str(i).encode(), partition=partition)
            producer.flush(10)

    name = "east->west.MirrorSourceConnector"  # a name that needs path encoding
    base = f"/connectors/{quote(name, safe='')}"
    _MirrorRest.routes = {
        base: {
            "name": name,
            "type": "source",
            "config": {
                "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                "source.cluster.alias": "east",
                "source.cluster.bootstrap.servers": kafka.bootstrap,
            },
        },
        f"{base}/status": {
            "connector": {"state": "RUNNING", "worker_id": "w"},
            "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w"}],
            "type": "source",
        },
        f"{base}/tasks": [
            {
                "id": {"connector": name, "task": 0},
                "config": {"task.assigned.partitions": f"{topic}-0,{topic}-1"},
            }
        ],
        f"{base}/offsets": {
            "offsets": [
                # partition 0 replicated up to offset 5 (resumes at 6): 9 - 6 = 3 behind
                {"partition": {"cluster": "east", "topic": topic, "partition": 0}, "offset": {"offset": 5}},
                # partition 1 has nothing stored: MM2 starts from earliest, 5 - 0 = 5 behind
            ]
        },
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MirrorRest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        snap = collect_snapshot("unused:9092", f"http://127.0.0.1:{server.server_port}", name, 2, 0.5)
    finally:
        server.shutdown()
    assert snap.kind.value == "mirror-source"
    assert [(p.log_end, p.stored) for p in snap.samples[-1].partitions] == [(9, 5), (5, None)]
    assert snap.members is not None
    assert [m.task_id for m in snap.members] == [0]
    doc = run_check(snap, Settings(), spark)
    assert doc["lag"]["total"] == 8
    assert {(p["partition"], p["lag"], p["basis"]) for p in doc["lag"]["topPartitions"]} == {
        (0, 3, "committed"),
        (1, 5, "earliest"),
    }
    assert doc["balance"]["assignment"]["unassignedPartitions"] == 0
