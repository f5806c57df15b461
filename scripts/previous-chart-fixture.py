#!/usr/bin/env python3
"""Vendor an earlier version of the Helm chart as the upgrade test's fixture (tests/helm/test_upgrade.py).

    scripts/previous-chart-fixture.py [COMMIT]           write tests/helm/fixtures/previous-chart.tgz
    scripts/previous-chart-fixture.py [COMMIT] --check   exit 1 if that file is not what COMMIT gives

The test runs on a clean, possibly shallow, clone: it must not read git history. So the chart as
of COMMIT (helm/connectops/, its crds/ included) is read here, once, file by file with
``git show COMMIT:helm/connectops/...``, and packaged as Helm packages a chart (a gzipped tar
whose top directory is the chart's name), which ``helm install`` takes as it is. The archive's
header (a pax global header, ``comment``) names the commit; ``tar --pax-option`` or Python's
``tarfile`` shows it. Byte-identical for the same commit (fixed times and owners), so --check
can compare. Regenerate it when a release makes a new "previous version". Standard library and
git only.
"""

from __future__ import annotations

import argparse
import gzip
import io
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHART = "helm/connectops"
FIXTURE = REPO / "tests" / "helm" / "fixtures" / "previous-chart.tgz"
#: the chart before CEL admission rules, step deadlines, resume holds and GroupFailover came in
DEFAULT_COMMIT = "41fd7120cbe5b0e122cf79def98ee791ba74cf5e"


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True).stdout


def package(commit: str) -> bytes:
    sha = _git("rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    subject, when = _git("log", "-1", "--format=%s%x00%ct", sha).decode().strip().split("\0")
    paths = sorted(_git("ls-tree", "-r", "--name-only", sha, f"{CHART}/").decode().split())
    if f"{CHART}/Chart.yaml" not in paths:
        raise SystemExit(f"no {CHART}/Chart.yaml at {sha}")
    comment = f"connectops chart ({CHART}/) as of commit {sha} ({subject[:100]}); by scripts/previous-chart-fixture.py"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": comment}) as tar:
        for path in paths:
            data = _git("show", f"{sha}:{path}")
            info = tarfile.TarInfo("connectops/" + path.removeprefix(CHART + "/"))
            info.size, info.mtime, info.mode = len(data), int(when), 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", nargs="?", default=DEFAULT_COMMIT)
    parser.add_argument("--check", action="store_true")
    options = parser.parse_args()
    data = package(options.commit)
    if options.check:
        if not FIXTURE.is_file() or FIXTURE.read_bytes() != data:
            print(f"{FIXTURE.relative_to(REPO)} is not what {options.commit} gives", file=sys.stderr)
            return 1
        return 0
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_bytes(data)
    print(f"{FIXTURE.relative_to(REPO)}: {len(data)} bytes, the chart as of {options.commit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
