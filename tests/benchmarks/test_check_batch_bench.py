"""benchmarks/check_batch_bench.py keeps working (smoke size: 8 Connectors changed at once: two
waves of the stand-in cluster's 4 drivers in the baseline mode, one application batched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_check_batch_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("check_batch_bench", tmp_path)
    batched, baseline = data["results"]
    assert (batched["mode"], baseline["mode"]) == ("batched", "baseline")
    # the 8 changes of one Connect cluster share an application (two when the operator's
    # reconciles of the burst straddle the 5 s window on a loaded machine); one each before
    assert batched["applications"] <= 2, batched
    assert batched["connectors_per_application"]["max"] >= 4, batched
    assert baseline["applications"] == 8, baseline
    assert batched["peak_applications_in_flight"] <= 4
    for result in (batched, baseline):
        assert result["states"] == {"COMPLETED": 8}, result
        assert result["verdicts_not_matching_their_configmap"] == [], result
