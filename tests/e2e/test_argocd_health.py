"""Issue 16, item 6: Argo CD health checks, run by a real Lua 5.1 interpreter (Argo CD's health
scripts are Lua 5.1) on objects exactly as the API server returns them after the operator acted.

The scripts are ``helm/connectops/files/argocd/<Kind>.lua``; the README's
``resource.customizations.health.*`` snippet holds the same text (checked below). Argo CD hands a
script the object as the global ``obj`` (JSON nulls absent); so does :func:`health`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.e2e.test_offset_reset_e2e import make_source, reset
from tests.env.servers import ConnectWorker

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "helm" / "connectops" / "files" / "argocd"
LUA = shutil.which("lua5.1")


def lua_string(text: str) -> str:
    """A Lua 5.1 string literal: it has no \\u escapes, so control characters go as \\ddd and
    everything else as its UTF-8 bytes (Lua strings are bytes, as Argo CD's are)."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03d}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def lua_literal(value: Any) -> str:
    """A Lua table constructor for a JSON value (None: absent, as Argo CD's decoder leaves it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(v) for v in value if v is not None) + "}"
    if isinstance(value, dict):
        items = (f"[{lua_string(k)}] = {lua_literal(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(items) + "}"
    raise TypeError(type(value))


def health(kind: str, obj: dict[str, Any]) -> tuple[str, str]:
    assert LUA, "lua5.1 is installed by scripts/setup.sh"
    program = f"obj = {lua_literal(obj)}\nlocal hs = dofile({json.dumps(str(SCRIPTS / f'{kind}.lua'))})\n"
    program += 'io.write(hs.status, "\\n", hs.message or "")\n'
    out = subprocess.run([LUA, "-"], input=program, capture_output=True, text=True, timeout=10, check=True).stdout
    status, _, message = out.partition("\n")
    return status, message


def test_lua_literal_escapes_what_messages_contain() -> None:
    tricky = {"message": 'quote " backslash \\ newline \n tab \t unicode é', "n": 3, "ok": True, "none": None}
    program = f"obj = {lua_literal(tricky)}\n"
    program += "io.write(obj.message, '|', obj.n, '|', tostring(obj.ok), '|', tostring(obj.none))"
    assert LUA
    out = subprocess.run([LUA, "-"], input=program, capture_output=True, text=True, timeout=10, check=True).stdout
    assert out == f"{tricky['message']}|3|true|nil"


def test_tasks_on_their_way_are_progressing_failed_ones_degraded() -> None:
    """Ready=False TasksNotRunning (a task UNASSIGNED or RESTARTING) is a transition, not a fault."""

    def connector(reason: str) -> dict[str, Any]:
        ready = {"type": "Ready", "status": "False", "reason": reason, "message": "task(s) ..."}
        return {
            "metadata": {"name": "c", "generation": 2},
            "spec": {"state": "running"},
            "status": {"observedGeneration": 2, "conditions": [ready]},
        }

    assert health("Connector", connector("TasksNotRunning"))[0] == "Progressing"
    assert health("Connector", connector("TasksFailed"))[0] == "Degraded"


def test_health_of_real_objects(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    fresh = k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    assert health("ConnectCluster", fresh)[0] == "Progressing"  # as created: no status yet
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    assert health("ConnectCluster", k8s.get("connectclusters", "main"))[0] == "Healthy"
    k8s.create("connectclusters", "down", {"restUrl": "http://127.0.0.1:9"}, "ConnectCluster")
    k8s.wait_condition("connectclusters", "down", "Ready", "False", timeout=90)
    status, message = health("ConnectCluster", k8s.get("connectclusters", "down"))
    assert status == "Degraded"
    assert message

    name, _ = make_source(k8s, tmp_path, "main", connect)
    assert health("Connector", k8s.get("connectors", name))[0] == "Healthy"
    k8s.patch_spec("connectors", name, {"state": "paused"})

    def paused_object() -> dict[str, Any] | None:
        # One read judged whole: a condition read apart from the object could be newer than it
        obj = k8s.get("connectors", name)
        ready = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
        return obj if ready.get("reason") == "Paused" else None

    paused = wait_for(paused_object, 60, "Ready=True Paused")
    assert health("Connector", paused)[0] == "Suspended"
    # between the spec change and the operator's next status: Progressing, not the old verdict
    k8s.patch_spec("connectors", name, {"state": "running"})
    changed = k8s.get("connectors", name)
    if (changed.get("status") or {}).get("observedGeneration", 0) < changed["metadata"]["generation"]:
        assert health("Connector", changed)[0] == "Progressing"

    spec = {"clusterRef": {"name": "main"}, "class": "com.example.Missing"}
    assert health("Connector", k8s.create("connectors", "noplugin", spec, "Connector"))[0] == "Progressing"
    k8s.wait_condition("connectors", "noplugin", "Ready", "False", reason="PluginNotFound", timeout=90)
    status, message = health("Connector", k8s.get("connectors", "noplugin"))
    assert status == "Degraded"
    assert "com.example.Missing" in message

    done = reset(k8s, "r-ok", {"connectorRef": {"name": name}, "action": "reset"})
    assert health("OffsetReset", k8s.get("offsetresets", "r-ok"))[0] == "Healthy", done
    reset(
        k8s,
        "r-bad",
        {"connectorRef": {"name": name}, "action": "toTimestamp", "timestamp": "999999999999999"},
        "Failed",
    )
    status, message = health("OffsetReset", k8s.get("offsetresets", "r-bad"))
    assert status == "Degraded"
    assert "out of range" in message


@pytest.mark.parametrize("kind", ["Connector", "OffsetReset", "ConnectCluster"])
def test_readme_snippet_holds_the_scripts(kind: str) -> None:
    """What a user pastes into argocd-cm is what the tests ran."""
    readme = (ROOT / "docs" / "argocd.md").read_text()
    key = f"resource.customizations.health.connectops.io_{kind}: |"
    assert key in readme
    block = readme.split(key, 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("      "):
            break
        lines.append(line[6:])
    assert "\n".join(lines).strip() == (SCRIPTS / f"{kind}.lua").read_text().strip()
    assert not re.search(r"\t", (SCRIPTS / f"{kind}.lua").read_text())
