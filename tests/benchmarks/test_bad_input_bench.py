"""benchmarks/bad_input_bench.py keeps working (smoke size: 20 generated specs), and finds no
unhandled exception, unexplained object, half-applied connector or leaked secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_bad_input_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("bad_input_bench", tmp_path)
    assert data["parameters"]["examples"] == 20
    assert all(v == 0 for v in data["failures"].values()), data["failures"]
    assert data["api_rejections"], "no schema-invalid variant reached the API server"
