#!/usr/bin/env python3
"""Vendor an earlier version of the Helm chart and of the operator's code as the upgrade test's
fixtures (tests/helm/test_upgrade.py).

    scripts/previous-chart-fixture.py [COMMIT]           write both archives below
    scripts/previous-chart-fixture.py [COMMIT] --check   exit 1 if either is not what COMMIT gives

tests/helm/fixtures/previous-chart.tgz is the chart (helm/connectops/, its crds/ included),
packaged as Helm packages a chart (a gzipped tar whose top directory is the chart's name),
which ``helm install`` takes as it is. tests/helm/fixtures/previous-operator.tgz is the
operator's package (operator/connectops/) under a top directory ``connectops/``: extracted, its
parent directory goes on PYTHONPATH, so that the test's first operator process runs the code
that release shipped, with the venv's dependencies.

The test runs on a clean, possibly shallow, clone: it must not read git history. So both trees
as of COMMIT are read here, once, file by file with ``git show COMMIT:<path>``. Each archive's
header (a pax global header, ``comment``) names the commit; ``tar --pax-option`` or Python's
``tarfile`` shows it. Byte-identical for the same commit (fixed times, modes and owners, gzip
without a timestamp), so --check can compare. Regenerate them together when a release makes a
new "previous version". Standard library and git only.
"""

from __future__ import annotations

import argparse
import gzip
import io
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Final, NamedTuple

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "helm" / "fixtures"
#: the chart before CEL admission rules, step deadlines, resume holds and GroupFailover came in
#: (version and appVersion 0.1.0, as every commit since the chart's first has named them)
DEFAULT_COMMIT = "41fd7120cbe5b0e122cf79def98ee791ba74cf5e"


class Tree(NamedTuple):
    """One directory of the repository, packaged under ``top`` as ``archive``."""

    path: str
    top: str
    what: str
    marker: str  # a file that must be there (the wrong path packages nothing otherwise)
    archive: Path


CHART: Final = Tree("helm/connectops", "connectops", "chart", "Chart.yaml", FIXTURES / "previous-chart.tgz")
OPERATOR: Final = Tree(
    "operator/connectops", "connectops", "operator code", "cli.py", FIXTURES / "previous-operator.tgz"
)
TREES: Final = (CHART, OPERATOR)


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True).stdout


def package(commit: str, tree: Tree = CHART) -> bytes:
    sha = _git("rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    subject, when = _git("log", "-1", "--format=%s%x00%ct", sha).decode().strip().split("\0")
    paths = sorted(_git("ls-tree", "-r", "--name-only", sha, f"{tree.path}/").decode().split())
    if f"{tree.path}/{tree.marker}" not in paths:
        raise SystemExit(f"no {tree.path}/{tree.marker} at {sha}")
    comment = (
        f"connectops {tree.what} ({tree.path}/) as of commit {sha} ({subject[:100]}); "
        "by scripts/previous-chart-fixture.py"
    )
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": comment}) as tar:
        for path in paths:
            data = _git("show", f"{sha}:{path}")
            info = tarfile.TarInfo(f"{tree.top}/" + path.removeprefix(tree.path + "/"))
            info.size, info.mtime, info.mode = len(data), int(when), 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", nargs="?", default=DEFAULT_COMMIT)
    parser.add_argument("--check", action="store_true")
    options = parser.parse_args()
    failed = 0
    for tree in TREES:
        data = package(options.commit, tree)
        where = tree.archive.relative_to(REPO)
        if options.check:
            if not tree.archive.is_file() or tree.archive.read_bytes() != data:
                print(f"{where} is not what {options.commit} gives", file=sys.stderr)
                failed = 1
            continue
        tree.archive.parent.mkdir(parents=True, exist_ok=True)
        tree.archive.write_bytes(data)
        print(f"{where}: {len(data)} bytes, the {tree.what} as of {options.commit}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
