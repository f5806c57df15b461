"""Worker health (KIP-1017): the ConnectCluster shows what the worker's GET /health says, and a
worker that says it is starting makes Connectors wait (Ready=False WorkerStarting, no Warning)
instead of failing them.

The real 4.3 worker answers "healthy". Its "starting" answer only lasts the seconds of a worker
start, too short to catch reliably, so it is injected in front of the real worker by the fault
proxy with KIP-1017's shape (503 {"status": "starting", "message": ...}), while every other call
gets the 503 an unavailable worker gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.servers import ConnectWorker

pytestmark = pytest.mark.e2e

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STARTING = {"status": "starting", "message": "Worker is still starting up."}


@pytest.fixture
def proxy(connect: ConnectWorker) -> Iterator[FaultProxy]:
    with FaultProxy(connect.url) as p:
        yield p


def test_cluster_shows_health_and_connectors_wait_for_a_starting_worker(
    k8s: K8s, connect: ConnectWorker, proxy: FaultProxy, tmp_path: Path
) -> None:
    k8s.create("connectclusters", "main", {**connect_cluster_spec(connect), "restUrl": proxy.url}, "ConnectCluster")
    healthy = k8s.wait_condition("connectclusters", "main", "WorkerHealthy", "True", "Healthy", timeout=60)
    assert "completed startup" in healthy["message"]  # the worker's own words
    assert k8s.get("connectclusters", "main")["status"]["workerHealth"]["status"] == "healthy"

    name = f"wait-{uuid.uuid4().hex[:6]}"
    proxy.set_rules(
        [
            FaultRule("status", path=r"^/health$", status_code=503, body=STARTING),
            FaultRule.status(503, "Service Unavailable", path=r"^/(connectors|connector-plugins)"),
        ]
    )
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": "main"}, "class": SINK, "config": {"topics": name, "file": str(tmp_path / "o")}},
        "Connector",
    )
    waiting = k8s.wait_condition("connectors", name, "Ready", "False", "WorkerStarting", timeout=60)
    assert "Worker is still starting up." in waiting["message"]
    k8s.wait_condition("connectclusters", "main", "WorkerHealthy", "False", "Starting", timeout=60)
    rest = ConnectREST(connect)
    assert not rest.exists(name)  # nothing was half-applied while it waited
    warnings = [e for e in k8s.events(name) if e.type == "Warning"]
    assert warnings == [], [(e.reason, e.message) for e in warnings]

    proxy.clear_rules()  # the worker finished starting
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=120)
    wait_for(lambda: rest.exists(name), 30, f"{name} created")
    k8s.wait_condition("connectclusters", "main", "WorkerHealthy", "True", "Healthy", timeout=90)
