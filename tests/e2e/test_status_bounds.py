"""A Connector's status is stored whatever Connect answers: a connector with 5,000 failed tasks
and long traces made a status patch of megabytes, which the API server refused, and the object
never showed a condition. A real worker cannot run 5,000 tasks here, so the proxy in front of it
multiplies the real failed task of the worker's own answer (its shape, its trace) into 5,000,
in both answers the operator reads (the connector's status and the expanded listing). Truth from
the API server: the stored object, its size, its conditions."""

from __future__ import annotations

import copy
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from connectops.models.bounds import STATUS_MAX_BYTES, STATUS_SAMPLE
from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.servers import ConnectWorker

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
TASKS = 5000


def _many(status: dict[str, Any]) -> dict[str, Any]:
    """A status answer whose one real task is repeated TASKS times, every trace made long (its
    first line, which is what the operator keeps, included)."""
    tasks = status.get("tasks") or []
    if not tasks:
        return status
    out = copy.deepcopy(status)
    real = tasks[0]
    trace = str(real.get("trace") or "org.apache.kafka.connect.errors.ConnectException: failed")
    first, _, rest = trace.partition("\n")
    long_trace = f"{first} {'x' * 2000}\n{rest}" + "\n\tat some.Frame(Frame.java:1)" * 20
    out["tasks"] = [{**real, "id": i, "trace": long_trace} for i in range(TASKS)]
    return out


def test_five_thousand_failed_tasks_make_a_bounded_status_with_a_clear_condition(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    name = f"wide-{uuid.uuid4().hex[:6]}"

    def listing(answer: dict[str, Any]) -> dict[str, Any]:
        if name in answer and isinstance(answer[name].get("status"), dict):
            answer[name]["status"] = _many(answer[name]["status"])
        return answer

    with FaultProxy(connect.url) as proxy:
        proxy.add_rule(FaultRule.rewritten(_many, method="GET", path=rf"^/connectors/{name}/status$"))
        proxy.add_rule(FaultRule.rewritten(listing, method="GET", path=r"^/connectors$"))
        k8s.create(
            "connectclusters", "proxied", {**connect_cluster_spec(connect), "restUrl": proxy.url}, "ConnectCluster"
        )
        spec = {
            "clusterRef": {"name": "proxied"},
            "class": SINK,
            # a directory: every task fails in start(), with a real trace
            "config": {"file": str(tmp_path), "topics": f"w-{uuid.uuid4().hex[:6]}"},
            "autoRestart": {"enabled": False},
        }
        k8s.create("connectors", name, spec, "Connector")

        def stored() -> dict[str, Any] | None:
            status = k8s.get("connectors", name).get("status") or {}
            return status if status.get("tasksRunning") == f"0/{TASKS}" else None

        status = wait_for(stored, 90, f"a status describing {TASKS} tasks")
        size = len(json.dumps(status, separators=(",", ":")).encode())
        assert size < STATUS_MAX_BYTES, size
        assert len(status["tasks"]) == STATUS_SAMPLE
        assert status["tasksOmitted"] == TASKS - STATUS_SAMPLE
        assert all(t["state"] == "FAILED" for t in status["tasks"])
        assert all(len(t["trace"]) <= 500 for t in status["tasks"])
        assert status["observedGeneration"] == k8s.get("connectors", name)["metadata"]["generation"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False", ready
        print(f"status of a {TASKS}-task failure: {size} bytes", file=sys.__stdout__)
        k8s.delete("connectors", name)
        wait_for(lambda: not k8s.exists("connectors", name), 60, f"{name} deleted")
