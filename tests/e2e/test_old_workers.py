"""The operator's paths for older Connect workers, against real workers of those releases.

One worker per release (tests/env/connect_versions, resolved from Maven Central on first use),
each in its own group on the session's Apache Kafka 4.3.1 broker, started once for this module:

- 3.5 (STOPPED and GET /offsets, no PATCH/DELETE): a reset takes the tombstone path;
- 3.6 (PATCH/DELETE /offsets, no create-stopped): a reset takes the REST path, and spec.offsets
  onCreate clear is refused with NeedsConnect37 before anything is created;
- 3.4 (no STOPPED state): a reset is refused, and nothing changes; ``state: stopped`` is refused
  and nothing is created.

And the pinned jars' SHA-256 sums are checked, not just recorded.

What each path did is read from the system: the worker's own request log (which offsets calls it
was sent), the offsets topic on the broker, Connect's GET /offsets, the connector's output topic.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GROUP, VERSION, ConnectREST, K8s, connect_cluster_spec, count_config_writes, wait_for
from tests.e2e.test_offset_reset_e2e import LINES, assert_tombstoned_after, make_source, offsets, reset
from tests.e2e.test_offset_truth_source import raw_records
from tests.env.connect_versions import (
    CONNECT_34,
    CONNECT_35,
    CONNECT_36,
    connect_libs,
    expected_sums,
    mismatched,
)
from tests.env.records import topic_record_count
from tests.env.servers import FILESTREAM_SOURCE, ConnectWorker, KafkaBroker, MissingTestEnvError, ServerStartError

MAIN_JARS = ("connect-api", "connect-file", "connect-json", "connect-runtime", "connect-transforms", "kafka-clients")


def _worker(root: Path, kafka: KafkaBroker, version: str) -> Iterator[ConnectWorker]:
    try:
        worker = ConnectWorker(
            root, kafka.bootstrap, name=f"connect-{version}", jar_dir=connect_libs(version), version=version
        )
        worker.start()
    except (MissingTestEnvError, ServerStartError) as exc:
        pytest.fail(f"Connect {version} worker: {exc}", pytrace=False)
    try:
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def connect_35(testenv_root: Path, kafka: KafkaBroker) -> Iterator[ConnectWorker]:
    yield from _worker(testenv_root, kafka, CONNECT_35)


@pytest.fixture(scope="module")
def connect_36(testenv_root: Path, kafka: KafkaBroker) -> Iterator[ConnectWorker]:
    yield from _worker(testenv_root, kafka, CONNECT_36)


@pytest.fixture(scope="module")
def connect_34(testenv_root: Path, kafka: KafkaBroker) -> Iterator[ConnectWorker]:
    yield from _worker(testenv_root, kafka, CONNECT_34)


def cluster_on(k8s: K8s, worker: ConnectWorker) -> str:
    k8s.create("connectclusters", "main", connect_cluster_spec(worker), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    status = k8s.get("connectclusters", "main")["status"]
    assert status["workerVersion"] == worker.version
    # no GET /health before 3.9 (KIP-1017): health unknown, and no warning for it
    assert status["workerHealth"]["status"] == "unknown"
    assert k8s.condition("connectclusters", "main", "WorkerHealthy")["status"] == "Unknown"
    return "main"


def offsets_calls(worker: ConnectWorker, name: str) -> list[str]:
    """The offsets-changing requests the worker itself logged for ``name`` (its Jetty request log):
    ``"PATCH 200"``, ``"DELETE 200"``."""
    pattern = re.compile(rf'"(PATCH|DELETE) /connectors/{re.escape(name)}/offsets HTTP/1\.1" (\d+)')
    return [f"{m[1]} {m[2]}" for m in pattern.finditer(worker.log_path.read_text(errors="replace"))]


def test_35_reset_takes_the_tombstone_path(k8s: K8s, connect_35: ConnectWorker, tmp_path: Path) -> None:
    from connectops.adapters.kafka import KafkaOffsets

    worker = connect_35
    cluster = cluster_on(k8s, worker)
    assert k8s.get("connectclusters", cluster)["status"]["capabilities"]["alterOffsets"] is False
    rest = ConnectREST(worker)
    name, topic = make_source(k8s, tmp_path, cluster, worker)
    bystander, bystander_topic = make_source(k8s, tmp_path, cluster, worker)
    before = offsets(rest, name)
    bystander_records, bystander_offsets = raw_records(worker, bystander), offsets(rest, bystander)
    assert bystander_records
    assert bystander_offsets
    kafka = KafkaOffsets(worker.bootstrap)
    live = [r for r in kafka.read_connector_offsets(worker.offset_topic, {name}) if r.value is not None]
    assert live

    status = reset(k8s, "tomb", {"connectorRef": {"name": name}, "action": "reset"})

    assert status["strategy"] == "tombstone"
    # the worker was stopped (KIP-875's STOPPED, 3.5) and sent no PATCH/DELETE /offsets
    log = worker.log_path.read_text(errors="replace")
    assert f'"PUT /connectors/{name}/stop HTTP/1.1" 204' in log
    assert offsets_calls(worker, name) == []
    # the broker: a tombstone after each of the connector's keys, in the partition it was read from
    latest = {r.key: r for r in live}
    assert_tombstoned_after(worker.bootstrap, worker.offset_topic, list(latest.values()))
    # the connector resumed from nothing: it re-read its file, and Connect reports the new position
    wait_for(lambda: topic_record_count(worker.bootstrap, topic) == 2 * len(LINES), 60, "re-read")
    assert rest.state(name) == "RUNNING"
    wait_for(lambda: offsets(rest, name) == before, 60, "the re-read committed to the same end position")
    # the other connector's partition on the same offsets topic: not a byte changed, nor re-read
    assert raw_records(worker, bystander) == bystander_records
    assert offsets(rest, bystander) == bystander_offsets
    assert topic_record_count(worker.bootstrap, bystander_topic) == len(LINES)
    k8s.wait_condition("connectors", name, "Ready", "True")


def test_36_reset_takes_the_rest_path(k8s: K8s, connect_36: ConnectWorker, tmp_path: Path) -> None:
    worker = connect_36
    cluster = cluster_on(k8s, worker)
    caps = k8s.get("connectclusters", cluster)["status"]["capabilities"]
    assert (caps["alterOffsets"], caps["initialState"]) == (True, False)
    rest = ConnectREST(worker)
    name, topic = make_source(k8s, tmp_path, cluster, worker)
    bystander, bystander_topic = make_source(k8s, tmp_path, cluster, worker)
    before = offsets(rest, name)
    bystander_records, bystander_offsets = raw_records(worker, bystander), offsets(rest, bystander)

    status = reset(k8s, "rest", {"connectorRef": {"name": name}, "action": "reset"})

    assert status["strategy"] == "rest"
    # the worker itself was asked, once, and said yes
    assert offsets_calls(worker, name) == ["DELETE 200"]
    wait_for(lambda: topic_record_count(worker.bootstrap, topic) == 2 * len(LINES), 60, "re-read")
    assert rest.state(name) == "RUNNING"
    wait_for(lambda: offsets(rest, name) == before, 60, "the re-read committed to the same end position")
    assert raw_records(worker, bystander) == bystander_records
    assert offsets(rest, bystander) == bystander_offsets
    assert topic_record_count(worker.bootstrap, bystander_topic) == len(LINES)


def test_36_on_create_clear_is_refused_and_nothing_created(k8s: K8s, connect_36: ConnectWorker, tmp_path: Path) -> None:
    worker = connect_36
    cluster = cluster_on(k8s, worker)
    rest = ConnectREST(worker)
    name = f"clear-{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    spec = {
        "clusterRef": {"name": cluster},
        "class": FILESTREAM_SOURCE,
        "config": {"file": str(path), "topic": f"lines-{name}"},
        "offsets": {"onCreate": "clear"},
    }
    k8s.create("connectors", name, spec, "Connector")

    cond = k8s.wait_condition("connectors", name, "OffsetsOnCreate", "False", "NeedsConnect37")
    assert "3.7" in cond["message"]
    k8s.wait_condition("connectors", name, "Ready", "False", "NeedsConnect37")
    wait_for(lambda: "NeedsConnect37" in {e.reason for e in k8s.events(name)}, 30, "the NeedsConnect37 Event")
    # nothing on the worker: no connector, not one config record written for it; no reset made
    assert not rest.exists(name)
    assert count_config_writes(worker, name) == 0
    resets: dict[str, Any] = k8s.custom.list_namespaced_custom_object(GROUP, VERSION, k8s.ns, "offsetresets")
    assert resets["items"] == []


def test_34_reset_is_refused_and_nothing_changes(k8s: K8s, connect_34: ConnectWorker, tmp_path: Path) -> None:
    worker = connect_34
    cluster = cluster_on(k8s, worker)
    assert k8s.get("connectclusters", cluster)["status"]["capabilities"]["stop"] is False
    rest = ConnectREST(worker)
    # a source that copied its file and committed its position (no GET /offsets before 3.5: the
    # offsets topic says when)
    name, topic = f"src-{uuid.uuid4().hex[:6]}", f"lines-{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    spec = {"clusterRef": {"name": cluster}, "class": FILESTREAM_SOURCE, "config": {"file": str(path), "topic": topic}}
    k8s.create("connectors", name, spec, "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: topic_record_count(worker.bootstrap, topic) == len(LINES), 60, "lines copied")
    size = path.stat().st_size
    wait_for(
        lambda: any(value and str(size) in value.decode() for _, _, value in raw_records(worker, name)),
        60,
        "the end position committed",
    )
    records = raw_records(worker, name)

    status = reset(k8s, "refused", {"connectorRef": {"name": name}, "action": "reset"}, phase="Failed")

    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert (cond["status"], cond["reason"]) == ("False", "InspectFailed")
    assert status.get("backup") is None  # refused before anything was read for a backup
    assert "older than Kafka 3.5" in cond["message"]
    wait_for(lambda: cond["reason"] in {e.reason for e in k8s.events("refused")}, 30, "the refusal's Event")
    # nothing changed: still running, its offsets records byte for byte, its output not re-read,
    # and the Connector is not held by a lock
    assert rest.state(name) == "RUNNING"
    assert raw_records(worker, name) == records
    assert topic_record_count(worker.bootstrap, topic) == len(LINES)
    assert offsets_calls(worker, name) == []
    assert "/stop" not in worker.log_path.read_text(errors="replace")
    k8s.wait_condition("connectors", name, "Ready", "True")


def test_34_state_stopped_is_refused_and_nothing_created(k8s: K8s, connect_34: ConnectWorker, tmp_path: Path) -> None:
    worker = connect_34
    cluster = cluster_on(k8s, worker)
    name = f"stopped-{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    spec = {
        "clusterRef": {"name": cluster},
        "class": FILESTREAM_SOURCE,
        "config": {"file": str(path), "topic": f"lines-{name}"},
        "state": "stopped",
    }
    k8s.create("connectors", name, spec, "Connector")

    cond = k8s.wait_condition("connectors", name, "Valid", "False", "Unsupported")
    assert "3.5" in cond["message"]
    wait_for(lambda: "Unsupported" in {e.reason for e in k8s.events(name)}, 30, "the Unsupported Event")
    assert not ConnectREST(worker).exists(name)
    assert count_config_writes(worker, name) == 0


def test_the_recorded_sums_are_the_jars_and_a_wrong_one_is_caught() -> None:
    """The sums are checked, not just recorded: every recorded one matches the jar Maven gave, and
    one wrong digest is reported (connect_libs then refuses the cache and marks nothing complete)."""
    for version in (CONNECT_34, CONNECT_35, CONNECT_36):
        sums = expected_sums(version)
        assert set(sums) == {f"{a}-{version}.jar" for a in MAIN_JARS}
        assert mismatched(connect_libs(version), sums) == {}
    sums = expected_sums(CONNECT_34)
    runtime = f"connect-runtime-{CONNECT_34}.jar"
    assert mismatched(connect_libs(CONNECT_34), {**sums, runtime: "0" * 64}) == {runtime: sums[runtime]}
