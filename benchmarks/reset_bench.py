"""Benchmark: an offset reset driven by the operator vs the same REST calls made directly.

Operator side: an ``OffsetReset`` (action reset, REST strategy) on a running
FileStreamSourceConnector managed by a ``Connector``; timed from the create call to
``status.phase == Succeeded`` as a client polling the API server sees it. The operator's step
machine does lock -> inspect -> backup -> stop -> reset (+ read-back) -> resume -> verify ->
unlock, writing status after every step.

Baseline, same worker, same run, alternating with the operator: a second connector of the same
shape, not managed by the operator, reset by hand with httpx: ``PUT /stop``, poll status until
STOPPED with no tasks, ``DELETE /offsets``, ``PUT /resume``, poll until RUNNING with every task
RUNNING. The baseline polls every 50 ms: it sees Connect's own transitions within 50 ms, so
operator - direct (per pair, median) is what the operator adds to the time Connect takes: its
polling slack (50 ms doubling to 100 ms in the stop and resume waits) and its guarantees (lock,
backup, read-back while stopped, a status write per step). Target: < 0.1 s (issue 17).

    .venv/bin/python benchmarks/reset_bench.py               # 5 of each, alternating
    .venv/bin/python benchmarks/reset_bench.py --smoke       # 1 of each (CI)
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from harness import Bench, bench_env, log, summary, table, wait, write_result

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
LINES = [f"line-{i}" for i in range(20)]
POLL = 0.05  # the baseline sees Connect's transitions within 50 ms
TARGET_RATIO = 1.15
TARGET_OVERHEAD_SECONDS = 0.1


class Direct:
    """The baseline: Connect's REST API with nothing in between."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def path(self, name: str) -> str:
        return f"/connectors/{quote(name, safe='')}"

    def status(self, name: str) -> dict[str, Any] | None:
        response = self.http.get(self.path(name) + "/status")
        return response.json() if response.status_code == 200 else None

    def offsets(self, name: str) -> list[Any]:
        response = self.http.get(self.path(name) + "/offsets")
        return list(response.json().get("offsets", [])) if response.status_code == 200 else []

    def running(self, name: str) -> bool:
        s = self.status(name)
        return bool(
            s
            and s["connector"]["state"] == "RUNNING"
            and s["tasks"]
            and all(t["state"] == "RUNNING" for t in s["tasks"])
        )

    def stopped(self, name: str) -> bool:
        s = self.status(name)
        return bool(s and s["connector"]["state"] == "STOPPED" and not s["tasks"])

    def reset(self, name: str) -> float:
        started = time.perf_counter()
        self.http.put(self.path(name) + "/stop").raise_for_status()
        wait(lambda: self.stopped(name), 60, f"{name} STOPPED", interval=POLL)
        self.http.delete(self.path(name) + "/offsets").raise_for_status()
        self.http.put(self.path(name) + "/resume").raise_for_status()
        wait(lambda: self.running(name), 60, f"{name} RUNNING", interval=POLL)
        return time.perf_counter() - started


def step_seconds(status: dict[str, Any]) -> dict[str, float]:
    """Per-step wall time from the reset's history ("<step>: <message> (1.23s)")."""
    out: dict[str, float] = {}
    for entry in status.get("history") or []:
        match = re.match(r"^(\w+): .*\((\d+\.\d+)s\)$", entry["message"])
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def run(bench: Bench, repeat: int) -> dict[str, Any]:
    ns = bench.namespace("bench-reset")
    bench.cluster(ns)
    operator = bench.operator([ns])
    operator.start()
    direct = Direct(bench.env.connect.url)
    files = Path(bench.workdir)

    managed, manual = f"op-{uuid.uuid4().hex[:6]}", f"direct-{uuid.uuid4().hex[:6]}"
    for name in (managed, manual):
        (files / f"{name}.txt").write_text("".join(f"{line}\n" for line in LINES))
    config = {"connector.class": SOURCE, "tasks.max": "1"}
    bench.create(
        ns,
        "connectors",
        "Connector",
        managed,
        {
            "clusterRef": {"name": "main"},
            "class": SOURCE,
            "config": {"file": str(files / f"{managed}.txt"), "topic": f"t-{managed}"},
            "configFrom": bench.connector_secret(ns),
        },
    )
    direct.http.put(
        direct.path(manual) + "/config", json={**config, "file": str(files / f"{manual}.txt"), "topic": f"t-{manual}"}
    ).raise_for_status()

    operator_runs: list[float] = []
    baseline_runs: list[float] = []
    steps: list[dict[str, float]] = []
    for i in range(repeat):
        for name in (managed, manual):
            wait(lambda n=name: direct.running(n) and direct.offsets(n), 120, f"{name} running with offsets", 0.2)

        started = time.perf_counter()
        bench.create(ns, "offsetresets", "OffsetReset", f"r{i}", {"connectorRef": {"name": managed}})
        status = wait(
            lambda i=i: (
                (s := bench.get(ns, "offsetresets", f"r{i}").get("status") or {}).get("phase")
                in ("Succeeded", "Failed")
                and s
            ),
            180,
            f"reset r{i}",
        )
        operator_runs.append(time.perf_counter() - started)
        if status["phase"] != "Succeeded":
            raise RuntimeError(f"reset r{i} failed: {status}")
        steps.append(step_seconds(status))

        baseline_runs.append(direct.reset(manual))
        log(f"run {i + 1}/{repeat}: operator {operator_runs[-1]:.2f} s, direct {baseline_runs[-1]:.2f} s")

    operator.stop()
    direct.http.delete(direct.path(manual))
    op, base = statistics.median(operator_runs), statistics.median(baseline_runs)
    overhead = statistics.median(a - b for a, b in zip(operator_runs, baseline_runs, strict=True))
    step_names = sorted({k for s in steps for k in s})
    return {
        "repeat": repeat,
        "operator_seconds": summary(operator_runs) | {"runs": operator_runs},
        "direct_seconds": summary(baseline_runs) | {"runs": baseline_runs},
        "ratio_median": op / base,
        "overhead_seconds_median": overhead,
        "target_ratio": TARGET_RATIO,
        "target_overhead_seconds": TARGET_OVERHEAD_SECONDS,
        "target_met": op / base <= TARGET_RATIO and overhead < TARGET_OVERHEAD_SECONDS,
        "operator_step_seconds_median": {k: statistics.median([s.get(k, 0.0) for s in steps]) for k in step_names},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one reset of each kind (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the servers' directory")
    args = parser.parse_args(argv)
    repeat = 1 if args.smoke else args.repeat

    with bench_env(keep=args.keep) as bench:
        result = run(bench, repeat)
        result["hygiene"] = bench.hygiene()
    write_result("reset", result, args.output)
    print(
        table(
            ["path", "median s", "min s", "max s", "ratio"],
            [
                [
                    "operator (OffsetReset)",
                    result["operator_seconds"]["p50"],
                    result["operator_seconds"]["min"],
                    result["operator_seconds"]["max"],
                    result["ratio_median"],
                ],
                [
                    "direct httpx",
                    result["direct_seconds"]["p50"],
                    result["direct_seconds"]["min"],
                    result["direct_seconds"]["max"],
                    1.0,
                ],
            ],
        )
    )
    print(
        "operator steps (median s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in result["operator_step_seconds_median"].items())
    )
    return 1 if result["hygiene"]["hits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
