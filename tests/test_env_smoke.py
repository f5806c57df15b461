"""Smoke tests of the real test servers: what later end-to-end tests rely on actually works here."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kubernetes import client

from tests.env.records import assert_end_offsets_true
from tests.env.servers import (
    ETCD_VERSION,
    KAFKA_VERSION,
    KUBE_VERSION,
    ConnectFactory,
    ConnectWorker,
    KafkaBroker,
    KubeAPI,
    kafka_lib_dir,
)

pytestmark = pytest.mark.timeout(180)


def _poll(check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.25) -> Any:
    """Return the first truthy result of ``check`` within ``timeout`` seconds, else fail."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last result: {last!r}")


def _create_topic(kafka: KafkaBroker, topic: str, partitions: int) -> None:
    admin = AdminClient(kafka.admin_config())
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1)
    for future in admin.create_topics([new]).values():
        future.result(timeout=15)
    kafka.wait_for_leaders(topic, partitions)


Record = tuple[bytes | None, bytes | None]


def _consume(kafka: KafkaBroker, topic: str, count: int, timeout: float = 30.0) -> list[Record]:
    consumer = Consumer(kafka.consumer_config(f"smoke-{uuid.uuid4().hex[:8]}"))
    records: list[Record] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            records.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(records) == count, f"got {len(records)} of {count} records from {topic} in {timeout}s"
    return records


# --- kube-apiserver ------------------------------------------------------------------------------


def test_kube_and_etcd_versions_are_the_pinned_ones(kube: KubeAPI, kube_client: client.ApiClient) -> None:
    """tests/env/kube/*/go.mod pin what build.sh builds; servers.py looks for those binaries; and
    the servers running are those versions."""
    modules = Path(__file__).parent / "env" / "kube"
    assert f"\tk8s.io/kubernetes {KUBE_VERSION} " in (modules / "apiserver" / "go.mod").read_text()
    assert f"\nrequire go.etcd.io/etcd/server/v3 {ETCD_VERSION}\n" in (modules / "etcd" / "go.mod").read_text()
    assert client.VersionApi(kube_client).get_code().git_version == kube.version
    assert httpx.get(f"{kube.etcd_url}/version", timeout=5).json()["etcdserver"] == ETCD_VERSION.lstrip("v")


def test_kube_crd_and_status_subresource(kube_client: client.ApiClient) -> None:
    group, plural = "smoke.connectops.test", "widgets"
    # Plain dicts (typed Any) are accepted by the client and read better than nested models.
    crd: Any = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                            },
                        }
                    },
                }
            ],
        },
    }
    ext = client.ApiextensionsV1Api(kube_client)
    ext.create_custom_resource_definition(crd)

    def established() -> bool:
        status = ext.read_custom_resource_definition(f"{plural}.{group}").status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    _poll(established, timeout=30, what="CRD Established")

    objects = client.CustomObjectsApi(kube_client)
    body: Any = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 3},
    }

    def create() -> bool:
        # Serving the new resource can lag Established by a moment (404 until the handler is in).
        try:
            objects.create_namespaced_custom_object(group, "v1", "default", plural, body)
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    _poll(create, timeout=15, what="custom object creation")
    objects.patch_namespaced_custom_object_status(group, "v1", "default", plural, "w1", {"status": {"phase": "Ready"}})
    got: Any = objects.get_namespaced_custom_object(group, "v1", "default", plural, "w1")
    assert got["status"] == {"phase": "Ready"}
    assert got["spec"] == {"size": 3}


