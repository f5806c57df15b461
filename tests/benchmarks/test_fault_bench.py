"""benchmarks/fault_bench.py keeps working (smoke size: 1 reset at 50% faults).

One rate, the one where faults are sure to be injected: the rates differ only by a number in the
fault rules, and each costs ~40 s of CI (the full run, with every rate, is the benchmark's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(900)
def test_fault_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("fault_bench", tmp_path, "--rates", "0.5", timeout=840)
    rates = {r["rate"]: r for r in data["results"]}
    assert set(rates) == {0.5}
    for r in rates.values():
        assert r["stuck"] == 0, r
        assert r["succeeded"] + r["failed_with_reason"] == r["resets"] == 1
    # faults were really injected at the highest rate
    assert rates[0.5]["faults_injected"] > 0
