"""Benchmark: the operator's restart with N Connectors, this code vs a baseline revision, side by side.

One population (N Connector CRs, each a stopped FileStreamSourceConnector in a distributed worker,
created through the operator of this tree and Ready), then the operator is restarted again and
again, alternating between this tree's code and the baseline's (``git archive`` of
``--baseline`` into a temporary directory, first on ``PYTHONPATH``; same CRDs, same servers,
same objects). Each restart is timed from the process start until it has reconciled every
Connector (``connectops_reconciles_total``, asked for that counter only), and its RSS (VmRSS)
then and its peak (VmHWM) are read. The ratio is this tree over the baseline, medians of the
rounds. Whatever the machine, both sides meet the same worker, API server and objects.

The ConnectCluster reaches the worker through a pass-through proxy that records every call, so
each restart also reports when its expanded listing was asked (seconds after the start) and how
long Connect took to answer it: Connect builds that listing in time quadratic in its connectors
(20-61 s at 10,000 on the test worker, from one population to another), and the rest of the
restart is the operator's own.

    .venv/bin/python benchmarks/restart_bench.py --connectors 10000 --connect-heap 2g --baseline 15247aa --rounds 3
    .venv/bin/python benchmarks/restart_bench.py --smoke          # 20 Connectors, one round (~40 s; not in CI)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from apply_bench import Connect, populate
from harness import ROOT, Bench, bench_env, free_port, log, reconciled, rss_mib, table, vm_hwm_mib, wait, write_result
from tests.env.faultproxy import FaultProxy


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def baseline_tree(revision: str, into: Path) -> Path:
    """The baseline's ``operator/`` package tree, extracted from git; the path to put first."""
    archive = into / "baseline.tar"
    _git("archive", "--format=tar", "-o", str(archive), revision, "operator")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "operator"


def restart(bench: Bench, ns: str, count: int, pythonpath: str | None, proxy: FaultProxy) -> dict[str, float]:
    """One operator start from cold; seconds until every Connector was reconciled, RSS then, and
    the expanded listings it asked (when, and how long Connect took)."""
    operator = bench.operator([ns])
    port = free_port()
    # a listing the last process asked and did not wait for is still being built by Connect (the
    # proxy serves it until Connect answers): a restart begun beside it shares the worker with
    # it (one run took 132 s where the others took ~57, with a listing asked 6 s before it)
    waited = time.perf_counter()
    wait(lambda: proxy.in_flight == 0, 900, "Connect done with the last process's calls", interval=0.5)
    if (idle := time.perf_counter() - waited) > 1:
        log(f"waited {idle:.1f} s for Connect to answer the last process's calls")
    proxy.clear_requests()
    wall = time.time()
    started = time.perf_counter()
    operator.start(extra_env={"PYTHONPATH": pythonpath} if pythonpath else {}, args=["--metrics-port", str(port)])
    try:
        # resumes only: the periodic sweep's resyncs beside them would count some twice
        wait(lambda: reconciled(port, "change") >= count, 900, "every Connector reconciled", interval=0.2)
        seconds = time.perf_counter() - started
        rss, peak = rss_mib(operator.pid), vm_hwm_mib(operator.pid)
    finally:
        operator.stop()
    listings = [
        r
        for r in proxy.requests
        if r.method == "GET" and r.path == "/connectors" and "expand" in r.query and r.received_at >= wall
    ]
    first = min(listings, key=lambda r: r.received_at, default=None)
    return {
        "seconds": seconds,
        "rss_mib": rss,
        "peak_rss_mib": peak,
        "listings": len(listings),
        "listing_asked_after_seconds": first.received_at - wall if first else -1.0,
        "listing_seconds": first.seconds if first else -1.0,
        "connect_requests": len(proxy.requests),
    }


def run(bench: Bench, count: int, rounds: int, revision: str) -> dict[str, Any]:
    ns = bench.namespace("bench-restart")
    connect = Connect(bench.env.connect.url)
    # waits for Connect as long as the operator may (a listing's deadline is up to 600 s)
    proxy = FaultProxy(bench.env.connect.url, upstream_timeout=660).start()
    bench.cluster(ns, rest_url=proxy.url)
    creator = bench.operator([ns])
    creator.start()
    names = [f"pop-{i:05d}" for i in range(count)]
    populate_seconds = populate(bench, ns, connect, names)
    creator.stop()
    log(f"{count} Connectors Ready in {populate_seconds:.1f} s")
    with tempfile.TemporaryDirectory(prefix="restart-baseline-") as tmp:
        baseline = str(baseline_tree(revision, Path(tmp)))
        sides: dict[str, list[dict[str, float]]] = {"current": [], "baseline": []}
        for i in range(rounds):
            order = [("current", None), ("baseline", baseline)]
            for side, path in order if i % 2 == 0 else reversed(order):
                sides[side].append(restart(bench, ns, count, path, proxy))
                got = sides[side][-1]
                log(
                    f"round {i + 1} {side}: {got['seconds']:.1f} s, RSS {got['rss_mib']:.0f} MiB; "
                    f"{got['listings']:.0f} listing(s), the first asked at "
                    f"+{got['listing_asked_after_seconds']:.1f} s, "
                    f"answered in {got['listing_seconds']:.1f} s; {got['connect_requests']:.0f} Connect calls"
                )
    proxy.stop()

    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in sides[side])

    for runs in sides.values():
        for r in runs:
            # the restart less Connect's answer to the listing: the operator's own share
            r["without_listing_seconds"] = r["seconds"] - max(r["listing_seconds"], 0.0)
    keys = ("seconds", "rss_mib", "peak_rss_mib", "listing_seconds", "without_listing_seconds")
    measured = {side: {key: median(side, key) for key in keys} | {"runs": sides[side]} for side in sides}
    return {
        "connectors": count,
        "rounds": rounds,
        "baseline_revision": _git("rev-parse", "--short", revision),
        "current_revision": _git("describe", "--always", "--dirty"),
        "populate_seconds": populate_seconds,
        **measured,
        "ratio_seconds": measured["current"]["seconds"] / measured["baseline"]["seconds"],
        "ratio_rss": measured["current"]["rss_mib"] / measured["baseline"]["rss_mib"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default="HEAD~1", help="git revision to compare with (default HEAD~1)")
    parser.add_argument("--connect-heap", default="512m", help="the worker's -Xmx (10,000 connectors need 2g)")
    parser.add_argument("--smoke", action="store_true", help="20 Connectors, one round (~40 s)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    count, rounds = (20, 1) if args.smoke else (args.connectors, args.rounds)
    with bench_env(keep=args.keep, standalone_connect=False, connect_heap=args.connect_heap) as bench:
        result = run(bench, count, rounds, args.baseline)
        result["hygiene"] = bench.hygiene()
    write_result("restart", result, args.output)
    print(
        table(
            ["code", "restart s", "Connect's listing s", "restart less listing s", "RSS MiB", "peak RSS MiB"],
            [
                [
                    f"{side} ({result[f'{side}_revision']})",
                    result[side]["seconds"],
                    result[side]["listing_seconds"],
                    result[side]["without_listing_seconds"],
                    result[side]["rss_mib"],
                    result[side]["peak_rss_mib"],
                ]
                for side in ("current", "baseline")
            ],
        )
    )
    print(f"{count} Connectors: restart {result['ratio_seconds']:.2f}x, RSS {result['ratio_rss']:.2f}x the baseline's")
    return 1 if result["hygiene"]["hits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