def test_kube_plain_user_and_service_account_token(kube: KubeAPI, kube_client: client.ApiClient) -> None:
    def list_namespaces_as(token: str) -> httpx.Response:
        return httpx.get(
            f"{kube.url}/api/v1/namespaces",
            headers={"Authorization": f"Bearer {token}"},
            verify=kube.ssl_context(),
            timeout=10,
        )

    assert list_namespaces_as(kube.token).status_code == 200
    assert list_namespaces_as("not-a-token").status_code == 401
    # 403 (not 401) proves the plain user authenticated and RBAC then denied it.
    denied = list_namespaces_as(kube.user_tokens["rbac-test"])
    assert denied.status_code == 403
    assert 'User "rbac-test"' in denied.json()["message"]

    # No token controller runs, so ServiceAccount tokens come from the TokenRequest API.
    core = client.CoreV1Api(kube_client)
    account: Any = {"metadata": {"name": "smoke-sa"}}
    core.create_namespaced_service_account("default", account)
    request: Any = {"spec": {"audiences": [kube.SA_ISSUER], "expirationSeconds": 3600}}
    status = core.create_namespaced_service_account_token("smoke-sa", "default", request).status
    token = status.token if status else None
    assert token
    sa_denied = list_namespaces_as(token)
    assert sa_denied.status_code == 403
    assert "system:serviceaccount:default:smoke-sa" in sa_denied.json()["message"]


# --- Apache Kafka --------------------------------------------------------------------------------------


def test_one_kafka_version_for_broker_connect_and_mirrormaker() -> None:
    """The pom pins the version provision.sh resolves; servers.py looks for that directory; and
    the broker, Connect and MirrorMaker 2 jars in it are all of that one version, from Maven."""
    pom = (Path(__file__).parent / "env" / "kafka" / "pom.xml").read_text()
    pinned = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom)
    assert pinned is not None
    assert pinned.group(1) == KAFKA_VERSION
    jars = {p.name for p in kafka_lib_dir().glob("*.jar")}
    for artifact in (
        "kafka_2.13",
        "kafka-server",
        "kafka-clients",
        "connect-runtime",
        "connect-file",
        "connect-mirror",
    ):
        assert f"{artifact}-{KAFKA_VERSION}.jar" in jars, artifact
    kafka_jars = [j for j in jars if re.match(r"(kafka|connect)[-_]", j) and not j.startswith("kafka_2.13")]
    assert all(j.endswith(f"-{KAFKA_VERSION}.jar") for j in kafka_jars), sorted(kafka_jars)


def test_kafka_topic_with_25_partitions_and_roundtrip(kafka: KafkaBroker) -> None:
    topic = "smoke-roundtrip"
    _create_topic(kafka, topic, partitions=25)
    metadata = AdminClient(kafka.admin_config()).list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 25

    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    sent = {(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)}
    for i, (key, value) in enumerate(sorted(sent)):
        producer.produce(topic, value=value, key=key, partition=i % 25)
    assert producer.flush(15) == 0
    assert set(_consume(kafka, topic, count=10)) == sent


def test_end_offsets_after_a_multi_record_batch(kafka: KafkaBroker) -> None:
    topic = f"smoke-batch-{uuid.uuid4().hex[:6]}"
    _create_topic(kafka, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 200, "batch.num.messages": 1000})
    for i in range(50):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(15) == 0
    # one batch of 50 records: the end offset is the next record's offset, counted independently
    assert assert_end_offsets_true(kafka.bootstrap, topic) == {0: 50}


def test_a_lone_member_joins_at_once(kafka: KafkaBroker) -> None:
    topic = f"smoke-join-{uuid.uuid4().hex[:6]}"
    _create_topic(kafka, topic, partitions=1)
    assigned: list[float] = []
    consumer = Consumer(kafka.consumer_config(f"smoke-join-{uuid.uuid4().hex[:8]}"))
    try:
        started = time.monotonic()
        consumer.subscribe([topic], on_assign=lambda *_: assigned.append(time.monotonic() - started))
        deadline = started + 30
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()
    assert assigned, "never assigned"
    # Apache Kafka completes a lone member's join at once (group.initial.rebalance.delay.ms=0):
    # what lets the Connect workers run with Connect's default group timings. Generous for a
    # loaded machine.
    assert assigned[0] < 1.5, f"assigned after {assigned[0]:.1f} s"


