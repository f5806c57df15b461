"""benchmarks/rotation_bench.py keeps working (smoke size: 20 Connectors, 3 rotations, 10 s resync)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.smoke import run_smoke


@pytest.mark.timeout(600)
def test_rotation_bench_smoke(tmp_path: Path) -> None:
    data = run_smoke("rotation_bench", tmp_path)
    on, off = data["on"], data["off"]
    assert data["connectors"] == 20
    for mode in (on, off):
        assert mode["rotated"] == 3
        # each rotated key written once; the Secret whose changed key nobody reads: never
        assert mode["config_puts"] == 3
        assert mode["config_puts_to_untouched"] == 0
        assert mode["idle_api_requests"] > 0  # the resyncs' reads, in both modes
    assert on["events"] == {"SecretRotated": 3}
    assert off["events"] == {"DriftCorrected": 3}
    # the watch brings it at once; without it the resync (10 s here) does
    assert on["rotation_seconds_until_all_in_connect"] < 5
