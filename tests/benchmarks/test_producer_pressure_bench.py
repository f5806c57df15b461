"""benchmarks/producer_pressure_bench.py keeps working (smoke size: 8 s per phase)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_producer_pressure_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("producer_pressure_bench", tmp_path)
    defaults, override = data["defaults"], data["override"]
    # the override carries more records per request, measured by the worker and by the proxy
    assert override["last"]["records_per_request_avg"] > defaults["last"]["records_per_request_avg"]
    assert data["records_per_request_factor"] > 1
    assert defaults["wire_records_per_request"] is not None
