"""benchmarks/reset_floor_bench.py keeps working (smoke size: 3 rounds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(300)
def test_reset_floor_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("reset_floor_bench", tmp_path)
    assert data["rounds"] == len(data["floor_seconds"]["runs"]) == 3
    # the status writes a REST reset makes (tests/reconcilers/test_reset_reconciler.py counts
    # them on the reconciler itself) and the other calls, each timed
    assert data["calls_per_reset"]["status PATCH"] == 6
    assert sum(data["calls_per_reset"].values()) == 14
    assert all(seconds > 0 for seconds in data["call_seconds_median"].values())
    assert data["floor_over_target"] == pytest.approx(data["floor_seconds"]["p50"] / 0.1)
