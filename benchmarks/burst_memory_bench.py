"""Benchmark: the operator's RSS after a burst of Connector creations, heap trim off vs on.

A GitOps sync that creates many Connectors at once makes the operator allocate a few hundred
MiB that are almost all freed once every one is Ready; glibc keeps freed pages resident while a
live block sits above them. ``connectops.memory`` hands them back every
``CONNECTOPS_MALLOC_TRIM_SECONDS`` (60 s by default). Side by side, in one run, alternating:
an operator with the trim off (``CONNECTOPS_MALLOC_TRIM_SECONDS=0``, the baseline) and one with
it on, each in its own namespace with its own ConnectCluster, each sent the same burst (N
Connector CRs, each a stopped FileStreamSource connector, created by 8 threads). For each:
RSS when every Connector is Ready, then RSS and peak RSS (VmHWM) two trim periods + 10 s later
(``--trim-seconds``, 30 s here; the operator's default is 60 s); both operators run with
``MALLOC_ARENA_MAX=2`` as the image does. The worker is a distributed one-worker group.

    .venv/bin/python benchmarks/burst_memory_bench.py                 # 1,000 each, 2 rounds
    .venv/bin/python benchmarks/burst_memory_bench.py --connectors 300 --rounds 1
    .venv/bin/python benchmarks/burst_memory_bench.py --smoke         # 20 each, 2 s period
    .venv/bin/python benchmarks/burst_memory_bench.py --rounds 1 --trim-seconds 60   # the default period

``--compare KEY=VALUE``: instead of trim off vs on, an operator with that setting (the baseline)
vs one with this tree's defaults, both trimming; ``--at-start`` starts the burst with the
operator (its first listing meets the creations) instead of once it is idle. Written to
``burst_memory_compare`` (not the table's row):

    .venv/bin/python benchmarks/burst_memory_bench.py --at-start --compare CONNECTOPS_KUBE_API_CONCURRENCY=100000

``--baseline REV``: instead, the operator code of git revision REV (its ``operator/`` tree first on
``PYTHONPATH``, as restart_bench does) vs this tree's, both with the defaults. Written to
``burst_memory_baseline``; the peak (VmHWM, the burst's height) is what it is for:

    .venv/bin/python benchmarks/burst_memory_bench.py --connectors 3000 --rounds 2 --baseline 4650ee1
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from apply_bench import spec
from harness import Bench, bench_env, connector_ready, log, rss_mib, table, vm_hwm_mib, wait, write_result
from restart_bench import baseline_tree

TARGET_RSS_MIB = 150  # issue 17: RSS at 1,000 Connectors


def burst(
    bench: Bench,
    n: int,
    trim_seconds: float,
    settle: float,
    label: str,
    *,
    at_start: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``at_start``: the creations begin as the operator starts (its first listing meets them,
    as when it restarts during a GitOps sync), not once it is idle."""
    ns = bench.namespace(f"burst-{label}")
    bench.cluster(ns)
    operator = bench.operator(
        [ns], CONNECTOPS_MALLOC_TRIM_SECONDS=str(trim_seconds), MALLOC_ARENA_MAX="2", **(env or {})
    )
    operator.start()
    if not at_start:
        time.sleep(5)  # started and idle
    idle = rss_mib(operator.pid)
    names = [f"{label}-{i:04d}" for i in range(n)]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(lambda c: bench.create(ns, "connectors", "Connector", c, spec(c, bench.workdir, "stopped")), names)
        )
    wanted = set(names)
    wait(
        lambda: wanted <= {i["metadata"]["name"] for i in bench.items(ns, "connectors") if connector_ready(i)},
        900,
        f"{n} Connectors Ready ({label})",
        interval=1.0,
    )
    ready_seconds = time.monotonic() - started
    at_ready = rss_mib(operator.pid)
    time.sleep(settle)
    result = {
        "trim_seconds": trim_seconds,
        "idle_rss_mib": idle,
        "ready_seconds": ready_seconds,
        "rss_at_ready_mib": at_ready,
        "rss_after_settle_mib": rss_mib(operator.pid),
        "peak_rss_mib": vm_hwm_mib(operator.pid),
    }
    operator.stop()
    log(
        f"{label}: {n} Ready in {ready_seconds:.1f} s; RSS idle {idle:.0f}, at Ready {at_ready:.0f}, "
        f"{settle:.0f} s later {result['rss_after_settle_mib']:.0f} MiB (peak {result['peak_rss_mib']:.0f})"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2, help="off/on pairs, alternating which goes first")
    parser.add_argument("--trim-seconds", type=float, default=30.0, help="the trim period of the 'on' operator")
    parser.add_argument("--smoke", action="store_true", help="20 Connectors, a 2 s period, one round (CI)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--at-start", action="store_true", help="the burst begins as the operator starts")
    parser.add_argument("--compare", metavar="KEY=VALUE", help="baseline: this setting; instead of trim off/on")
    parser.add_argument("--baseline", metavar="REV", help="baseline: the operator code of this git revision")
    args = parser.parse_args(argv)
    if args.compare and args.baseline:
        parser.error("--compare and --baseline are two kinds of baseline: one at a time")
    with tempfile.TemporaryDirectory(prefix="burst-baseline-") as tmp:
        baseline = str(baseline_tree(args.baseline, Path(tmp))) if args.baseline else None
        return _run(args, baseline)


