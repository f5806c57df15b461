"""One lock per real connector across namespaces (issue 13, finding 3): two namespaces, each with
its own ConnectCluster for the same Connect worker, reset the same connector that no Connector
object manages. With the lock namespace the chart sets (the operator's own), both resets meet at
one Lease there: one runs, the other fails at its lock step without changing anything.

The truth is read from the worker and the broker, not from the operator's status: the source's
output topic holds its lines exactly twice (the original copy and ONE replay; two resets would
replay twice), Connect's offsets are at the end of the file again, a bystander connector on the
same worker kept its offsets and output, and no Lease was ever written in a tenant's namespace.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from connectops.failpoints import EXIT_CODE
from tests.e2e.conftest import ConnectREST, K8s, OperatorProcess, connect_cluster_spec, topic_record_count, wait_for
from tests.e2e.test_offset_truth_source import raw_records
from tests.e2e.test_offsets_on_create import one_partition_topic, produced
from tests.env.servers import ConnectWorker, KubeAPI

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
LINES = ["north", "south", "east", "west", "up"]


def _source(rest: ConnectREST, tmp_path: Path, tag: str) -> tuple[str, str, Path]:
    """A FileStreamSource created directly on the worker (unmanaged), into a one-partition topic
    (its order is the order the lines were read)."""
    name, topic = f"x-{tag}-{uuid.uuid4().hex[:6]}", one_partition_topic(rest.worker)
    src = tmp_path / f"{tag}.txt"
    src.write_text("".join(f"{line}\n" for line in LINES))
    config = {"connector.class": SOURCE, "tasks.max": "1", "file": str(src), "topic": topic}
    rest.http.put(rest.path(name) + "/config", json=config).raise_for_status()
    return name, topic, src


def _leases(api: Any, namespace: str) -> list[Any]:
    return list(kubernetes.client.CoordinationV1Api(api).list_namespaced_lease(namespace).items)


def _terminal(k8s: K8s) -> dict[str, Any] | None:
    status = k8s.get("offsetresets", "r").get("status") or {}
    return status if status.get("phase") in ("Succeeded", "Failed") else None


@pytest.mark.timeout(600)
def test_two_namespaces_resetting_one_unmanaged_connector_take_turns(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    core = kubernetes.client.CoreV1Api(kube_client)
    tenants = {t: K8s(kube_client, f"xns-{suffix}-{t}") for t in ("a", "b")}
    locks = f"locks-{suffix}"
    for namespace in [*(k.ns for k in tenants.values()), locks]:
        core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": namespace}))
    rest = ConnectREST(connect)
    name, topic, src = _source(rest, tmp_path, "target")
    bystander, bystander_topic, _ = _source(rest, tmp_path, "bystander")
    for connector, out in ((name, topic), (bystander, bystander_topic)):
        wait_for(lambda out=out: topic_record_count(connect.bootstrap, out) == len(LINES), 60, f"{out} copied")
        wait_for(lambda c=connector: rest.http.get(rest.path(c) + "/offsets").json()["offsets"], 60, "offsets")
    bystander_offsets = rest.http.get(rest.path(bystander) + "/offsets").json()
    bystander_records = raw_records(connect, bystander)  # its offsets-topic records, as stored
    for k8s in tenants.values():
        k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    reset = {"clusterRef": {"name": "main"}, "connectorName": name, "action": "reset"}

    operator = OperatorProcess(kube, f"xns-{suffix}-*", tmp_path)
    settings = {"CONNECTOPS_LOCK_NAMESPACE": locks}
    try:
        # a's reset takes the lock, then its operator dies: the lock is held, deterministically
        operator.start(failpoint="lock:done", env=settings)
        tenants["a"].create("offsetresets", "r", reset, "OffsetReset")
        assert operator.wait_exit(120) == EXIT_CODE, operator.log_tail()
        [lease] = _leases(kube_client, locks)
        assert lease.spec.holder_identity.startswith(f"connectops.io/offsetreset/{tenants['a'].ns}/r/")
        assert lease.metadata.owner_references is None  # an owner in another namespace: collected at once

        tenants["b"].create("offsetresets", "r", reset, "OffsetReset")
        operator.start(env=settings)
        done = {t: wait_for(lambda k=k: _terminal(k), 180, f"{t}'s reset to end") for t, k in tenants.items()}
    finally:
        operator.stop()

    assert done["a"]["phase"] == "Succeeded", done["a"]
    assert done["b"]["phase"] == "Failed", done["b"]
    b_steps = {s["name"]: s["state"] for s in done["b"]["steps"]}
    assert b_steps["lock"] == "Failed"
    assert [s for s, state in b_steps.items() if state not in ("Pending", "Failed")] == []  # nothing else ran
    cond = next(c for c in done["b"]["conditions"] if c["type"] == "Succeeded")
    assert "an OffsetReset in another namespace" in cond["message"]
    assert tenants["a"].ns not in str(done["b"])  # the other tenant is not named
    b_maps = core.list_namespaced_config_map(tenants["b"].ns).items
    assert not [cm.metadata.name for cm in b_maps if cm.metadata.name.startswith("connectops-backup-")]

    # the broker: the lines once, then ONE replay; Connect: at the end of the file again
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) >= 2 * len(LINES), 60, "replayed")
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "running")
    size = src.stat().st_size
    wait_for(
        lambda: (
            [o["offset"] for o in rest.http.get(rest.path(name) + "/offsets").json()["offsets"]] == [{"position": size}]
        ),
        60,
        "offsets at the end of the file",
    )
    assert produced(connect, topic) == LINES + LINES
    # the bystander: untouched, on the worker and on the broker
    assert rest.http.get(rest.path(bystander) + "/offsets").json() == bystander_offsets
    assert raw_records(connect, bystander) == bystander_records
    assert produced(connect, bystander_topic) == LINES
    # the lock lived only in the lock namespace, and is gone
    assert _leases(kube_client, locks) == []
    for k8s in tenants.values():
        assert _leases(kube_client, k8s.ns) == []
    for connector in (name, bystander):
        rest.http.delete(rest.path(connector))
