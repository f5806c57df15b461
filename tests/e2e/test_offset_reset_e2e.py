"""OffsetReset end to end: real API server, real Connect worker, real broker (Apache Kafka)."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import (
    ConnectREST,
    K8s,
    connect_cluster_spec,
    topic_record_count,
    wait_for,
)
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
LINES = ["alpha", "bravo", "charlie", "delta", "echo"]


@pytest.fixture
def cluster(k8s: K8s, connect: ConnectWorker) -> str:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    return "main"


def make_source(k8s: K8s, tmp_path: Path, cluster: str, connect: ConnectWorker) -> tuple[str, str]:
    """A running FileStreamSource that has copied LINES into its topic and committed offsets."""
    name = f"src-{uuid.uuid4().hex[:6]}"
    topic = f"lines-{uuid.uuid4().hex[:6]}"
    src = tmp_path / f"{name}.txt"
    src.write_text("".join(line + "\n" for line in LINES))
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": cluster}, "class": SOURCE, "config": {"file": str(src), "topic": topic}},
        "Connector",
    )
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == len(LINES), 60, "lines copied")
    rest = ConnectREST(connect)
    wait_for(lambda: rest.http.get(rest.path(name) + "/offsets").json()["offsets"], 60, "offsets committed")
    return name, topic


def reset(k8s: K8s, name: str, spec: dict[str, Any], phase: str = "Succeeded", timeout: float = 120) -> dict[str, Any]:
    k8s.create("offsetresets", name, spec, "OffsetReset")

    def done() -> dict[str, Any] | None:
        status = k8s.get("offsetresets", name).get("status") or {}
        return status if status.get("phase") in ("Succeeded", "Failed", "Planned") else None

    status: dict[str, Any] = wait_for(done, timeout, f"OffsetReset {name} to finish")
    assert status["phase"] == phase, json.dumps(status, indent=1)[:3000]
    return status


def offsets(rest: ConnectREST, name: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = rest.http.get(rest.path(name) + "/offsets", timeout=30).json()["offsets"]
    return result


def backup_doc(k8s: K8s, cm: str, *, operators: bool = True) -> dict[str, Any]:
    """A backup's document; ``operators``: one this operator wrote, which no one, the Spark
    check's identity included, can rewrite (an earlier version's, or a hand-made one, is not)."""
    read = kubernetes.client.CoreV1Api(k8s.core.api_client).read_namespaced_config_map(cm, k8s.ns)
    if operators:
        assert read.immutable is True, read.metadata
    doc: dict[str, Any] = json.loads(read.data["backup.json"])
    return doc


def test_source_reset_rest_rereads_from_start(k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker) -> None:
    from prometheus_client import REGISTRY

    def succeeded() -> float:
        labels = {"action": "reset", "strategy": "rest", "phase": "Succeeded"}
        return REGISTRY.get_sample_value("connectops_offset_resets_total", labels) or 0.0

    rest = ConnectREST(connect)
    name, topic = make_source(k8s, tmp_path, cluster, connect)
    before = offsets(rest, name)
    counted = succeeded()
    status = reset(k8s, "r1", {"connectorRef": {"name": name}, "action": "reset"})
    # the operator runs in this process: its Prometheus registry too. The counter counts a final
    # phase once the write of it landed, so it can follow the phase a watcher reads by a moment
    wait_for(lambda: succeeded() > counted, 10, "the reset counted")
    assert succeeded() == counted + 1
    assert status["strategy"] == "rest"
    assert [s["state"] for s in status["steps"]] == [
        "Done",
        "Done",
        "Done",
        "Done",
        "Done",
        "Skipped",
        "Done",
        "Done",
        "Done",
    ]
    assert [s["name"] for s in status["steps"]] == [
        "lock",
        "inspect",
        "stop",
        "backup",
        "reset",
        "offsetSyncs",
        "resume",
        "verify",
        "unlock",
    ]
    # the source re-read its file from the start: every line is in the topic twice
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES), 60, "re-read")
    assert rest.state(name) == "RUNNING"
    # the backup holds exactly the offsets from before the reset
    doc = backup_doc(k8s, status["backup"]["configMap"])
    assert doc["connectors"][name]["offsets"] == before
    reasons = {e.reason for e in k8s.events("r1")}
    assert {"StepBackup", "StepStop", "StepReset", "StepResume"} <= reasons
    # the Connector object is back to Ready (the lock is gone)
    k8s.wait_condition("connectors", name, "Ready", "True")


def test_source_alter_and_restore(k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker) -> None:
    rest = ConnectREST(connect)
    name, topic = make_source(k8s, tmp_path, cluster, connect)
    before = offsets(rest, name)
    partition = before[0]["partition"]
    # FileStreamSource offsets are byte positions: skip the first three lines
    position = sum(len(line) + 1 for line in LINES[:3])
    status = reset(
        k8s,
        "alter",
        {
            "connectorRef": {"name": name},
            "action": "alter",
            "offsets": [{"partition": partition, "offset": {"position": position}}],
        },
    )
    assert "applied" in next(s for s in status["steps"] if s["name"] == "reset")["message"]
    wait_for(
        lambda: topic_record_count(connect.bootstrap, topic) == len(LINES) + 2,
        60,
        "the last two lines re-read",
    )

    restore = reset(
        k8s,
        "restore",
        {"connectorRef": {"name": name}, "action": "restore", "restoreFrom": status["backup"]["configMap"]},
    )
    assert restore["backup"]["configMap"] != status["backup"]["configMap"]  # restore backs up too
    # restored to the end of the file: nothing more is read
    wait_for(lambda: offsets(rest, name) == before, 60, "offsets restored")
    assert topic_record_count(connect.bootstrap, topic) == len(LINES) + 2


def test_dry_run_changes_nothing(k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker) -> None:
    rest = ConnectREST(connect)
    name, topic = make_source(k8s, tmp_path, cluster, connect)
    before = offsets(rest, name)
    status = reset(k8s, "dry", {"connectorRef": {"name": name}, "action": "reset", "dryRun": True}, phase="Planned")
    assert status["plan"]["strategy"] == "rest"
    assert status["plan"]["current"][name] == before
    assert status["plan"]["currentAsOf"] == "lastCommit"
    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert "may trail its position by up to the flush interval (offset.flush.interval.ms, 60 s)" in cond["message"]
    assert "backup" not in status
    assert rest.state(name) == "RUNNING"
    assert offsets(rest, name) == before
    assert topic_record_count(connect.bootstrap, topic) == len(LINES)


def test_finished_reset_is_immutable(k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker) -> None:
    name, topic = make_source(k8s, tmp_path, cluster, connect)
    reset(k8s, "once", {"connectorRef": {"name": name}, "action": "reset", "dryRun": True}, phase="Planned")
    # refused at admission (the CRD's transition rule); the operator's SpecChangeIgnored, for
    # servers without the rule, is tested in tests/reconcilers/test_reset_reconciler.py
    with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
        k8s.patch_spec("offsetresets", "once", {"dryRun": False})
    assert refused.value.status == 422
    assert "its spec cannot change: create a new OffsetReset" in str(refused.value.body)
    stored = k8s.get("offsetresets", "once")
    assert stored["spec"]["dryRun"] is True
    status = stored["status"]
    assert status["phase"] == "Planned"
    assert topic_record_count(connect.bootstrap, topic) == len(LINES)


def test_sink_reset_and_alter(k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker) -> None:
    rest = ConnectREST(connect)
    _, topic = make_source(k8s, tmp_path, cluster, connect)
    name = f"sink-{uuid.uuid4().hex[:6]}"
    out = tmp_path / f"{name}.out"
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": cluster}, "class": SINK, "config": {"file": str(out), "topics": topic}},
        "Connector",
    )
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: out.exists() and out.read_text().count("\n") == len(LINES), 90, "sink wrote lines")

    def committed() -> int:
        return sum(e["offset"]["kafka_offset"] for e in offsets(rest, name))

    wait_for(lambda: committed() == len(LINES), 60, "sink offsets committed")
    status = reset(
        k8s,
        "sink-alter",
        {
            "connectorRef": {"name": name},
            "action": "alter",
            "offsets": [{"partition": e["partition"], "offset": {"kafka_offset": 0}} for e in offsets(rest, name)],
        },
    )
    assert status["connectorKind"] == "sink"
    wait_for(lambda: out.read_text().count("\n") == 2 * len(LINES), 90, "sink re-consumed everything")
    reset(k8s, "sink-reset", {"connectorRef": {"name": name}, "action": "reset"})
    # no committed offsets: the sink starts from earliest again (Connect's default for sinks)
    wait_for(lambda: out.read_text().count("\n") == 3 * len(LINES), 90, "sink re-consumed again")
    latest = reset(k8s, "sink-latest", {"connectorRef": {"name": name}, "action": "toLatest"})
    assert latest["plan"]["entries"][name]


def assert_tombstoned_after(bootstrap: str, topic: str, before: list[Any]) -> None:
    """Each key of ``before`` has a tombstone after its record there, in the same partition, in
    the offsets topic's whole history as the broker holds it now (read by a plain consumer).

    Not "the latest record is a tombstone": the reset resumes the connector before it reports
    Succeeded, and a resumed source commits fresh offsets (from the start of its input) at once, so
    the latest record may already be a new one. Nor the latest per key that the operator's scan
    returns: for the same reason it may be the new record, with the tombstone before it. The
    tombstone's place after the old record, in the partition the key was read from, is what the
    reset owes.
    """
    from tests.env.records import records_up_to_now

    history = records_up_to_now(bootstrap, topic)
    for old in before:
        later = [m for m in history if m.key() == old.key and m.offset() > old.offset]
        assert later, f"nothing written after offset {old.offset} for {old.key!r}"
        assert all(m.partition() == old.partition for m in later)
        assert any(m.value() is None for m in later), f"no tombstone after offset {old.offset} for {old.key!r}"


def test_tombstone_reset_lands_in_the_keys_partitions(
    k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker
) -> None:
    from connectops.adapters.kafka import KafkaOffsets, java_partition

    assert connect.offset_partitions == 25
    name, topic = make_source(k8s, tmp_path, cluster, connect)
    kafka = KafkaOffsets(connect.bootstrap)
    live = [r for r in kafka.read_connector_offsets(connect.offset_topic, {name}) if r.value is not None]
    assert live
    for record in live:
        assert record.partition == java_partition(record.key, 25)
    status = reset(k8s, "tomb", {"connectorRef": {"name": name}, "action": "reset", "strategy": "tombstone"})
    assert status["strategy"] == "tombstone"
    doc = backup_doc(k8s, status["backup"]["configMap"])
    saved = doc["connectors"][name]["records"]
    assert {base64.b64decode(r["key"]) for r in saved} == {r.key for r in live}
    # every key got a tombstone after its last record, in the partition the key was read from
    latest = {r.key: r for r in live}
    assert_tombstoned_after(connect.bootstrap, connect.offset_topic, list(latest.values()))
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES), 60, "re-read")


def test_lock_keeps_connector_stopped(
    k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker, kube_client: Any
) -> None:
    """The seam both sides honour: while a reset holds the lock, the Connector reconciler does not
    resume a connector it finds stopped, even though its spec says running."""
    import asyncio

    from connectops.adapters.kube import KubeClient

    rest = ConnectREST(connect)
    name, _ = make_source(k8s, tmp_path, cluster, connect)
    kube = KubeClient(kube_client)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": str(uuid.uuid4())}
    asyncio.run(kube.acquire_lock(k8s.ns, cluster, name, "test-holder", owner))
    rest.http.put(rest.path(name) + "/stop").raise_for_status()
    k8s.wait_condition("connectors", name, "Synced", "False", reason="OffsetResetInProgress")
    import time

    time.sleep(7)  # two resyncs
    assert rest.state(name) == "STOPPED"
    asyncio.run(kube.release_lock(k8s.ns, cluster, name, "test-holder"))
    wait_for(lambda: rest.state(name) == "RUNNING", 30, "resumed after unlock")
    k8s.wait_condition("connectors", name, "Ready", "True")


def test_connector_deletion_waits_for_the_reset_holding_it(
    k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker, kube_client: Any
) -> None:
    """Deleting a Connector while a reset holds its connector does not pull the connector from
    under the reset: the deletion waits (finalizer kept, connector kept) until the lock is gone."""
    import asyncio
    import time

    from connectops.adapters.kube import KubeClient
    from connectops.reconcilers.offset_reset import lock_holder

    rest = ConnectREST(connect)
    name, _ = make_source(k8s, tmp_path, cluster, connect)
    kube = KubeClient(kube_client)
    holder = lock_holder(k8s.ns, "mid-reset", str(uuid.uuid4()))
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": str(uuid.uuid4())}
    asyncio.run(kube.acquire_lock(k8s.ns, cluster, name, holder, owner))
    k8s.delete("connectors", name)
    time.sleep(8)  # several retries of the deletion
    assert k8s.exists("connectors", name)
    assert rest.exists(name)
    asyncio.run(kube.release_lock(k8s.ns, cluster, name, holder))
    wait_for(lambda: not k8s.exists("connectors", name), 60, "Connector deleted after the lock went")
    assert not rest.exists(name)
