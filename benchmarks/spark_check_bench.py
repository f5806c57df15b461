"""Benchmark: the connectops-check metrics on Spark vs the pandas reference, same data, same run.

For each size, one generated snapshot (``connectops_check.synthetic``) is turned into Arrow
tables once; then the Spark job (``metrics.compute``: Arrow -> DataFrames, one SQL statement
for lag, Burrow status, time lag, rates and traffic per partition plus the lag series, one
``toArrow``, and the bounded summaries on the driver) and the pandas reference
(``reference.compute``) each run on those tables, and their results are checked equal before
any number is reported. Spark's session start and a warm-up run are excluded and reported
separately: a SparkApplication pays them once per check, whatever the size.

    .venv/bin/python benchmarks/spark_check_bench.py                  # 1k, 10k, 100k, 1M partitions
    .venv/bin/python benchmarks/spark_check_bench.py --smoke          # 1k only (CI)
    .venv/bin/python benchmarks/spark_check_bench.py --sizes 5000 50000 --samples 12
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "spark"))  # runnable from a checkout without an install

from connectops_check import metrics, reference  # noqa: E402
from connectops_check.frames import snapshot_tables  # noqa: E402
from connectops_check.job import spark_session  # noqa: E402
from connectops_check.results import MetricResults  # noqa: E402
from connectops_check.synthetic import random_snapshot  # noqa: E402

DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "spark_check.json"
DEFAULT_DRIVER_MEMORY = "6g"


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, list[float], Any]:
    """Median wall time of ``repeat`` runs, all the times, and the last result."""
    times: list[float] = []
    result: Any = None
    for _ in range(repeat):
        # py4j frees JVM-side DataFrames only when Python collects their proxies; without
        # this, repeated runs pile up in the 1 GiB local driver and slow down (or fail)
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def same_results(a: MetricResults, b: MetricResults) -> bool:
    """Exact equality except floats (sums depend on summation order): equal to 1e-9 relative."""
    return _same(dataclasses.asdict(a), dataclasses.asdict(b))


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return bool(x == y)


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False, timeout=30)
    except OSError:
        return "unknown"
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000], help="partition counts")
    p.add_argument("--smoke", action="store_true", help="1k partitions only, one repeat (CI)")
    p.add_argument("--samples", type=int, default=10, help="samples per partition (default 10)")
    p.add_argument("--repeat", type=int, default=3, help="runs per engine and size; the median is reported")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument(
        "--driver-memory",
        default=DEFAULT_DRIVER_MEMORY,
        help=f"local driver heap (default {DEFAULT_DRIVER_MEMORY}: 1M partitions x 10 samples outgrow Spark's 1g)",
    )
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results file")
    args = p.parse_args(argv)
    sizes = [1_000] if args.smoke else args.sizes
    repeat = 1 if args.smoke else args.repeat

    t0 = time.perf_counter()
    spark = spark_session(args.master, args.driver_memory)
    session_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    metrics.compute(spark, snapshot_tables(random_snapshot(200, args.samples, seed=99)))
    warmup_s = time.perf_counter() - t0

    rows: list[dict[str, Any]] = []
    header = f"{'partitions':>10} {'rows':>10} {'spark s':>9} {'pandas s':>9} {'spark/pandas':>13} {'agree':>6}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        snap = random_snapshot(size, args.samples, seed=size)
        tables = snapshot_tables(snap)
        spark_s, spark_all, spark_res = timed(partial(metrics.compute, spark, tables), repeat)
        pandas_s, pandas_all, pandas_res = timed(partial(reference.compute, tables), repeat)
        agree = same_results(spark_res, pandas_res)
        row = {
            "partitions": size,
            "rows": tables.samples.num_rows,
            "spark_s": round(spark_s, 3),
            "pandas_s": round(pandas_s, 3),
            "spark_over_pandas": round(spark_s / pandas_s, 2),
            "spark_runs_s": [round(t, 3) for t in spark_all],
            "pandas_runs_s": [round(t, 3) for t in pandas_all],
            "results_agree": agree,
        }
        rows.append(row)
        print(
            f"{size:>10} {row['rows']:>10} {spark_s:>9.2f} {pandas_s:>9.2f} "
            f"{row['spark_over_pandas']:>13.2f} {agree!s:>6}"
        )
    spark.stop()

    import pandas
    import pyspark

    report = {
        "benchmark": "connectops-check metrics: Spark vs pandas reference",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "pandas": pandas.__version__,
            "java": java_version(),
        },
        "master": args.master,
        "driver_memory": args.driver_memory,
        "samples": args.samples,
        "repeat": repeat,
        "spark_session_start_s": round(session_s, 2),
        "spark_warmup_s": round(warmup_s, 2),
        "results": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nsession start {session_s:.1f}s, warm-up {warmup_s:.1f}s (excluded above); wrote {args.output}")
    return 0 if all(r["results_agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