def _run(args: argparse.Namespace, baseline: str | None) -> int:
    n, rounds, period = (20, 1, 2.0) if args.smoke else (args.connectors, args.rounds, args.trim_seconds)
    # two periods and more: the first trim can come before the burst's memory is let go (the
    # resync's first pass, kopf's idle workers); a run at 60 s measured 70 s after Ready saw one
    # trim 24 s after Ready and no change (benchmarks/README.md)
    settle = 2 * period + 10
    if baseline is not None:
        variants = {"baseline": (period, {"PYTHONPATH": baseline}), "this": (period, {})}
    elif args.compare:
        key, _, value = args.compare.partition("=")
        variants = {"baseline": (period, {key: value}), "this": (period, {})}
    else:
        variants = {"off": (0.0, {}), "on": (period, {})}

    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    with bench_env(standalone_connect=False) as bench:
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for variant in order:
                trim, env = variants[variant]
                runs[variant].append(burst(bench, n, trim, settle, f"{variant}{r}", at_start=args.at_start, env=env))
        hygiene = bench.hygiene()

    def median(variant: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[variant])

    base, this = list(variants)
    result: dict[str, Any] = {
        "connectors": n,
        "rounds": rounds,
        "trim_seconds": period,
        "settle_seconds": settle,
        "at_start": args.at_start,
        "compare": args.compare,
        "baseline_revision": args.baseline,
        "runs": runs,
        "rss_after_settle_mib": {v: median(v, "rss_after_settle_mib") for v in runs},
        "peak_rss_mib": {v: median(v, "peak_rss_mib") for v in runs},
        f"ratio_{this}_vs_{base}": median(this, "rss_after_settle_mib") / median(base, "rss_after_settle_mib"),
        "peak_ratio": median(this, "peak_rss_mib") / median(base, "peak_rss_mib"),
        "target_rss_mib": TARGET_RSS_MIB,
        "target_met": median(this, "rss_after_settle_mib") < TARGET_RSS_MIB,
        "hygiene": hygiene,
    }
    name = "burst_memory_baseline" if baseline else "burst_memory_compare" if args.compare else "burst_memory"
    write_result(name, result, args.output)
    print(
        table(
            [
                args.compare or (args.baseline and f"vs {args.baseline}") or "heap trim",
                "RSS at Ready MiB",
                f"RSS {settle:.0f} s later MiB",
                "peak MiB",
            ],
            [
                [
                    v,
                    median(v, "rss_at_ready_mib"),
                    result["rss_after_settle_mib"][v],
                    result["peak_rss_mib"][v],
                ]
                for v in variants
            ],
        )
    )
    print(
        f"RSS after the burst, {this} / {base}: {result[f'ratio_{this}_vs_{base}']:.2f}x, peak "
        f"{result['peak_ratio']:.2f}x (median of {rounds})"
    )
    return 1 if hygiene["hits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
