"""benchmarks/fault_bench.py keeps working (smoke size: 1 reset at each of 5%, 20%, 50% faults)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(900)
def test_fault_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("fault_bench", tmp_path, timeout=840)
    rates = {r["rate"]: r for r in data["results"]}
    assert set(rates) == {0.05, 0.2, 0.5}
    for r in rates.values():
        assert r["stuck"] == 0, r
        assert r["succeeded"] + r["failed_with_reason"] == r["resets"] == 1
    # faults were really injected at the highest rate
    assert rates[0.5]["faults_injected"] > 0
