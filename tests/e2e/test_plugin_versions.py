"""Plugin versions (KIP-891): two versions of one connector class installed side by side on the
test worker (tests/env/plugins/versioned: the same classes in two jars whose manifests differ,
each in its own plugin.path directory). Pinning one makes that version run, which the worker says
in its own status and the task proves in what it writes (every record carries the version of the
code that produced it); a pin no installed version matches is a condition and one Warning Event,
never a write or a retry loop.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, count_config_writes, wait_for
from tests.env.plugins import VERSIONED_SOURCE, VERSIONED_VERSIONS
from tests.env.records import topic_values
from tests.env.servers import ConnectWorker

PER_START = 3


def one_partition_topic(worker: ConnectWorker) -> str:
    topic = f"versions-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": worker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    return topic


def spec(topic: str, **extra: Any) -> dict[str, Any]:
    return {
        "clusterRef": {"name": "main"},
        "class": VERSIONED_SOURCE,
        "config": {"topic": topic, "records.per.start": PER_START, "interval.ms": 100},
        **extra,
    }


def written(worker: ConnectWorker, topic: str) -> list[tuple[str, str, int]]:
    """(connector, version, seq) of every record the task wrote, in order."""
    out = []
    for value in topic_values(worker.bootstrap, topic, idle=1.0):
        name, version, seq = json.loads(value).split(" ")
        out.append((name, version, int(seq)))
    return out


def written_at_least(worker: ConnectWorker, topic: str, count: int) -> list[tuple[str, str, int]] | None:
    records = written(worker, topic)
    return records if len(records) >= count else None


def written_by(worker: ConnectWorker, topic: str, version: str) -> list[tuple[str, str, int]] | None:
    """Every record, once one of them was written by ``version``'s code."""
    records = written(worker, topic)
    return records if any(v == version for _, v, _ in records) else None


def worker_reports(rest: ConnectREST, name: str) -> tuple[str | None, list[str | None]] | None:
    """The version Connect itself reports running, for the connector and each task (None until
    the connector and its task run)."""
    status = rest.status(name)
    tasks = status.get("tasks") or []
    if status["connector"]["state"] != "RUNNING" or not tasks or any(t["state"] != "RUNNING" for t in tasks):
        return None
    return status["connector"].get("version"), [t.get("version") for t in tasks]


def test_each_pinned_version_runs_and_an_unknown_one_is_a_condition(
    k8s: K8s, connect: ConnectWorker, caplog: pytest.LogCaptureFixture
) -> None:
    assert VERSIONED_VERSIONS == ("1.0.0", "2.0.0")
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    rest = ConnectREST(connect)
    name = f"versioned-{uuid.uuid4().hex[:6]}"
    topic = one_partition_topic(connect)

    # pinned to 1.0.0 although 2.0.0 (the default, the newest) is installed next to it
    k8s.create("connectors", name, spec(topic, pluginVersion="1.0.0"), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=90)
    assert wait_for(lambda: worker_reports(rest, name), 60, f"{name} running") == ("1.0.0", ["1.0.0"])
    first = wait_for(lambda: written_at_least(connect, topic, PER_START), 60, "1.0.0's records")
    assert first[:PER_START] == [(name, "1.0.0", seq) for seq in range(1, PER_START + 1)]
    assert {version for _, version, _ in first} == {"1.0.0"}
    status = k8s.get("connectors", name)["status"]
    assert status["connectorVersion"] == "1.0.0"
    assert [t["version"] for t in status["tasks"]] == ["1.0.0"]

    # an exact pin of the other version: the worker restarts the connector on 2.0.0's code
    k8s.patch_spec("connectors", name, {"pluginVersion": "2.0.0"})
    assert wait_for(lambda: worker_reports(rest, name) == ("2.0.0", ["2.0.0"]), 90, f"{name} on 2.0.0")
    both = wait_for(lambda: written_by(connect, topic, "2.0.0"), 60, "2.0.0's records")
    switch = next(i for i, (_, version, _) in enumerate(both) if version == "2.0.0")
    # 1.0.0's code wrote everything before the switch and nothing after it
    assert {version for _, version, _ in both[:switch]} == {"1.0.0"}
    assert {version for _, version, _ in both[switch:]} == {"2.0.0"}
    # and 2.0.0's task went on from the offsets 1.0.0's committed: the same connector, another version
    assert both[switch][2] > PER_START

    def operator_shows(version: str) -> bool:
        st = k8s.get("connectors", name).get("status") or {}
        return st.get("connectorVersion") == version and [t.get("version") for t in st.get("tasks") or []] == [version]

    wait_for(lambda: operator_shows("2.0.0"), 60, "status.connectorVersion 2.0.0")
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=60)

    # a range nothing installed matches: a condition and one Event; the worker keeps running 2.0.0
    writes_before = count_config_writes(connect, name)
    k8s.patch_spec("connectors", name, {"pluginVersion": "[3.0,)"})
    valid = k8s.wait_condition("connectors", name, "Valid", "False", "PluginVersionNotFound", timeout=60)
    assert f"connector.plugin.version=[3.0,): no installed version of {VERSIONED_SOURCE} matches" in valid["message"]
    assert "(installed: 2.0.0, 1.0.0)" in valid["message"]
    assert k8s.condition("connectors", name, "Ready")["reason"] == "PluginVersionNotFound"
    time.sleep(8)  # a few resyncs (every 3 s in these tests) and a plugin-list refresh (5 s)
    warnings = [e for e in k8s.events(name) if e.type == "Warning"]
    assert [(e.reason, e.count or 1) for e in warnings] == [("PluginVersionNotFound", 1)]
    assert "(installed: 2.0.0, 1.0.0)" in warnings[0].message
    assert count_config_writes(connect, name) == writes_before
    assert rest.config(name)["connector.plugin.version"] == "2.0.0"
    assert worker_reports(rest, name) == ("2.0.0", ["2.0.0"])
    assert k8s.get("connectors", name)["status"]["connectorVersion"] == "2.0.0"
    # kopf's object logger carries the object in the record's extras, not in the message
    retries = [r for r in caplog.records if "failed temporarily" in r.getMessage() and name in str(vars(r))]
    assert not retries, [r.getMessage() for r in retries]

    # fixed: a range inside the installed versions applies again, back to 1.0.0
    k8s.patch_spec("connectors", name, {"pluginVersion": "[1.0,2.0)"})
    assert wait_for(lambda: worker_reports(rest, name) == ("1.0.0", ["1.0.0"]), 90, f"{name} back on 1.0.0")
    k8s.wait_condition("connectors", name, "Valid", "True", timeout=60)
    wait_for(lambda: operator_shows("1.0.0"), 60, "status.connectorVersion 1.0.0")


def test_a_new_connector_with_an_unknown_version_is_never_created(k8s: K8s, connect: ConnectWorker) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    rest = ConnectREST(connect)
    name = f"unpinnable-{uuid.uuid4().hex[:6]}"
    # a bare version is exact for Connect: 1.5 is neither 1.0.0 nor 2.0.0
    k8s.create("connectors", name, spec(one_partition_topic(connect), pluginVersion="1.5"), "Connector")
    synced = k8s.wait_condition("connectors", name, "Synced", "False", "PluginVersionNotFound", timeout=60)
    assert "no installed version matches" in synced["message"]
    time.sleep(4)
    assert not rest.exists(name)
    assert [e.reason for e in k8s.events(name) if e.type == "Warning"] == ["PluginVersionNotFound"]
