"""``--client-config-env``: a Kafka client setting whose value the job reads from its environment
(the driver pod's env, filled by the kubelet from the ConnectCluster's configFrom Secret).

The job runs as ``main`` does in the driver, against a real Apache Kafka broker and a stand-in for
Connect's REST API (a sink's four answers). What proves the value reached the Kafka client is
behaviour, not intent: the same arguments collect with ``security.protocol=PLAINTEXT`` in the
variable and fail to reach the broker with ``SSL`` (which the plaintext broker cannot speak).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # not re-exported
from pyspark.sql import SparkSession

from connectops_check.cli import main
from connectops_check.snapshot import Snapshot

pytestmark = pytest.mark.spark

VARIABLE = "CONNECTOPS_KAFKA_SECURITY_PROTOCOL"


class _SinkRest(BaseHTTPRequestHandler):
    """Connect's answers about one running FileStreamSink (the check reads nothing else of a sink)."""

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


@pytest.fixture
def sink(kafka: Any) -> Iterator[tuple[str, str, str]]:
    """(connect url, connector, topic): a sink on a 2-partition topic holding 3 and 2 records,
    whose group committed offset 1 on each partition."""
    suffix = uuid.uuid4().hex[:8]
    name, topic = f"env-sink-{suffix}", f"env-{suffix}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for partition, count in ((0, 3), (1, 2)):
        for i in range(count):
            producer.produce(topic, value=str(i).encode(), partition=partition)
    assert producer.flush(10) == 0
    committed = [KafkaTopicPartition(topic, p, 1) for p in (0, 1)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"connect-{name}", committed)])[
        f"connect-{name}"
    ].result(30)
    base = f"/connectors/{quote(name, safe='')}"
    _SinkRest.routes = {
        base: {
            "name": name,
            "type": "sink",
            "config": {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": topic},
        },
        f"{base}/status": {
            "connector": {"state": "RUNNING", "worker_id": "w"},
            "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w"}],
            "type": "sink",
        },
        f"{base}/tasks": [{"id": {"connector": name, "task": 0}, "config": {}}],
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SinkRest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", name, topic
    finally:
        server.shutdown()


def _argv(kafka: Any, sink: tuple[str, str, str], tmp_path: Path) -> list[str]:
    url, name, _ = sink
    return [
        "--bootstrap",
        kafka.bootstrap,
        "--connect-url",
        url,
        "--connector",
        name,
        "--samples",
        "1",
        "--interval",
        "0s",
        "--master",
        "local[2]",
        "--save-snapshot",
        str(tmp_path / "snapshot.json"),
        "--client-config-env",
        f"security.protocol={VARIABLE}",
    ]


def test_a_setting_in_the_environment_reaches_the_kafka_client(
    kafka: Any,
    sink: tuple[str, str, str],
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = _argv(kafka, sink, tmp_path)
    topic = sink[2]

    monkeypatch.setenv(VARIABLE, "PLAINTEXT")
    assert main(argv) == 0, capsys.readouterr().err
    snapshot = Snapshot.load(tmp_path / "snapshot.json")
    read = {(p.topic, p.partition): (p.log_end, p.committed) for p in snapshot.samples[-1].partitions}
    assert read == {(topic, 0): (3, 1), (topic, 1): (2, 1)}
    capsys.readouterr()

    # the same arguments, SSL in the variable: the client now speaks TLS to a plaintext broker
    monkeypatch.setenv(VARIABLE, "SSL")
    (tmp_path / "snapshot.json").unlink()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "connectops-check: KafkaException" in err
    assert not (tmp_path / "snapshot.json").exists()


def test_a_value_the_kafka_client_quotes_is_masked(
    kafka: Any,
    sink: tuple[str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # librdkafka quotes a rejected value in its error: that text is what the job prints
    # (and the spark-operator copies into the SparkApplication's status, then the owner's)
    value = f"not-a-protocol-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(VARIABLE, value)
    assert main(_argv(kafka, sink, tmp_path)) == 1
    err = capsys.readouterr().err
    assert 'Invalid value "[redacted]" for configuration property "security.protocol"' in err
    assert value not in err
