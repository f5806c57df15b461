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
    # the split at the proxy found each sample's config write (else "beyond the write" would be
    # the whole operator time, and the target judged on the wrong figure)
    assert dict(size["operator_calls"])["POST /connectors"] == 5
    assert size["operator_in_connect_seconds"]["min"] > 0
    assert size["own_overhead_seconds"]["n"] == 5
    resync = data["full_resync"]
    assert resync["connectors"] == 10
    # the configured bound on concurrent Connect calls holds, seen from the proxy
    assert 1 <= resync["max_concurrent_connect_requests"] <= 3
