"""benchmarks/reset_bench.py keeps working (smoke size: one reset each way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_reset_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("reset_bench", tmp_path)
    assert data["operator_seconds"]["n"] == data["direct_seconds"]["n"] == 1
    assert data["ratio_median"] > 0
    # the outcome as a watching client saw it (the figure) and as the 50 ms poller did
    (watched,), (polled,) = data["operator_seconds"]["runs"], data["operator_seconds_polled"]["runs"]
    assert watched > 0
    assert polled > 0
    # the operator's steps were all timed from its own status history
    assert {"stop", "reset", "resume", "verify"} <= set(data["operator_step_seconds_median"])
    # Connect's answer to the read-back (GET /offsets while stopped) is found in the worker's log
    # and reported beside the overhead it is part of
    (readback,) = data["readback_seconds_runs"]
    assert 0 <= readback <= data["overhead_seconds_runs"][0] + data["connect_own_seconds_runs"][0]["delete_offsets"]
    assert data["overhead_less_readback_seconds_median"] == data["overhead_seconds_median"] - readback
