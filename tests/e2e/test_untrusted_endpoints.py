"""A ``restUrl`` is a request the operator makes on a user's behalf: whatever answers there is not
trusted to be Kafka Connect, and nothing it says is copied where others can read it (issue 13,
finding 11). The "other service" is the fault proxy answering every path itself, in front of the
real worker (which it never reaches), so the test drives the real operator on the real API server.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ConnectREST, K8s, wait_for
from tests.e2e.test_connector_e2e import source_spec
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.servers import ConnectWorker


def _everything_said(k8s: K8s, names: list[str]) -> str:
    """Every status and Event message of these objects, as a reader of the namespace sees them."""
    said = [str(k8s.get(plural, name).get("status")) for plural, name in names_by_plural(names)]
    said += [f"{e.reason} {e.message}" for _, name in names_by_plural(names) for e in k8s.events(name)]
    return "\n".join(said)


def names_by_plural(names: list[str]) -> list[tuple[str, str]]:
    return [("connectclusters" if n.startswith("cc-") else "connectors", n) for n in names]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"status": 200, "body": {"status": "ok", "items": []}}, id="wrong-shaped-json"),
        pytest.param({"status": 500, "body": {"detail": "MARKER"}}, id="500-with-a-secret-body"),
    ],
)
def test_a_rest_url_that_is_not_connect(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: dict[str, Any]
) -> None:
    marker = f"hunter2-{uuid.uuid4().hex}"
    body = {k: (marker if v == "MARKER" else v) for k, v in answer["body"].items()}
    with FaultProxy(connect.url) as other:
        # a service that answers every request itself, with its own JSON
        other.add_rule(FaultRule("status", status_code=answer["status"], body=body))
        cluster, connector = f"cc-{uuid.uuid4().hex[:6]}", f"nc-{uuid.uuid4().hex[:6]}"
        k8s.create(
            "connectclusters",
            cluster,
            {"restUrl": other.url, "kafka": {"bootstrapServers": connect.bootstrap}},
            "ConnectCluster",
        )
        k8s.create("connectors", connector, source_spec(tmp_path, cluster=cluster), "Connector")
        expected = "NotKafkaConnect" if answer["status"] == 200 else "Unreachable"
        ready = k8s.wait_condition("connectclusters", cluster, "Ready", "False", reason=expected, timeout=60)
        if expected == "NotKafkaConnect":
            assert "not Kafka Connect's" in ready["message"]
            assert "version" in ready["message"]
        else:
            assert "not shown" in ready["message"]
        wait_for(lambda: k8s.condition("connectors", connector, "Ready"), 60, "the Connector reports")
        wait_for(lambda: len(other.requests) >= 6, 60, "a few more requests (retries, the Connector)")
        status = k8s.get("connectors", connector).get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        assert conditions["Ready"]["status"] == "False", conditions
        for kind in ("Valid", "Synced"):
            assert kind not in conditions or conditions[kind]["status"] != "True", conditions
        assert "workerVersion" not in (k8s.get("connectclusters", cluster).get("status") or {})
        said = _everything_said(k8s, [cluster, connector])
        assert marker not in said
        assert marker not in caplog.text
        # nothing reached the real worker behind the proxy
        assert not ConnectREST(connect).exists(connector)


def test_rest_urls_outside_the_allowlist_are_never_called(
    kube: Any, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``CONNECTOPS_ALLOWED_REST_URLS`` set (here: the worker's own address), a ConnectCluster
    naming any other URL is URLNotAllowed, its Connector says so, and the URL receives no
    request; the allowed one works, and both Connectors can still be deleted."""
    import kubernetes

    from tests.e2e.conftest import K8s, OperatorProcess, connect_cluster_spec

    ns = f"allow-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    k8s = K8s(kube_client, ns)
    host_port = connect.url.split("://", 1)[1].rstrip("/")
    monkeypatch.setenv("CONNECTOPS_ALLOWED_REST_URLS", f"http://{host_port}")
    operator = OperatorProcess(kube, ns, tmp_path)
    operator.start()
    try:
        with FaultProxy(connect.url) as other:
            k8s.create("connectclusters", "allowed", connect_cluster_spec(connect), "ConnectCluster")
            k8s.create(
                "connectclusters",
                "elsewhere",
                {**connect_cluster_spec(connect), "restUrl": other.url},
                "ConnectCluster",
            )
            k8s.wait_condition("connectclusters", "allowed", "Ready", "True", timeout=90)
            refused = k8s.wait_condition("connectclusters", "elsewhere", "Ready", "False", reason="URLNotAllowed")
            assert other.url in refused["message"]
            assert "CONNECTOPS_ALLOWED_REST_URLS" in refused["message"]
            assert "settings.allowedRestUrls" in refused["message"]  # the chart's value, by its name
            k8s.create("connectors", "via-elsewhere", source_spec(tmp_path, cluster="elsewhere"), "Connector")
            k8s.create("connectors", "via-allowed", source_spec(tmp_path, cluster="allowed"), "Connector")
            k8s.wait_condition("connectors", "via-allowed", "Ready", "True", timeout=90)
            k8s.wait_condition("connectors", "via-elsewhere", "Valid", "False", reason="URLNotAllowed")
            assert other.requests == []
            for name in ("via-elsewhere", "via-allowed"):
                k8s.delete("connectors", name)
            wait_for(
                lambda: not k8s.exists("connectors", "via-elsewhere") and not k8s.exists("connectors", "via-allowed"),
                60,
                "both Connectors deleted",
            )
            assert other.requests == []
            assert not ConnectREST(connect).exists("via-allowed")
    finally:
        operator.stop()
