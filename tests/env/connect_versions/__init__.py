"""Older Apache Kafka Connect workers from Maven Central, resolved lazily into the provisioning cache.

The test environment's own Kafka is 4.3.1 (tests/env/kafka/pom.xml, by provision.sh). The
operator also has paths for older workers (capabilities by version: tombstone resets on 3.5,
REST resets without create-stopped on 3.6, a refusal before 3.5; failed offset commits under
producer pressure on 3.0.0); tests/e2e/test_old_workers.py and
tests/e2e/test_founding_case_pre31.py run them against real workers of these releases. They
are fetched by the fixture that needs them, not by provision.sh, so a session that runs no
such test pays nothing: ``pom.xml`` here with ``-Dconnect.version``, ``mvn
dependency:copy-dependencies`` into ``$CONNECTOPS_TESTENV_CACHE/connect-<version>/libs``, the
main jars checked against ``SHA256SUMS`` (Maven has no lock file) before ``.complete`` is
written. Maven is installed by provision.sh (Debian's ``maven``).
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Final

from tests.env.servers import MissingTestEnvError, cache_dir

HERE: Final = Path(__file__).resolve().parent
POM: Final = HERE / "pom.xml"
SUMS: Final = HERE / "SHA256SUMS"

#: The newest patch release of each line on Maven Central (checked with ``mvn dependency:get``:
#: 3.4.2, 3.5.3 and 3.6.3 do not exist), by the operator path each one exercises. The one
#: exception is 3.0: KAFKA-12226 (commits cover acknowledged records, no "Failed to flush") was
#: backported to 3.0.1 (its connect-runtime has ``SubmittedRecords``; 3.0.0's and 2.8.2's
#: WorkerSourceTask still log "Failed to flush, timed out while waiting for producer to flush
#: outstanding {} messages"), so the newest release whose commits wait for every outstanding
#: record is 3.0.0, not 3.0.2.
CONNECT_30: Final = "3.0.0"  # offset commits wait for every outstanding record: the founding case
CONNECT_34: Final = "3.4.1"  # before KIP-875: no STOPPED state, every reset refused
CONNECT_35: Final = "3.5.2"  # STOPPED and GET /offsets, no PATCH/DELETE: tombstone resets
CONNECT_36: Final = "3.6.2"  # PATCH/DELETE /offsets, no initial_state (KIP-980, 3.7)
VERSIONS: Final = (CONNECT_30, CONNECT_34, CONNECT_35, CONNECT_36)

#: A cold resolution downloads ~25 MB per version; Maven's own retries sit inside this.
MVN_TIMEOUT_SECONDS: Final = 600.0


def expected_sums(version: str) -> dict[str, str]:
    """jar file name -> SHA-256, for ``version``, from SHA256SUMS (lines ``<sha>  <version>/<jar>``)."""
    sums: dict[str, str] = {}
    for line in SUMS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        digest, path = line.split(maxsplit=1)
        folder, _, jar = path.strip().partition("/")
        if folder == version:
            sums[jar] = digest
    return sums


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def mismatched(libs: Path, sums: dict[str, str]) -> dict[str, str]:
    """The jars of ``sums`` whose SHA-256 in ``libs`` differs: name -> digest found (or "missing")."""
    found = {jar: _sha256(libs / jar) if (libs / jar).is_file() else "missing" for jar in sums}
    return {jar: digest for jar, digest in found.items() if digest != sums[jar]}


def _stamp(version: str) -> str:
    # a changed pom or sums file resolves anew, as provision.sh keys its caches
    return hashlib.sha256(POM.read_bytes() + SUMS.read_bytes() + version.encode()).hexdigest()


def connect_libs(version: str) -> Path:
    """The classpath directory of Connect ``version``, resolving it first when it is not cached.

    Safe to call from several pytest-xdist workers at once: one resolves under a file lock, the
    others wait for it and reuse its result.
    """
    if version not in VERSIONS:
        raise ValueError(f"Connect {version} is not pinned here (pinned: {', '.join(VERSIONS)})")
    sums = expected_sums(version)
    if not sums:
        raise MissingTestEnvError(f"no SHA-256 sums for Connect {version} in {SUMS}")
    libs = cache_dir() / f"connect-{version}" / "libs"
    complete = libs / ".complete"
    stamp = _stamp(version)
    libs.parent.mkdir(parents=True, exist_ok=True)
    with (libs.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if complete.is_file() and complete.read_text().strip() == stamp:
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MissingTestEnvError("mvn not found: run tests/env/provision.sh (Debian's maven)")
        shutil.rmtree(libs, ignore_errors=True)
        libs.mkdir()
        log = libs.parent / "mvn.log"
        with log.open("wb") as out:
            done = subprocess.run(
                [
                    *(mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies"),
                    *("-DincludeScope=runtime", f"-Dconnect.version={version}", f"-DoutputDirectory={libs}"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=MVN_TIMEOUT_SECONDS,
                check=False,
            )
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise MissingTestEnvError(f"resolving Connect {version} from Maven Central failed:\n{tail}")
        wrong = mismatched(libs, sums)
        if wrong:
            shutil.rmtree(libs, ignore_errors=True)
            raise MissingTestEnvError(f"Connect {version} jars do not match {SUMS}: {wrong}")
        complete.write_text(stamp + "\n")
        return libs
