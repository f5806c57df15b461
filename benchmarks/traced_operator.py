"""``connectops`` under tracemalloc, for the benchmarks' memory attribution (issue 17: where the
RSS goes at 1,000 and 10,000 Connectors).

Run as the operator would be (``python benchmarks/traced_operator.py run ...``); on SIGUSR2 it
writes, to ``$CONNECTOPS_TRACEMALLOC_OUT``, the Python heap by package (the top directory under
site-packages or the standard library, ``connectops`` for the product) and the largest
allocation sites. tracemalloc roughly doubles the heap and slows the process: the RSS figures
come from untraced runs; this says where it goes.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import signal
import sys
import sysconfig
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType

#: frames kept per allocation: 1 says where (the default, cheap); more say on whose behalf
FRAMES = int(os.environ.get("CONNECTOPS_TRACEMALLOC_FRAMES", "1"))
SITES = 30


def package(filename: str) -> str:
    path = Path(filename)
    parts = path.parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].split(".")[0].removesuffix(".py")
    if "connectops" in parts:
        return "connectops"
    if filename.startswith(sysconfig.get_paths()["stdlib"]):
        rel = Path(filename).relative_to(sysconfig.get_paths()["stdlib"]).parts
        return f"stdlib:{rel[0].removesuffix('.py')}" if rel else "stdlib"
    return filename if filename.startswith("<") else "other"


def census() -> list[list[object]]:
    """Objects the collector tracks, by type: count and shallow size (what there is one of per
    Connector shows up as a count near the population)."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        name = f"{type(obj).__module__}.{type(obj).__qualname__}"
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    return [[name, counts[name], size] for name, size in sizes.most_common(SITES)]


def dump(_signum: int, _frame: FrameType | None) -> None:
    snapshot = tracemalloc.take_snapshot()
    by_line = snapshot.statistics("lineno")
    packages: Counter[str] = Counter()
    for stat in by_line:
        packages[package(stat.traceback[0].filename)] += stat.size
    report = {
        "traced_bytes": sum(s.size for s in by_line),
        "by_package": [[name, size] for name, size in packages.most_common()],
        "top_sites": [[str(s.traceback[0]), s.size, s.count] for s in by_line[:SITES]],
        "by_type": census(),
    }
    if FRAMES > 1:
        # on whose behalf: the innermost frame of the product or of kopf in each allocation's stack
        callers: Counter[str] = Counter()
        for stat in snapshot.statistics("traceback"):
            owner = next(
                (str(f) for f in reversed(stat.traceback) if "/connectops/" in f.filename or "/kopf/" in f.filename),
                str(stat.traceback[-1]),
            )
            callers[owner] += stat.size
        report["by_caller"] = [[name, size] for name, size in callers.most_common(SITES)]
    Path(os.environ["CONNECTOPS_TRACEMALLOC_OUT"]).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR2, dump)
    sys.argv = ["connectops", *sys.argv[1:]]
    runpy.run_module("connectops.cli", run_name="__main__", alter_sys=True)
