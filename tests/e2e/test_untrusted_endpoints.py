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
