"""Benchmark: checks after 500 simultaneous Connector changes, batched vs one application each.

A GitOps sync that changes 500 Connectors at once used to start 500 SparkApplications (one per
change). This bench makes that change and counts, side by side in one run:

* batched: the operator as shipped (checks of one Connect cluster within a 5 s window share one
  application, at most 50 connectors each, at most 4 running);
* baseline: the same operator configured as before batching (window 0, one connector per
  application, no cap on running applications): one application per change.

Both run the same population on the same servers: N stopped FileStreamSourceConnectors (real
connectors in the real distributed worker, as in apply_bench) created with checks off and
let settle; then every Connector is
patched at once (a config key and ``spec.check.enabled``), each a change that asks for a check.

The spark-operator's controller cannot run here (no kubelet): ``tests/env/spark/harness.py``
plays it and runs the real ``connectops-check`` job as a local process per application, with
room for ``--drivers`` (4) drivers at once, as a cluster with limited room would (a driver
without room stays SUBMITTED). The check of a stopped source needs no Spark JVM, so what is
timed is the operator's batching, the job's start and its collection from Kafka and Connect.

Reported per mode: applications created; the most in flight at once (created and not finished,
sampled from the API each second: what the operator asks the cluster to run, which its cap
bounds); the most drivers running (bounded by the stand-in cluster's room in both modes); and
the time from the patch until every Connector's ``status.lastCheck`` holds a verdict (the
resync period, 10 s here, bounds how soon a finished check is read back). Each verdict is
checked: the ConfigMap it names holds a verdict for that connector, and the status says what the
ConfigMap says.

    .venv/bin/python benchmarks/check_batch_bench.py                # 500 Connectors
    .venv/bin/python benchmarks/check_batch_bench.py --smoke        # 8 Connectors (CI)
    .venv/bin/python benchmarks/check_batch_bench.py --connectors 100 --drivers 8
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import (
    Bench,
    bench_env,
    connector_ready,
    log,
    machine,
    table,
    wait,
    write_result,
)
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.env.spark.harness import FakeSparkOperator

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
#: the operator's settings per mode (the batched one is the shipped default)
MODES = {
    "batched": {
        "CONNECTOPS_CHECK_BATCH_WINDOW_SECONDS": "5",
        "CONNECTOPS_CHECK_BATCH_MAX_CONNECTORS": "50",
        "CONNECTOPS_CHECK_MAX_RUNNING": "4",
    },
    "baseline": {
        "CONNECTOPS_CHECK_BATCH_WINDOW_SECONDS": "0",
        "CONNECTOPS_CHECK_BATCH_MAX_CONNECTORS": "1",
        "CONNECTOPS_CHECK_MAX_RUNNING": "100000",
    },
}
TARGETS = {"applications_per_cluster_window": 1, "peak_running": 4}


def spec(name: str, workdir: Path) -> dict[str, Any]:
    return {
        "clusterRef": {"name": "main"},
        "class": SOURCE,
        "state": "stopped",
        "config": {"file": str(workdir / f"{name}.txt"), "topic": f"t-{name}"},
        "check": {"enabled": False, "samples": 1, "intervalSeconds": 1},
    }


def applications(bench: Bench, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = bench.custom.list_namespaced_custom_object(*SPARK[:2], ns, SPARK[2])["items"]
    return items


def in_flight(bench: Bench, ns: str) -> int:
    """Applications created and not finished: what the operator asked the cluster to run now."""
    return sum(
        1
        for app in applications(bench, ns)
        if ((app.get("status") or {}).get("applicationState") or {}).get("state") not in ("COMPLETED", "FAILED")
    )


def with_verdict(bench: Bench, ns: str) -> dict[str, dict[str, Any]]:
    out = {}
    for item in bench.items(ns, "connectors"):
        last = (item.get("status") or {}).get("lastCheck") or {}
        if last.get("verdict") or last.get("state") in ("FAILED", "NOT_SUBMITTED", "TIMEOUT", "MISSING"):
            out[item["metadata"]["name"]] = last
    return out


def run_mode(bench: Bench, mode: str, connectors: int, drivers: int) -> dict[str, Any]:
    ns = bench.namespace(f"chk-{mode}")
    bench.cluster(ns)
    apply_sparkapplication_crd(bench.api)
    op = bench.operator([ns], CONNECTOPS_CHECKS_ENABLED="true", CONNECTOPS_RESYNC_SECONDS="10", **MODES[mode])
    op.start()
    names = [f"s{i:04d}" for i in range(connectors)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: bench.create(ns, "connectors", "Connector", n, spec(n, bench.workdir)), names))
    wait(
        lambda: len([i for i in bench.items(ns, "connectors") if connector_ready(i)]) == connectors,
        120 + connectors,
        f"{connectors} Connectors Ready",
        interval=1.0,
    )
    log(f"{mode}: {connectors} Connectors Ready; patching all at once")
    with FakeSparkOperator(
        bench.api,
        ns,
        kubeconfig_path=bench.env.kube.kubeconfig_path,
        max_drivers=drivers,
        log_dir=bench.workdir / f"spark-{mode}",
        poll_interval=0.2,
    ) as spark:
        patch = {"spec": {"config": {"bench.change": "1"}, "check": {"enabled": True}}}
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: bench.custom.patch_namespaced_custom_object(
                        "connectops.io", "v1alpha1", ns, "connectors", n, patch
                    ),
                    names,
                )
            )
        patched = time.monotonic() - started

        peak_in_flight = 0

        def every_verdict() -> dict[str, dict[str, Any]] | None:
            nonlocal peak_in_flight
            peak_in_flight = max(peak_in_flight, in_flight(bench, ns))
            got = with_verdict(bench, ns)
            return got if len(got) == connectors else None

        done = wait(
            every_verdict,
            1800,
            f"{connectors} verdicts",
            interval=1.0,
        )
        elapsed = time.monotonic() - started
        apps = applications(bench, ns)
        peak_drivers = spark.drivers_peak
    op.stop()
    # every verdict is the job's: the ConfigMap it names holds that connector's verdict
    states: dict[str, int] = {}
    wrong = []
    for name, last in done.items():
        states[str(last.get("state"))] = states.get(str(last.get("state")), 0) + 1
        if last.get("state") != "COMPLETED":
            continue
        where = last.get("verdictConfigMap") or f"{last['application']}-verdict"
        document = json.loads(bench.core.read_namespaced_config_map(where, ns).data["verdict.json"])
        if document.get("connector") != name or document.get("verdict") != last.get("verdict"):
            wrong.append(name)
    members = [len([a for a in app["spec"]["arguments"] if a.startswith("--each=")]) or 1 for app in apps]
    log(
        f"{mode}: {len(apps)} applications, at most {peak_in_flight} in flight, peak drivers {peak_drivers}, "
        f"all verdicts in {elapsed:.1f} s"
    )
    return {
        "mode": mode,
        "connectors": connectors,
        "operator_settings": MODES[mode],
        "applications": len(apps),
        "connectors_per_application": {"min": min(members), "max": max(members)} if members else None,
        "peak_running_drivers": peak_drivers,
        "peak_applications_in_flight": peak_in_flight,
        "patch_seconds": round(patched, 2),
        "seconds_until_every_verdict": round(elapsed, 1),
        "states": states,
        "verdicts_not_matching_their_configmap": wrong,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connectors", type=int, default=500)
    parser.add_argument("--drivers", type=int, default=4, help="drivers the stand-in cluster has room for")
    parser.add_argument("--smoke", action="store_true", help="8 Connectors (CI)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    connectors = 8 if args.smoke else args.connectors
    results = []
    with bench_env(standalone_connect=False) as bench:
        for mode in ("batched", "baseline"):
            results.append(run_mode(bench, mode, connectors, args.drivers))
        hygiene = bench.hygiene()
    batched, baseline = results
    data = {
        "command": "python benchmarks/check_batch_bench.py" + (" --smoke" if args.smoke else ""),
        "machine": machine(),
        "targets": TARGETS,
        "results": results,
        "ratio_time_baseline_over_batched": round(
            baseline["seconds_until_every_verdict"] / max(batched["seconds_until_every_verdict"], 0.1), 2
        ),
        "hygiene": hygiene,
    }
    path = write_result("check_batch", data, args.output)
    print(
        table(
            [
                "mode",
                "Connectors",
                "applications",
                "per application",
                "in flight at most",
                "drivers at most",
                "every verdict (s)",
                "states",
            ],
            [
                [
                    r["mode"],
                    r["connectors"],
                    r["applications"],
                    r["connectors_per_application"],
                    r["peak_applications_in_flight"],
                    r["peak_running_drivers"],
                    r["seconds_until_every_verdict"],
                    r["states"],
                ]
                for r in results
            ],
        )
    )
    del path  # write_result logged where
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
