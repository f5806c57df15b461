"""A source connector with 20,000 source partitions, reset, altered (1,000 inline; all 20,000
in one reset from ConfigMaps, offsetsFrom) and restored on both
strategies (rest: KIP-875 calls; tombstone: records in the workers' offsets topic), one run
killed mid-reset (SIGKILL after its offsets were changed, before that was recorded) and
resumed by a new operator process. Status stays bounded: its size, read from the API server,
is printed and held under models.bounds.STATUS_MAX_BYTES; the backup and the plan's entries
live in ConfigMaps.

The 20,000 partitions are Connect's own FileStreamSource's: its ``alterOffsets`` takes any
``{filename}`` partition with a ``{position}`` offset (it checks the shape, not the file), so a
PATCH while it is stopped gives it 20,000 source partitions in the offsets topic, with no
topic partitions needed. Truth comes from the worker's GET /offsets and from the offsets topic
itself, compared with an expectation computed here from what was seeded.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from connectops.adapters.kafka import KafkaOffsets
from connectops.models.bounds import STATUS_MAX_BYTES
from connectops.models.offset_reset import ALTER_MAX_ENTRIES
from tests.e2e.conftest import ConnectREST, K8s, OperatorProcess, connect_cluster_spec, wait_for
from tests.env.servers import ConnectWorker, KubeAPI

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
PARTITIONS = 20_000
#: Popen's return code of a process killed by SIGKILL (the failpoint's ":kill")
SIGKILL_EXIT = -9


@pytest.fixture
def env(kube: KubeAPI, kube_client: Any, crds: None, tmp_path: Path) -> Iterator[tuple[K8s, OperatorProcess]]:
    ns = f"many-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    operator = OperatorProcess(kube, ns, tmp_path)
    yield K8s(kube_client, ns), operator
    operator.stop()


def key(entry: dict[str, Any]) -> str:
    return json.dumps(entry["partition"], sort_keys=True)


def as_map(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {key(e): e["offset"] for e in entries if e.get("offset") is not None}


def connect_offsets(rest: ConnectREST, name: str) -> dict[str, Any]:
    """GET /offsets straight from the worker. Connect answers 500 when it cannot read its
    offsets topic to the end in time (seen once, right after 20,000 offsets were written, on a
    loaded machine): asked again until it answers."""

    def answered() -> tuple[dict[str, Any]] | None:
        response = rest.http.get(rest.path(name) + "/offsets", timeout=60)
        if response.status_code >= 500:
            return None
        response.raise_for_status()
        return (as_map(response.json()["offsets"]),)  # truthy even when there are none

    result: tuple[dict[str, Any]] = wait_for(answered, 90, f"{name}'s offsets from Connect")
    return result[0]


def topic_offsets(worker: ConnectWorker, name: str) -> dict[str, Any]:
    """The connector's offsets as its offsets topic holds them: the latest value of each key."""
    latest: dict[bytes, Any] = {}
    for record in KafkaOffsets(worker.bootstrap).read_connector_offsets(worker.offset_topic, {name}):
        latest[record.key] = record
    return {
        json.dumps(r.partition_map, sort_keys=True): r.source_offset()
        for r in latest.values()
        if r.value is not None and r.partition_map is not None
    }


def run_reset(k8s: K8s, name: str, spec: dict[str, Any], *, timeout: float = 240) -> tuple[dict[str, Any], float]:
    """Create an OffsetReset and wait for its outcome: its status and how long it took."""
    started = time.monotonic()
    k8s.create("offsetresets", name, spec, "OffsetReset")
    k8s.wait_condition("offsetresets", name, "Succeeded", "True", timeout=timeout)
    return k8s.get("offsetresets", name)["status"], time.monotonic() - started


def status_bytes(status: dict[str, Any]) -> int:
    return len(json.dumps(status, separators=(",", ":")))


