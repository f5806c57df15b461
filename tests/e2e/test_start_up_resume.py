"""What the operator does when it starts (issue 17): every Connector is reconciled once, drift
made while no operator ran is corrected at once (not a resync period later), and the objects
untouched behind its back are not written.

Each start-up reconcile waits for its worker group's one expanded listing, which Connect builds
in time quadratic in its connectors. kopf's resume handlers only queue them
(connectops.concurrency.queues.Backlog), so kopf's own work for every object goes on while the
listing is computed: here the listing is held 15 s by a proxy in front of the real worker, kopf
gets a single worker (CONNECTOPS_KOPF_WORKERS=1), and every Connector's resume handler must
have returned while the listing is still held. Before the Backlog, the first resume held that
one worker until the listing answered, and the others came after it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from tests.e2e.conftest import ConnectREST, K8s, OperatorProcess, connect_cluster_spec, count_config_writes, wait_for
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.servers import ConnectWorker, KubeAPI

pytestmark = pytest.mark.e2e

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
HOLD_SECONDS = 15.0


def _spec(tmp_path: Path, connector: str) -> dict[str, Any]:
    src = tmp_path / f"{connector}.txt"
    src.write_text("one\n")
    return {
        "clusterRef": {"name": "main"},
        "connectorName": connector,
        "class": SOURCE,
        "tasksMax": 1,
        "state": "paused",
        "config": {"file": str(src), "topic": connector},
    }


def _events(k8s: K8s, name: str, reason: str) -> int:
    """How many times ``reason`` was reported for ``name`` (an Event's count grows on repeats)."""
    return sum(e.count or 1 for e in k8s.events(name) if e.reason == reason)


def test_a_start_corrects_drift_at_once_and_kopf_does_not_wait_for_the_listing(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    k8s = K8s(kube_client, f"start-{suffix}")
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": k8s.ns}))
    rest = ConnectREST(connect)
    names = {role: f"start-{role}-{suffix}" for role in ("config", "state", "still")}
    roles = list(names.values())
    with FaultProxy(connect.url) as proxy:
        k8s.create("connectclusters", "main", {**connect_cluster_spec(connect), "restUrl": proxy.url}, "ConnectCluster")
        for connector in names.values():
            k8s.create("connectors", connector, _spec(tmp_path, connector), "Connector")
        operator = OperatorProcess(kube, k8s.ns, tmp_path)
        try:
            operator.start()
            for connector in names.values():
                k8s.wait_condition("connectors", connector, "Ready", "True", timeout=120)
                wait_for(lambda c=connector: rest.state(c) == "PAUSED", 60, f"{connector} paused")
            operator.stop()

            # behind the stopped operator's back, straight to the worker
            drifted = names["config"]
            live = rest.config(drifted)
            httpx.put(f"{connect.url}/connectors/{drifted}/config", json={**live, "topic": "elsewhere"}, timeout=30)
            httpx.put(f"{connect.url}/connectors/{names['state']}/resume", timeout=30)
            wait_for(lambda: rest.state(names["state"]) == "RUNNING", 60, "resumed by hand")
            writes_before = count_config_writes(connect, names["still"])
            updated, changed = _events(k8s, drifted, "ConfigUpdated"), _events(k8s, names["state"], "StateChanged")

            hold = FaultRule("delay", seconds=HOLD_SECONDS, method="GET", path=r"^/connectors$", times=1)
            held = proxy.add_rule(hold)
            proxy.clear_requests()
            # resync period an hour: whatever is corrected now is the start-up's doing
            operator.start(env={"CONNECTOPS_RESYNC_SECONDS": "3600", "CONNECTOPS_KOPF_WORKERS": "1"})
            wait_for(lambda: held.fired == 1, 60, "the start-up listing asked (and held)")
            wait_for(
                lambda: all(f"[{k8s.ns}/{c}] Handler 'connector_resumed' succeeded" in operator.log() for c in roles),
                HOLD_SECONDS - 1,
                "every Connector's resume handler returned while the listing is held",
            )
            listings = [r for r in proxy.requests if r.method == "GET" and r.path == "/connectors"]
            assert listings == [], "the listing was answered before the resumes returned: the check proved nothing"

            wait_for(lambda: rest.config(drifted).get("topic") == drifted, 60, "config drift corrected at start")
            wait_for(lambda: rest.state(names["state"]) == "PAUSED", 60, "state drift corrected at start")
            # a start-up reconcile is a change's, not a resync's: its Events say what it did
            wait_for(lambda: _events(k8s, drifted, "ConfigUpdated") > updated, 30, "a ConfigUpdated Event")
            wait_for(lambda: _events(k8s, names["state"], "StateChanged") > changed, 30, "a StateChanged Event")
            # the one nobody touched: read from the listing, never written
            assert rest.config(names["still"])["topic"] == names["still"]
            assert rest.state(names["still"]) == "PAUSED"
            assert count_config_writes(connect, names["still"]) == writes_before
            listed = [r for r in proxy.requests if (r.method, r.path) == ("GET", "/connectors") and "expand" in r.query]
            assert len(listed) == 1, [f"{r.method} {r.path}?{r.query}" for r in proxy.requests]
        finally:
            operator.stop()
