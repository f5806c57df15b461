"""Test-only Kafka Connect plugins, built by ``tests/env/plugins/build.sh`` (run by provision.sh).

``testsinks``: a sink that does not confirm offset changes, and a sink of known speed (see their Java sources).
``versioned``: one source in two versions side by side (see ``versioned_plugin_dir``).
``mm2shapes``: three source connectors whose offsets have MirrorMaker 2's shapes and whose
``alterOffsets`` validate like MM2's (see the Java sources), under class names that are not MM2's:
for tests of recognising MM2 by its offsets' shapes (forks, wrappers). Real MirrorMaker 2
(connect-mirror, on every worker's classpath) is what the offset-reset tests run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.env.servers import MissingTestEnvError, cache_dir

PLUGINS_DIR = Path(__file__).resolve().parent
BUILD_HINT = "run tests/env/plugins/build.sh (or tests/env/provision.sh, which runs it)"


def sources_hash(plugin: str) -> str:
    """The hash build.sh records next to the jar: sha256 of ``sha256sum``-style lines for every
    file under ``<plugin>/src``, sorted by path."""
    root = PLUGINS_DIR / plugin
    files = sorted(str(p.relative_to(root)) for p in (root / "src").rglob("*") if p.is_file())
    lines = "".join(f"{hashlib.sha256((root / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def plugin_jar(plugin: str) -> Path:
    """The built jar of ``plugin``; fails clearly when it is missing or older than its sources."""
    jar = cache_dir() / f"{plugin}.jar"
    if not jar.is_file():
        raise MissingTestEnvError(f"test plugin jar {jar} not built; {BUILD_HINT}")
    stamp = jar.with_name(f"{jar.name}.sha256")
    built = stamp.read_text().strip() if stamp.is_file() else ""
    if built != sources_hash(plugin):
        raise MissingTestEnvError(f"test plugin jar {jar} is older than its sources; {BUILD_HINT}")
    return jar


def mm2_shapes_jar() -> Path:
    """``mm2shapes.jar``: MirrorSourceShapeConnector, MirrorCheckpointShapeConnector and
    MirrorHeartbeatShapeConnector in package ``io.connectops.testplugins``."""
    return plugin_jar("mm2shapes")


def sinks_jar() -> Path:
    """``testsinks.jar``: ExternalOffsetsSinkConnector, a file sink that keeps Connect's default
    ``alterOffsets`` (returns false: it does not confirm offset changes, as most real sinks)."""
    return plugin_jar("testsinks")


def versioned_plugin_dir() -> Path:
    """The ``plugin.path`` entry holding ``versioned-source-<v>.jar`` for each version of
    :data:`VERSIONED_VERSIONS`, each in a directory of its own (its own class loader): the same
    class, :data:`VERSIONED_SOURCE`, whose ``version()`` and records say which jar runs."""
    path = cache_dir() / "versioned"
    stamp = path.with_name("versioned.sha256")
    built = stamp.read_text().strip() if stamp.is_file() else ""
    if not path.is_dir() or built != sources_hash("versioned"):
        raise MissingTestEnvError(f"test plugin versions in {path} missing or older than their sources; {BUILD_HINT}")
    return path


VERSIONED_SOURCE = "io.connectops.testplugins.versioned.VersionedSourceConnector"
VERSIONED_VERSIONS = tuple((PLUGINS_DIR / "versioned" / "src" / "versions.txt").read_text().split())
EXTERNAL_OFFSETS_SINK = "io.connectops.testplugins.ExternalOffsetsSinkConnector"
MM2_SOURCE = "io.connectops.testplugins.MirrorSourceShapeConnector"
MM2_CHECKPOINT = "io.connectops.testplugins.MirrorCheckpointShapeConnector"
MM2_HEARTBEAT = "io.connectops.testplugins.MirrorHeartbeatShapeConnector"
