"""benchmarks/apply_bench.py keeps working (smoke size: 10 Connectors, 5 samples)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_apply_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("apply_bench", tmp_path, "--concurrency", "3")
    [size] = data["sizes"]
    assert size["connectors_present"] == 10
    assert size["operator_seconds"]["n"] == 5
    assert size["rss_mib"] > 20
    # the split at the proxy found each sample's config write, after the operator's own calls
    assert dict(size["operator_calls"])["POST /connectors"] == 5
    assert size["operator_write_seconds"]["min"] > 0
    assert size["operator_write_at_seconds"]["min"] >= size["operator_lead_in_seconds"]["min"] > 0
    # the three parts add up to each side's time (the config may read back live a moment before
    # the write's answer is through the proxy: a little below zero is the same instant)
    assert size["write_overhead_seconds"]["n"] == 5
    totals, catch_ups = size["operator_seconds"]["runs"], size["operator_catch_up_seconds"]["runs"]
    for total, catch_up in zip(totals, catch_ups, strict=True):
        assert -0.1 < catch_up < total
    resync = data["full_resync"]
    assert resync["connectors"] == 10
    # the configured bound on concurrent Connect calls holds, seen from the proxy
    assert 1 <= resync["max_concurrent_connect_requests"] <= 3
