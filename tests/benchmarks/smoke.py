"""Running a benchmark script at its smoke size, as a user would, and reading its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_smoke(script: str, tmp_path: Path, *extra: str, timeout: float = 540, table: bool = True) -> dict[str, Any]:
    output = tmp_path / f"{script}.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), "--smoke", "--output", str(output), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, f"{script} exited {result.returncode}\n{result.stdout}\n{result.stderr[-6000:]}"
    if table:
        assert "| ---" in result.stdout, result.stdout  # the markdown table
    data: dict[str, Any] = json.loads(output.read_text())
    assert data["machine"]["cpus"] >= 1
    if "hygiene" in data:
        assert data["hygiene"]["hits"] == []
        assert data["hygiene"]["operator_logs"] >= 1
    return data
