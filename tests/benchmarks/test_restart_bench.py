"""benchmarks/restart_bench.py's baseline side really runs the baseline's code.

No smoke run in CI (two operator restarts and a population: CI time, as burst_memory_bench);
what would make its comparison false is the baseline's tree not being the one imported, so
that is what is checked: the revision's ``operator/`` is extracted and, first on PYTHONPATH,
is what ``import connectops`` finds in a fresh interpreter, ahead of the editable install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from restart_bench import baseline_tree  # noqa: E402


def test_the_baseline_tree_is_what_the_operator_imports(tmp_path: Path) -> None:
    tree = baseline_tree("HEAD", tmp_path)
    assert (tree / "connectops" / "handlers.py").is_file()
    found = subprocess.run(
        [sys.executable, "-c", "import connectops.cli, connectops; print(connectops.__file__)"],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert Path(found).is_relative_to(tree), found
