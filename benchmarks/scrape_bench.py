"""Benchmark: one scrape of the operator's metrics with N Connectors, the per-object gauges
streamed (``connectops.metrics_server``) vs rendered whole by prometheus_client (what the
endpoint did before), side by side.

Each measure runs in a fresh process (``--child``) that records N Connectors as the operator
does (``OBJECTS.observe_connector`` with a stopped connector's status and a check's headline),
then renders one exposition: ``this`` consumes ``metrics_server.exposition()`` piece by piece, as
the server writes each piece to the socket; ``baseline`` renders ``generate_latest`` of a
registry holding the same objects' collector, as prometheus_client's server did. Reported per
size: the peak RSS the scrape added (VmHWM after - VmRSS before), the Python heap's peak during
it (tracemalloc, in a second process of its own: tracing slows the render), the seconds it took,
and the bytes written (the same but for the process figures of the registry's part:
tests/unit/test_metrics_server.py checks the per-object texts are the same).
Rounds alternate which side goes first.

    .venv/bin/python benchmarks/scrape_bench.py                      # 1,000 and 10,000; 3 rounds
    .venv/bin/python benchmarks/scrape_bench.py --smoke              # 100, 1 round (CI)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from harness import ROOT, log, rss_mib, table, vm_hwm_mib, write_result


def child(side: str, n: int, traced: bool) -> dict[str, Any]:
    import os

    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

    import connectops.metrics  # noqa: F401 - the operator's registry metrics, as in the operator
    from connectops.metrics_server import exposition
    from connectops.object_metrics import OBJECTS

    for i in range(n):
        OBJECTS.observe_connector(
            "bench-scrape-0a1b2c",
            f"connector-{i:05d}",
            {"state": "stopped"},
            {
                "connectorState": "STOPPED",
                "conditions": [{"type": "Ready", "status": "True"}],
                "lastCheck": {"application": f"c-{i}", "verdict": "HEALTHY", "headline": {"totalLag": i}},
            },
            uid=f"u{i}",
        )
    if side == "baseline":
        registry = CollectorRegistry(auto_describe=True)
        registry.register(OBJECTS)

        def scrape() -> int:
            return len(generate_latest(REGISTRY)) + len(generate_latest(registry))
    else:

        def scrape() -> int:
            return sum(len(piece) for piece in exposition())

    pid = os.getpid()
    if traced:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    rss_before = rss_mib(pid)
    started = time.perf_counter()
    written = scrape()
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {"bytes": written, "seconds": seconds}
    if traced:
        out["heap_peak_mib"] = (tracemalloc.get_traced_memory()[1] - before) / 2**20
    else:
        out["rss_added_mib"] = vm_hwm_mib(pid) - rss_before
    return out


def measure(side: str, n: int, traced: bool) -> dict[str, Any]:
    args = [sys.executable, __file__, "--child", side, str(n)] + (["--traced"] if traced else [])
    done = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT, timeout=900)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="100 Connectors, one round (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.traced)))
        return 0
    sizes, rounds = ([100], 1) if args.smoke else (sorted(args.sizes), args.rounds)
    results: list[dict[str, Any]] = []
    for n in sizes:
        runs: dict[str, list[dict[str, Any]]] = {"this": [], "baseline": []}
        for r in range(rounds):
            for side in ("this", "baseline") if r % 2 == 0 else ("baseline", "this"):
                untraced, traced = measure(side, n, False), measure(side, n, True)
                runs[side].append({**untraced, "heap_peak_mib": traced["heap_peak_mib"]})
                log(f"{n} {side}: {runs[side][-1]}")

        def median(side: str, key: str, runs: dict[str, list[dict[str, Any]]] = runs) -> float:
            return float(statistics.median(run[key] for run in runs[side]))

        entry: dict[str, Any] = {
            "connectors": n,
            "runs": runs,
            **{
                key: {side: median(side, key) for side in runs}
                for key in ("rss_added_mib", "heap_peak_mib", "seconds", "bytes")
            },
        }
        entry["ratio_rss_added"] = entry["rss_added_mib"]["this"] / max(entry["rss_added_mib"]["baseline"], 1e-9)
        entry["ratio_heap_peak"] = entry["heap_peak_mib"]["this"] / max(entry["heap_peak_mib"]["baseline"], 1e-9)
        entry["ratio_seconds"] = entry["seconds"]["this"] / max(entry["seconds"]["baseline"], 1e-9)
        results.append(entry)
    write_result("scrape", {"rounds": rounds, "sizes": results}, args.output)
    print(
        table(
            ["Connectors", "RSS added MiB (this / prometheus_client)", "heap peak MiB", "seconds", "MiB written"],
            [
                [
                    e["connectors"],
                    f"{e['rss_added_mib']['this']:.1f} / {e['rss_added_mib']['baseline']:.1f}",
                    f"{e['heap_peak_mib']['this']:.1f} / {e['heap_peak_mib']['baseline']:.1f}",
                    f"{e['seconds']['this']:.2f} / {e['seconds']['baseline']:.2f}",
                    f"{e['bytes']['this'] / 2**20:.1f}",
                ]
                for e in results
            ],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
