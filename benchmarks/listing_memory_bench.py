"""Benchmark: the memory a large expanded listing costs the operator, parsed whole vs filtered.

A Connect worker shared by many teams lists every team's connectors in its expanded listing
(``GET /connectors?expand=status&expand=info``); the operator keeps only those its objects of
one namespace manage. Parsed whole (models for every entry, then filtered: the baseline), a
listing of 50,000 connectors took its weight several times over; parsed by
``connect_answers.parse_expanded`` (each entry decoded on its own, kept or dropped), only what
is kept becomes models. No real worker can host 50,000 connectors here: the listing is built in
the shape of a real worker's answer (tests/e2e/test_listing_shape.py holds that shape to a real
worker's listing), written to a file, and each mode runs in a fresh process that reads the file
and parses it, reporting the peak RSS it added (``ru_maxrss``) and the time.

    .venv/bin/python benchmarks/listing_memory_bench.py [--connectors 50000] [--kept-share 0.1]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def entry(i: int, tasks: int = 1) -> tuple[str, dict[str, Any]]:
    """One connector as a real worker lists it (its keys and nesting: test_listing_shape.py)."""
    name = f"conn-{i:06d}"
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": str(tasks),
        "file": f"/data/in-{i}.txt",
        "topic": f"topic-{i}",
        "name": name,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    }
    return name, {
        "info": {
            "name": name,
            "config": config,
            "tasks": [{"connector": name, "task": t} for t in range(tasks)],
            "type": "source",
        },
        "status": {
            "name": name,
            # version: the plugin's, which Connect 4.1+ reports (KIP-891)
            "connector": {"state": "RUNNING", "worker_id": "10.0.0.1:8083", "version": "4.3.1"},
            "tasks": [
                {"id": t, "state": "RUNNING", "worker_id": "10.0.0.1:8083", "version": "4.3.1"} for t in range(tasks)
            ],
            "type": "source",
        },
    }


def _child(path: str, mode: str, share: float) -> None:
    sys.path.insert(0, str(ROOT / "operator"))
    from connectops.adapters import connect_answers as answers

    body = Path(path).read_bytes()
    every = max(1, round(1 / share))

    def keep(name: str) -> bool:
        return int(name.rsplit("-", 1)[1]) % every == 0

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if mode == "whole":
        kept = {k: v for k, v in answers.EXPANDED.validate_json(body).items() if keep(k)}
    else:
        kept = answers.parse_expanded(body, keep)
    took = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    added = peak - base / 1024
    print(
        json.dumps(
            {
                "mode": mode,
                "kept": len(kept),
                "seconds": round(took, 2),
                "peak_added_mib": round(added, 1),
                "peak_mib": round(peak, 1),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connectors", type=int, default=50_000)
    parser.add_argument("--kept-share", type=float, default=0.1)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.kept_share)
        return
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(json.dumps(dict(entry(i) for i in range(args.connectors))).encode())
        f.flush()
        size = Path(f.name).stat().st_size / (1 << 20)
        runs = {}
        for mode in ("whole", "filtered"):
            out = subprocess.run(
                [sys.executable, __file__, "--kept-share", str(args.kept_share), "--child", f.name, mode],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs[mode] = json.loads(out)
    whole, filtered = runs["whole"], runs["filtered"]
    assert whole["kept"] == filtered["kept"], runs
    print(f"listing of {args.connectors} connectors, {size:.1f} MiB, {filtered['kept']} kept")
    for mode, run in runs.items():
        print(
            f"  {mode:8s} process peak {run['peak_mib']:7.1f} MiB (added by the parse {run['peak_added_mib']:6.1f})"
            f"  {run['seconds']:6.2f} s"
        )
    ratio = filtered["peak_mib"] / whole["peak_mib"]
    print(f"  filtered / whole: process peak {ratio:.2f}, time {filtered['seconds'] / whole['seconds']:.2f}")


if __name__ == "__main__":
    main()
