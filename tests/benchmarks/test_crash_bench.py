"""benchmarks/crash_bench.py keeps working (smoke size: 1 boundary, 1 random SIGKILL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_crash_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("crash_bench", tmp_path)
    assert data["boundary_kills"] == data["random_kills"] == 1
    assert data["wrong"] == 0
    assert data["planned_final_state"] == 2
    assert all(case["outcome"] == "planned final state" for case in data["cases"])
