"""Benchmark: the floor under an offset reset's overhead, the Kubernetes API calls its guarantees
need, timed alone.

Issue 17 asks for a reset whose overhead over Connect's own transitions is below 0.1 s
(benchmarks/reset_bench.py measures it). On its path from the create call to ``Succeeded`` the
operator makes these Kubernetes API calls, each after the one before (why each must precede the
next: reconcilers/offset_reset.py, UNWRITTEN_STARTS and the step machine's docstring):

1. kopf's finalizer (a metadata PATCH) before any handler runs: the reset takes a Lease, which
   only its delete handler can release if the reset is deleted mid-way;
2. GET the Connector, 3. its ConnectCluster, 4. the Secret of the cluster's REST credentials:
   each names the next, and they are read fresh (a reset never acts on a stale reference);
5. status PATCH: the reset accepted, its lock step Running, before the Lease exists (a crash or a
   deletion after the Lease must find its name in status);
6. Lease POST: the lock;
7. backup ConfigMap POST with ``dryRun=All`` (inspect, beside its reads of Connect): a backup the
   operator could not write is refused before anything is stopped;
8. status PATCH: the stop Running, with the plan and the previous states;
9. backup ConfigMap POST, after the stop (a running connector's committed offsets trail its
   position; its tasks commit it as they stop): before anything changes, never overwritten;
10. status PATCH: the offsets call recorded as started, before it is sent, with the stop's and
    the backup's completion and the backup's name;
11. status PATCH: the offsets step Done, the resume Running, before the resume (a rerun must
    never change the offsets of a connector that runs again);
12. status PATCH: verify Done, unlock Running, before the Lease goes (once it is gone another
    reset may stop the connector, and verify could not be repeated);
13. Lease DELETE at the version the lock step got (beside a GET of the Connector for the
    post-reset check: the slower of the two);
14. status PATCH: the outcome.

This script makes that sequence against a kube-apiserver of its own (no Connect, no broker, no
operator: nothing else asks the API server anything), through the operator's own adapter
(connectops.adapters.kube.KubeClient: its thread pool, its client) wherever it has the method;
kopf's finalizer PATCH goes through the same client. Each round uses a new OffsetReset, Lease and
ConfigMap, with a status of a reset's usual size. Reported: the median of each call and of the
sequence's sum, against the target. Connect's share of the operator's overhead (the inspect's
reads, the read-back ``GET /offsets`` while stopped: 20-60 ms in reset_bench) is not in it.

    .venv/bin/python benchmarks/reset_floor_bench.py               # 30 rounds
    .venv/bin/python benchmarks/reset_floor_bench.py --smoke       # 3 rounds (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import kubernetes

from harness import GROUP, VERSION, apply_crds, log, summary, table, write_result
from tests.env.servers import KubeAPI

TARGET_OVERHEAD_SECONDS = 0.1
NS = "floor"
STEPS = ("lock", "inspect", "stop", "backup", "reset", "offsetSyncs", "resume", "verify", "unlock")


def status(round_: int, done: int) -> dict[str, Any]:
    """A reset's status as it is ``done`` steps in: the size of the real one's writes."""
    steps = [
        {
            "name": s,
            "state": "Done" if i < done else ("Running" if i == done else "Pending"),
            "attempts": 1 if i <= done else 0,
            "startedAt": "2026-11-28T12:00:00.000Z",
            "message": f"{s} of connector op-{round_}: a message of the usual length for a step",
        }
        for i, s in enumerate(STEPS)
    ]
    return {
        "phase": "Running",
        "specHash": uuid.uuid4().hex,
        "executedSpec": {"connectorRef": {"name": f"op-{round_}"}},
        "connectors": [f"op-{round_}"],
        "steps": steps,
        "plan": {"strategy": "rest", "current": {f"op-{round_}": [{"partition": {"file": "/x"}, "offset": {"p": 1}}]}},
        "history": [{"time": "2026-11-28T12:00:00.000Z", "message": f"step {i} done (0.01s)"} for i in range(done)],
        "conditions": [
            {"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": "reset started"},
        ],
    }


async def sequence(kc: Any, custom: Any, round_: int) -> dict[str, list[float]]:
    """One reset's API calls in order: seconds of each, by kind."""
    name, connector = f"r{round_}", f"op-{round_}"
    took: dict[str, list[float]] = {}

    async def timed(what: str, call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        took.setdefault(what, []).append(time.perf_counter() - started)
        return result

    await timed(
        "finalizer PATCH",
        asyncio.to_thread(
            custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            NS,
            "offsetresets",
            name,
            {"metadata": {"finalizers": ["connectops.io/bench"]}},
        ),
    )
    await timed("GET Connector", kc.custom_object(NS, "connectors", "c"))
    await timed("GET ConnectCluster", kc.connect_cluster(NS, "main"))
    await timed("GET Secret", kc.secret_value(NS, "connect-auth", "password"))
    await timed("status PATCH", kc.patch_status(NS, "offsetresets", name, status(round_, 0)))
    lock = await timed("Lease POST", kc.acquire_lock(NS, "main", connector, f"{NS}/{name}", None))
    await timed("ConfigMap POST dryRun", kc.create_config_map(NS, f"{name}-backup", data={}, dry_run=True))
    await timed("status PATCH", kc.patch_status(NS, "offsetresets", name, status(round_, 2)))  # before the stop
    await timed(
        "ConfigMap POST",
        kc.create_config_map(
            NS,
            f"{name}-backup",
            data={"backup.json": json.dumps({"connectors": {connector: {"offsets": [{"p": i} for i in range(20)]}}})},
        ),
    )
    for done in (4, 6, 8):  # before the offsets call, the resume, the unlock
        await timed("status PATCH", kc.patch_status(NS, "offsetresets", name, status(round_, done)))
    await timed(
        "Lease DELETE | GET Connector",
        asyncio.gather(
            kc.release_lock(NS, "main", connector, f"{NS}/{name}", lock.version),
            kc.custom_object(NS, "connectors", "c"),
        ),
    )
    final = status(round_, len(STEPS))
    final["phase"] = "Succeeded"
    await timed("status PATCH", kc.patch_status(NS, "offsetresets", name, final))
    return took


async def measure(kubeconfig: Path, rounds: int) -> list[dict[str, list[float]]]:
    os.environ["KUBECONFIG"] = str(kubeconfig)
    from connectops.adapters.kube import KubeClient, load_kube_config

    load_kube_config()
    kc = KubeClient()
    api: Any = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    custom = kubernetes.client.CustomObjectsApi(api)
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": NS}))
    core.create_namespaced_secret(
        NS, kubernetes.client.V1Secret(metadata={"name": "connect-auth"}, string_data={"password": "p"})
    )
    body = {"apiVersion": f"{GROUP}/{VERSION}", "metadata": {"name": "main"}}
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        NS,
        "connectclusters",
        {
            **body,
            "kind": "ConnectCluster",
            "spec": {"restUrl": "http://connect:8083", "basicAuth": {"secretName": "connect-auth"}},
        },
    )
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        NS,
        "connectors",
        {
            **body,
            "kind": "Connector",
            "metadata": {"name": "c"},
            "spec": {"clusterRef": {"name": "main"}, "class": "x.Y", "config": {"file": "/tmp/x"}},
        },
    )
    results = []
    for i in range(rounds + 2):  # the first two warm the client's connections: not counted
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            NS,
            "offsetresets",
            {**body, "kind": "OffsetReset", "metadata": {"name": f"r{i}"}, "spec": {"connectorRef": {"name": "c"}}},
        )
        took = await sequence(kc, custom, i)
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, NS, "offsetresets", f"r{i}", {"metadata": {"finalizers": None}}
        )
        if i >= 2:
            results.append(took)
        await asyncio.sleep(0.2)
    api.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--smoke", action="store_true", help="3 rounds (CI)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    rounds = 3 if args.smoke else args.rounds
    root = Path(tempfile.mkdtemp(prefix="connectops-floor-"))
    kube = KubeAPI(root).start()
    try:
        api: Any = kubernetes.config.new_client_from_config(config_file=str(kube.kubeconfig_path))  # type: ignore[no-untyped-call]
        apply_crds(api)
        api.close()
        log(f"{rounds} rounds")
        results = asyncio.run(measure(kube.kubeconfig_path, rounds))
    finally:
        kube.stop()
    totals = [sum(sum(each) for each in r.values()) for r in results]
    calls = {what: statistics.median(t for r in results for t in r[what]) for what in results[0]}
    counts = {what: len(each) for what, each in results[0].items()}
    floor = statistics.median(totals)
    result = {
        "command": "python benchmarks/reset_floor_bench.py" + (" --smoke" if args.smoke else ""),
        "rounds": rounds,
        "call_seconds_median": calls,
        "calls_per_reset": counts,
        "floor_seconds": summary(totals) | {"runs": totals},
        "target_overhead_seconds": TARGET_OVERHEAD_SECONDS,
        "floor_over_target": floor / TARGET_OVERHEAD_SECONDS,
    }
    write_result("reset_floor", result, args.output)
    print(
        table(
            ["call", "per reset", "median ms each"],
            [[what, counts[what], f"{s * 1000:.1f}"] for what, s in calls.items()],
        )
    )
    print(
        f"the sequence (median of {rounds}): {floor * 1000:.0f} ms, "
        f"{floor / TARGET_OVERHEAD_SECONDS:.2f}x the reset overhead's target ({TARGET_OVERHEAD_SECONDS} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
