"""requirements/operator.lock, the operator image's dependencies (Dockerfile: pip install
--require-hashes), still satisfies pyproject.toml: a dependency added or narrowed there without
regenerating the lock fails here instead of in the image build."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "operator.lock"


def pins() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes), from the lock's ``name==version \\ --hash=...`` entries."""
    out: dict[str, tuple[str, int]] = {}
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        assert found, f"not an exact pin: {line[:80]}"
        out[canonicalize_name(found[1])] = (found[2], line.count("--hash=sha256:"))
    return out


def test_every_dependency_is_pinned_with_hashes_and_satisfied() -> None:
    locked = pins()
    assert locked
    assert all(hashes for _, hashes in locked.values()), "an entry without a hash: --require-hashes refuses it"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for spec in project["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement.name} is not in the lock: regenerate it (see its header)"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), f"{name}=={version} does not satisfy {spec}"
    # the operator image only: none of the Spark job's or the tests' packages
    assert not set(locked) & {"pyspark", "pandas", "pyarrow", "pytest"}