def test_20000_source_partitions_on_both_strategies_with_a_kill_mid_reset(
    env: tuple[K8s, OperatorProcess], connect: ConnectWorker, tmp_path: Path
) -> None:
    k8s, operator = env
    rest = ConnectREST(connect)
    name = f"many-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\n")
    config = {"connector.class": SOURCE, "file": str(src), "topic": f"{name}-out", "tasks.max": "1"}
    rest.http.put(rest.path(name) + "/config", json=config).raise_for_status()
    wait_for(lambda: connect_offsets(rest, name) != {}, 60, f"{name} committed its own file's position")
    rest.http.put(rest.path(name) + "/stop").raise_for_status()
    wait_for(lambda: rest.state(name) == "STOPPED", 60, f"{name} stopped")
    seeded = [{"partition": {"filename": f"/seeded/{i:05d}.txt"}, "offset": {"position": i}} for i in range(PARTITIONS)]
    rest.http.patch(rest.path(name) + "/offsets", json={"offsets": seeded}, timeout=120).raise_for_status()
    rest.http.put(rest.path(name) + "/resume").raise_for_status()
    wait_for(lambda: rest.state(name) == "RUNNING", 60, f"{name} running")
    # Connect lists a source's partitions from what its offsets-topic reader has consumed so far
    # (not read to the end first): 20,000 just written can take it seconds on a loaded machine
    wait_for(lambda: len(connect_offsets(rest, name)) == PARTITIONS + 1, 120, f"{name} listing every partition")
    before = connect_offsets(rest, name)
    assert len(before) == PARTITIONS + 1  # its own file, and the seeded ones
    assert topic_offsets(connect, name) == before
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    target = {"connectorName": name, "clusterRef": {"name": "main"}}
    sizes: dict[str, int] = {}
    took: dict[str, float] = {}

    # -- tombstone alter of the most one alter takes, killed after its change, resumed --------
    first = [
        {"partition": {"filename": f"/seeded/{i:05d}.txt"}, "offset": {"position": 10 * i + 7}}
        for i in range(ALTER_MAX_ENTRIES)
    ]
    operator.start(failpoint="reset:effects:kill")
    k8s.create(
        "offsetresets",
        "alter-t",
        {**target, "action": "alter", "strategy": "tombstone", "offsets": first},
        "OffsetReset",
    )
    assert operator.wait_exit(240) == SIGKILL_EXIT, operator.log_tail()
    killed = k8s.get("offsetresets", "alter-t")["status"]
    assert next(s for s in killed["steps"] if s["name"] == "reset")["state"] == "Running"
    assert rest.state(name) == "STOPPED"
    operator.start()
    k8s.wait_condition("offsetresets", "alter-t", "Succeeded", "True", timeout=240)
    status = k8s.get("offsetresets", "alter-t")["status"]
    sizes["tombstone alter (killed, resumed)"] = status_bytes(status)
    expected = {**before, **as_map(first)}
    assert topic_offsets(connect, name) == expected
    wait_for(lambda: connect_offsets(rest, name) == expected, 60, "Connect's offsets as altered")
    assert status["plan"]["entryCounts"] == {name: ALTER_MAX_ENTRIES}
    assert status["plan"]["entriesConfigMap"]

    # -- rest alter of every seeded partition in one reset, its entries in two ConfigMaps ------
    # (offsetsFrom: half as JSON in data, half gzip-compressed in binaryData), past what an
    # inline list may hold
    second = [
        {"partition": {"filename": f"/seeded/{i:05d}.txt"}, "offset": {"position": 3 * i}} for i in range(PARTITIONS)
    ]
    half = PARTITIONS // 2
    core = kubernetes.client.CoreV1Api(k8s.core.api_client)
    core.create_namespaced_config_map(
        k8s.ns,
        kubernetes.client.V1ConfigMap(metadata={"name": "alter-a"}, data={"offsets.json": json.dumps(second[:half])}),
    )
    packed = base64.b64encode(gzip.compress(json.dumps(second[half:]).encode())).decode()
    core.create_namespaced_config_map(
        k8s.ns, kubernetes.client.V1ConfigMap(metadata={"name": "alter-b"}, binary_data={"offsets.json.gz": packed})
    )
    from_config_maps = [{"name": "alter-a"}, {"name": "alter-b", "key": "offsets.json.gz"}]
    status, took["rest alter (offsetsFrom)"] = run_reset(
        k8s, "alter-r", {**target, "action": "alter", "strategy": "rest", "offsetsFrom": from_config_maps}
    )
    sizes["rest alter (offsetsFrom)"] = status_bytes(status)
    assert status["plan"]["entryCounts"] == {name: PARTITIONS}
    expected = {**expected, **as_map(second)}
    assert connect_offsets(rest, name) == expected
    assert topic_offsets(connect, name) == expected

    # -- tombstone reset of all of them, then a rest restore of its backup --------------------
    status, took["tombstone reset"] = run_reset(k8s, "reset-t", {**target, "action": "reset", "strategy": "tombstone"})
    sizes["tombstone reset"] = status_bytes(status)
    assert status["backup"]["offsets"] == PARTITIONS + 1
    backup = status["backup"]["configMap"]
    # the connector ran again after the reset: at most its own file's position is back
    assert set(connect_offsets(rest, name)) <= {key({"partition": {"filename": str(src)}})}
    assert set(topic_offsets(connect, name)) <= {key({"partition": {"filename": str(src)}})}

    status, took["rest restore"] = run_reset(
        k8s, "restore-r", {**target, "action": "restore", "strategy": "rest", "restoreFrom": backup}
    )
    sizes["rest restore"] = status_bytes(status)
    assert connect_offsets(rest, name) == expected
    assert topic_offsets(connect, name) == expected

    # -- rest reset of all of them ------------------------------------------------------------
    status, took["rest reset"] = run_reset(k8s, "reset-r", {**target, "action": "reset", "strategy": "rest"})
    sizes["rest reset"] = status_bytes(status)
    assert status["backup"]["offsets"] == PARTITIONS + 1
    assert set(connect_offsets(rest, name)) <= {key({"partition": {"filename": str(src)}})}

    print(f"\nstatus bytes at {PARTITIONS} partitions: {sizes}; seconds: { {k: round(v, 1) for k, v in took.items()} }")
    assert max(sizes.values()) < STATUS_MAX_BYTES
