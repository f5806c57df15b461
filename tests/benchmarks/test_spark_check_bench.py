"""benchmarks/spark_check_bench.py keeps working (smoke size: 1k partitions, one run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_spark_check_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("spark_check_bench", tmp_path, table=False)
    assert data["results"], data
    assert all(r["results_agree"] for r in data["results"]), data["results"]
