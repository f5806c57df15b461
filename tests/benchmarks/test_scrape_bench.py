"""benchmarks/scrape_bench.py keeps working (smoke size: 100 Connectors, one round)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(300)
def test_scrape_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("scrape_bench", tmp_path)
    (entry,) = data["sizes"]
    assert entry["connectors"] == 100
    # both sides wrote the same exposition (the texts are compared in test_metrics_server), but
    # for the process figures of the registry's part (CPU seconds, gc counts), each its own
    assert entry["bytes"]["this"] == pytest.approx(entry["bytes"]["baseline"], abs=200)
    assert entry["bytes"]["this"] > 100 * 20 * 40
    assert all(
        entry[key][side] >= 0 for key in ("rss_added_mib", "heap_peak_mib", "seconds") for side in ("this", "baseline")
    )
