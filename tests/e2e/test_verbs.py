"""GitOps-safe one-shot verbs (issue 16, item 3): annotations a second field manager applies
with server-side apply, as Argo CD and Flux do. Each token acts exactly once, re-applying the
same manifest does nothing, a new token acts again, and the operator never writes spec or those
annotations (so the GitOps tool sees no drift). What reached Connect is read from a pass-through
proxy in front of the real worker: the restart calls Connect answered, not the operator's word."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from tests.e2e.conftest import GROUP, VERSION, ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.env.faultproxy import FaultProxy
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
MANAGER = "argocd-controller"


def _apply(k8s: K8s, name: str, spec: dict[str, Any], annotations: dict[str, str]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": name, "namespace": k8s.ns, "annotations": annotations},
        "spec": spec,
    }
    # server-side apply, as Argo CD and Flux do it
    k8s.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        k8s.ns,
        "connectors",
        name,
        body,
        field_manager=MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def proxied_source(
    k8s: K8s, connect: ConnectWorker, proxy: FaultProxy, tmp_path: Path, prefix: str
) -> tuple[str, dict[str, Any]]:
    """A ConnectCluster ``proxied`` reaching the worker through ``proxy`` and a running
    FileStreamSource Connector on it, applied as a GitOps tool does: its name and spec."""
    k8s.create("connectclusters", "proxied", {**connect_cluster_spec(connect), "restUrl": proxy.url}, "ConnectCluster")
    k8s.wait_condition("connectclusters", "proxied", "Ready", "True", timeout=60)
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "in.txt"
    src.write_text("one\n")
    spec = {
        "clusterRef": {"name": "proxied"},
        "class": SOURCE,
        "tasksMax": 1,
        "config": {"file": str(src), "topic": f"v-{uuid.uuid4().hex[:6]}"},
    }
    _apply(k8s, name, spec, {})
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=60)
    return name, spec


def _restarts(proxy: FaultProxy, connector: str) -> list[str]:
    return [
        f"{r.path}?{r.query}"
        for r in proxy.requests
        if r.method == "POST"
        and r.path.startswith(f"/connectors/{connector}/")
        and "restart" in r.path
        and r.upstream_status is not None
        and r.upstream_status < 300
    ]


def test_restart_tokens_act_once_and_never_cause_drift(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    with FaultProxy(connect.url) as proxy:
        name, spec = proxied_source(k8s, connect, proxy, tmp_path, "verbs")
        assert _restarts(proxy, name) == []

        _apply(k8s, name, spec, {"connectops.io/restart": "t1"})
        wait_for(lambda: len(_restarts(proxy, name)) == 1, 30, "one restart")
        assert _restarts(proxy, name) == [f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false"]
        wait_for(lambda: (k8s.get("connectors", name)["status"].get("verbs") or {}).get("restart") == "t1", 30, "t1")
        # the same manifest again, and several resyncs (3 s): nothing more
        _apply(k8s, name, spec, {"connectops.io/restart": "t1"})
        time.sleep(8)
        assert len(_restarts(proxy, name)) == 1

        _apply(k8s, name, spec, {"connectops.io/restart": "t2", "connectops.io/restart-tasks": "0:a"})
        wait_for(lambda: len(_restarts(proxy, name)) == 3, 30, "t2 and the task restart")
        assert f"/connectors/{name}/tasks/0/restart?" in _restarts(proxy, name)
        _apply(k8s, name, spec, {"connectops.io/restart": "t2", "connectops.io/restart-tasks": "failed:b"})
        wait_for(lambda: len(_restarts(proxy, name)) == 4, 30, "the failed-only restart")
        assert _restarts(proxy, name)[-1] == f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true"

        # a bad value is reported once and acts on nothing
        _apply(k8s, name, spec, {"connectops.io/restart": "t2", "connectops.io/restart-tasks": "all of them"})
        wait_for(lambda: [e for e in k8s.events(name) if e.reason == "BadAnnotation"], 30, "a BadAnnotation Warning")
        time.sleep(6)
        assert len(_restarts(proxy, name)) == 4
        assert len([e for e in k8s.events(name) if e.reason == "BadAnnotation"]) == 1

        # reconcile paused: a config change in Git is not applied until the annotation goes
        rest = ConnectREST(connect)
        changed = {**spec, "config": {**spec["config"], "topic": "while-paused"}}
        _apply(k8s, name, changed, {"connectops.io/restart": "t2", "connectops.io/reconcile": "paused"})
        k8s.wait_condition("connectors", name, "ReconcilePaused", "True")
        time.sleep(6)
        assert rest.config(name)["topic"] == spec["config"]["topic"]
        _apply(k8s, name, changed, {"connectops.io/restart": "t2"})
        k8s.wait_condition("connectors", name, "ReconcilePaused", "False")
        wait_for(lambda: rest.config(name)["topic"] == "while-paused", 30, "the change applied after the pause")

        # the operator never owns spec or the annotations: the GitOps tool sees no drift
        obj = k8s.get("connectors", name)
        assert {k: obj["spec"][k] for k in changed} == changed  # the rest: the schema's defaults
        assert obj["metadata"]["annotations"].get("connectops.io/restart") == "t2"
        for entry in obj["metadata"].get("managedFields") or []:
            if entry["manager"] == MANAGER:
                continue
            owned = entry.get("fieldsV1", {})
            # by key, not by substring: status fields such as f:specHash are not f:spec
            assert "f:spec" not in owned, entry
            annotations = owned.get("f:metadata", {}).get("f:annotations", {})
            assert "f:connectops.io/restart" not in annotations, entry
            assert "f:connectops.io/restart-tasks" not in annotations, entry
            assert "f:connectops.io/reconcile" not in annotations, entry
        # deleted while the proxy still stands: the finalizer deletes the connector through it
        k8s.delete("connectors", name)
        wait_for(lambda: not k8s.exists("connectors", name), 120, "the Connector deleted")