# --- Kafka Connect -------------------------------------------------------------------------------


def _connector_state(worker: ConnectWorker, name: str) -> str | None:
    resp = httpx.get(f"{worker.url}/connectors/{name}/status", timeout=10)
    if resp.status_code != 200:
        return None
    state: str = resp.json()["connector"]["state"]
    return state


def _create_file_source(worker: ConnectWorker, name: str, file: Path, topic: str) -> None:
    config = {"connector.class": "FileStreamSource", "file": str(file), "topic": topic, "tasks.max": "1"}
    resp = httpx.post(f"{worker.url}/connectors", json={"name": name, "config": config}, timeout=30)
    assert resp.status_code == 201, resp.text


def test_connect_filestream_source_stop_and_offsets(connect: ConnectWorker, kafka: KafkaBroker, tmp_path: Path) -> None:
    plugins = httpx.get(f"{connect.url}/connector-plugins", timeout=10).json()
    assert "org.apache.kafka.connect.file.FileStreamSourceConnector" in {p["class"] for p in plugins}

    topic, name = "smoke-file", "smoke-file-source"
    _create_topic(kafka, topic, partitions=1)
    source = tmp_path / "input.txt"
    lines = [f"line-{i}" for i in range(5)]
    source.write_text("".join(f"{line}\n" for line in lines))
    _create_file_source(connect, name, source, topic)

    records = _consume(kafka, topic, count=len(lines))
    # JsonConverter with schemas disabled: each line is a JSON string, keys are null.
    assert [json.loads(value or b"null") for _, value in records] == lines

    resp = httpx.put(f"{connect.url}/connectors/{name}/stop", timeout=30)
    assert resp.status_code == 204, resp.text
    _poll(lambda: _connector_state(connect, name) == "STOPPED", timeout=30, what="STOPPED")

    def offsets() -> list[dict[str, Any]]:
        # Reading a stopped connector's offsets takes ~4 s here (fresh clients read the topic).
        resp = httpx.get(f"{connect.url}/connectors/{name}/offsets", timeout=30)
        got: list[dict[str, Any]] = resp.json()["offsets"]
        return got

    committed = _poll(offsets, timeout=15, what="committed source offsets")
    assert committed[0]["partition"] == {"filename": str(source)}
    assert committed[0]["offset"]["position"] == source.stat().st_size

    resp = httpx.delete(f"{connect.url}/connectors/{name}/offsets", timeout=30)
    assert resp.status_code == 200, resp.text
    # Right after the reset the list can still show the partition with "offset": null, until
    # the worker's offset store has read the tombstone.
    _poll(lambda: offsets() == [], timeout=15, what="offsets gone after DELETE")


def test_connect_worker_group_kill_and_restart(
    connect_factory: ConnectFactory, kafka: KafkaBroker, tmp_path: Path
) -> None:
    # A second, independent worker group on the same broker, with client overrides forbidden.
    worker = connect_factory("connect-restart", override_policy="None")
    assert httpx.get(f"{worker.url}/connectors", timeout=10).json() == []

    topic, name = "smoke-restart", "smoke-restart-source"
    _create_topic(kafka, topic, partitions=1)
    source = tmp_path / "input.txt"
    source.write_text("a\n")
    forbidden = {
        "connector.class": "FileStreamSource",
        "file": str(source),
        "topic": topic,
        "producer.override.linger.ms": "5",
    }
    resp = httpx.put(f"{worker.url}/connectors/{name}/config", json=forbidden, timeout=30)
    assert resp.status_code == 400, resp.text

    _create_file_source(worker, name, source, topic)
    _poll(lambda: _connector_state(worker, name) == "RUNNING", timeout=30, what="RUNNING")

    worker.kill()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{worker.url}/", timeout=2)
    worker.start()

    assert httpx.get(f"{worker.url}/connectors", timeout=10).json() == [name]
    _poll(lambda: _connector_state(worker, name) == "RUNNING", timeout=60, what="RUNNING after restart")
