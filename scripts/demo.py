"""The embedded default: real kube-apiserver + Apache Kafka + Kafka Connect on loopback, the operator
running against them, and the examples applied. Prints what a user would see, then cleans up.

    ./scripts/setup.sh && .venv/bin/python scripts/demo.py [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kubernetes
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.env.servers import TestEnv  # noqa: E402

GROUP, VERSION = "connectops.io", "v1alpha1"


def log(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def apply_crds(client: Any) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(client)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        ext.create_custom_resource_definition(body)
        wait(
            lambda n=body["metadata"]["name"]: any(
                c.type == "Established" and c.status == "True"
                for c in (ext.read_custom_resource_definition(n).status.conditions or [])
            ),
            30,
            f"{path.name} established",
        )
    log("CRDs applied: " + ", ".join(p.name for p in sorted((ROOT / "crds").glob("*.yaml"))))


def table(custom: Any, plural: str, columns: list[tuple[str, str]]) -> str:
    items = custom.list_namespaced_custom_object(GROUP, VERSION, "default", plural)["items"]
    rows = [[h for h, _ in columns]]
    for item in items:
        row = []
        for _, path in columns:
            value: Any = item
            for part in path.split("."):
                if part.startswith("cond:"):
                    conds = value.get("conditions") or []
                    value = next((c["status"] for c in conds if c["type"] == part[5:]), "")
                else:
                    value = (value or {}).get(part, "")
            row.append(str(value))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="stay up until Ctrl-C")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="connectops-demo-"))
    demo_files = Path("/tmp/connectops-demo")
    demo_files.mkdir(exist_ok=True)
    (demo_files / "input.txt").write_text("hello\nfrom\nconnectops\n")
    (demo_files / "output.txt").unlink(missing_ok=True)

    t0 = time.monotonic()
    log(f"starting kube-apiserver, Apache Kafka and Kafka Connect under {workdir}")
    env = TestEnv(workdir).start()
    operator: subprocess.Popen[bytes] | None = None
    try:
        log(
            f"servers up in {time.monotonic() - t0:.1f}s: api {env.kube.url}, kafka "
            f"{env.kafka.bootstrap}, connect {env.connect.url}"
        )
        client = kubernetes.config.new_client_from_config(config_file=str(env.kube.kubeconfig_path))
        apply_crds(client)
        op_env = {**os.environ, "KUBECONFIG": str(env.kube.kubeconfig_path), "CONNECTOPS_RESYNC_SECONDS": "10"}
        op_log = (workdir / "operator.log").open("wb")
        operator = subprocess.Popen(
            [str(ROOT / ".venv/bin/connectops"), "run", "--all-namespaces", "--standalone"],
            env=op_env,
            stdout=op_log,
            stderr=subprocess.STDOUT,
        )
        log(f"operator started (log: {workdir / 'operator.log'})")

        custom = kubernetes.client.CustomObjectsApi(client)
        cluster = yaml.safe_load((ROOT / "examples/connect-cluster.yaml").read_text())
        cluster["spec"]["restUrl"] = env.connect.url
        cluster["spec"]["kafka"]["bootstrapServers"] = env.kafka.bootstrap
        # the embedded worker's internal topics (a reset reads offsets back from them)
        cluster["spec"]["topics"] = {
            "offsets": env.connect.offset_topic,
            "configs": env.connect.config_topic,
            "status": env.connect.status_topic,
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "connectclusters", cluster)
        for doc in yaml.safe_load_all((ROOT / "examples/filestream-connectors.yaml").read_text()):
            custom.create_namespaced_custom_object(GROUP, VERSION, "default", "connectors", doc)
        log("examples applied: ConnectCluster main, Connectors demo-source and demo-sink")

        def ready(name: str) -> bool:
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "connectors", name)
            conds = (obj.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        wait(lambda: ready("demo-source") and ready("demo-sink"), 120, "connectors Ready")
        wait(
            lambda: (demo_files / "output.txt").exists() and (demo_files / "output.txt").read_text().count("\n") >= 3,
            60,
            "records copied",
        )
        print()
        print("$ kubectl get connectclusters")
        print(
            table(
                custom,
                "connectclusters",
                [
                    ("NAME", "metadata.name"),
                    ("URL", "spec.restUrl"),
                    ("VERSION", "status.workerVersion"),
                    ("READY", "status.cond:Ready"),
                ],
            )
        )
        print()
        print("$ kubectl get connectors")
        print(
            table(
                custom,
                "connectors",
                [
                    ("NAME", "metadata.name"),
                    ("CLUSTER", "spec.clusterRef.name"),
                    ("DESIRED", "spec.state"),
                    ("STATE", "status.connectorState"),
                    ("TASKS", "status.tasksRunning"),
                    ("READY", "status.cond:Ready"),
                    ("VALID", "status.cond:Valid"),
                ],
            )
        )
        print()
        print(f"$ cat {demo_files / 'output.txt'}   # copied source -> topic -> sink by Kafka Connect")
        print((demo_files / "output.txt").read_text().rstrip())
        print()
        reset = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "OffsetReset",
            "metadata": {"name": "demo-replay"},
            "spec": {"connectorRef": {"name": "demo-source"}, "action": "reset"},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "offsetresets", reset)
        log("OffsetReset demo-replay applied: reset demo-source's offsets (it re-reads its file)")

        def finished() -> dict[str, Any] | None:
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "offsetresets", "demo-replay")
            status: dict[str, Any] = obj.get("status") or {}
            return status if status.get("phase") in ("Succeeded", "Failed") else None

        status = wait(finished, 180, "the reset")
        print(f"$ kubectl get offsetreset demo-replay   # phase {status['phase']}, strategy {status['strategy']}")
        for entry in status["history"]:
            print(f"  {entry['time']}  {entry['message']}")
        print(f"  backup: ConfigMap {status['backup']['configMap']} ({status['backup']['offsets']} partition offsets)")
        wait(lambda: (demo_files / "output.txt").read_text().count("\n") >= 6, 60, "records re-copied")
        print(f"$ wc -l {demo_files / 'output.txt'}   # every line again after the reset")
        print((demo_files / "output.txt").read_text().count("\n"))
        print()
        # a pull request that renames demo-source's topic: what would applying it do?
        proposal = workdir / "proposal"
        proposal.mkdir()
        connectors = list(yaml.safe_load_all((ROOT / "examples/filestream-connectors.yaml").read_text()))
        connectors[0]["spec"]["config"]["topic"] = "demo-lines-v2"
        (proposal / "connect-cluster.yaml").write_text(yaml.safe_dump(cluster))
        (proposal / "filestream-connectors.yaml").write_text(yaml.safe_dump_all(connectors))
        print("$ connectops plan -f proposal/   # examples/ with demo-source's topic changed")
        plan = subprocess.run(
            [str(ROOT / ".venv/bin/connectops"), "plan", "-f", str(proposal), "-n", "default"],
            env=op_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        print(plan.stdout.rstrip() or plan.stderr[-2000:])
        print(f"(exit status {plan.returncode}: 0 no change, 2 changes, 1 invalid)")
        if plan.returncode != 2:
            raise SystemExit("connectops plan did not see the change")
        print()
        log("running the lag/balance check locally (connectops-check, Spark local[*]) on demo-sink")
        check = subprocess.run(
            [
                str(ROOT / ".venv/bin/connectops-check"),
                "--bootstrap",
                env.kafka.bootstrap,
                "--connect-url",
                env.connect.url,
                "--connector",
                "demo-sink",
                "--samples",
                "2",
                "--interval",
                "2s",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if check.returncode != 0:
            print(check.stderr[-2000:])
            raise SystemExit("the check failed")
        verdict = json.loads(check.stdout)
        print(json.dumps({k: verdict[k] for k in ("connector", "kind", "verdict", "headline")}, indent=2))
        for reason in verdict["reasons"]:
            print(f"  {reason['severity']:<9} {reason['code']}: {reason['message']}")
        print()
        log(f"demo complete in {time.monotonic() - t0:.1f}s")
        if args.keep:
            print(
                json.dumps(
                    {
                        "kubeconfig": str(env.kube.kubeconfig_path),
                        "connect": env.connect.url,
                        "bootstrap": env.kafka.bootstrap,
                    },
                    indent=2,
                )
            )
            log("running; Ctrl-C to stop")
            while True:
                time.sleep(3600)
        return 0
    finally:
        if operator is not None:
            operator.terminate()
            try:
                operator.wait(20)
            except subprocess.TimeoutExpired:
                operator.kill()
        env.stop()


if __name__ == "__main__":
    raise SystemExit(main())
