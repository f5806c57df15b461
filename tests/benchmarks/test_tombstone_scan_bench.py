"""benchmarks/tombstone_scan_bench.py keeps working (smoke size: 20,000 records), and kcat,
its baseline, is installed and reads the same topic."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_tombstone_scan_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("tombstone_scan_bench", tmp_path)
    assert data["correct"] is True, data["problems"]
    assert data["results"]["connectops"]["ok"]
    assert data["results"]["kcat"]["ok"]
    assert data["ratio"] > 0
