"""``connectops plan`` online (issue 16, item 7), as a CI job would run it: the installed command,
the user's kubeconfig, the real API server and Connect worker. What it reports is checked against
what those servers hold (Connect's own config and offsets, read here directly), and that it wrote
nothing (the worker's config-topic records for the connector are counted before and after)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import GROUP, VERSION, ConnectREST, K8s, connect_cluster_spec, count_config_writes, wait_for
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def _plan(tmp_path: Path, namespace: str, *objects: dict[str, Any], output: str = "markdown") -> tuple[int, str]:
    folder = tmp_path / uuid.uuid4().hex[:6]
    folder.mkdir()
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    result = subprocess.run(
        [sys.executable, "-m", "connectops.cli", "plan", "-f", str(folder), "-n", namespace, "-o", output],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode in (0, 1, 2), result.stderr
    return result.returncode, result.stdout


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_plan_reports_what_apply_would_change_and_changes_nothing(
    k8s: K8s, connect: ConnectWorker, connect_rest: ConnectREST, tmp_path: Path
) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    name = f"plan-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line {i}\n" for i in range(10)))
    spec: dict[str, Any] = {
        "clusterRef": {"name": "main"},
        "class": SOURCE,
        "tasksMax": 1,
        "config": {"file": str(src), "topic": f"plan-{uuid.uuid4().hex[:6]}"},
    }
    k8s.create("connectors", name, spec, "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    # the source read the whole file: its offset is the file's size (it commits as it reads, so
    # wait for the last commit rather than the first)
    size = src.stat().st_size
    offsets = wait_for(
        lambda: [
            e
            for e in connect_rest.http.get(connect_rest.path(name) + "/offsets").json()["offsets"]
            if e["offset"] and e["offset"].get("position") == size
        ],
        60,
        "source offsets at the end of the file",
    )
    writes = count_config_writes(connect, name)
    live = connect_rest.config(name)
    stored = k8s.get("connectors", name)

    # the manifest as applied: nothing to do
    code, out = _plan(tmp_path, k8s.ns, _object("Connector", name, spec))
    assert code == 0, out
    assert f"#### Connector {k8s.ns}/{name}: no change" in out

    # a changed manifest: a new key, a key from a Secret, the state
    k8s.create_secret("creds", {"password": "s3cr3t-value"})
    changed = {
        **spec,
        "state": "paused",
        "config": {**spec["config"], "batch.size": "100"},
        "configFrom": {"extra.password": {"secretKeyRef": {"name": "creds", "key": "password"}}},
    }
    code, out = _plan(tmp_path, k8s.ns, _object("Connector", name, changed))
    assert code == 2, out
    assert "change the Connector object's spec: config, configFrom, state" in out
    assert "add batch.size=100" in out
    assert "add extra.password=(hidden)" in out
    assert f"move {name} from RUNNING to PAUSED" in out
    assert "s3cr3t-value" not in out

    # Connect refuses the config (FileStreamSource needs a topic): invalid, with Connect's words
    broken = {**spec, "config": {"file": str(src)}}
    code, out = _plan(tmp_path, k8s.ns, _object("Connector", name, broken))
    assert code == 1, out
    assert "Connect refuses topic" in out

    # an alter: the partition moves from where Connect says it is now
    [entry] = offsets
    reset = {
        "connectorRef": {"name": name},
        "action": "alter",
        "offsets": [{"partition": entry["partition"], "offset": {"position": 0}}],
    }
    code, out = _plan(tmp_path, k8s.ns, _object("OffsetReset", f"{name}-rewind", reset), output="json")
    assert code == 2, out
    plan = json.loads(out)["objects"][0]
    before = json.dumps(entry["offset"], sort_keys=True)
    assert f'{json.dumps(entry["partition"], sort_keys=True)}: {before} -> {{"position": 0}}' in "\n".join(
        plan["changes"]
    )
    assert entry["offset"]["position"] == src.stat().st_size

    # nothing was written anywhere: the worker's config records, its config, the objects
    assert count_config_writes(connect, name) == writes
    # the alter was only planned: Connect still reports the offsets it had
    after_offsets = connect_rest.http.get(connect_rest.path(name) + "/offsets").json()["offsets"]
    assert [e for e in after_offsets if e["offset"]] == offsets
    assert connect_rest.config(name) == live
    assert connect_rest.state(name) == "RUNNING"
    after = k8s.get("connectors", name)
    assert (after["spec"], after["metadata"]["generation"]) == (stored["spec"], stored["metadata"]["generation"])
    assert not k8s.exists("offsetresets", f"{name}-rewind")
