"""Plugin versions (KIP-891, Kafka Connect 4.1+): does the worker have a version of each plugin
the spec pins? Pure: the reconciler passes the worker's ``GET /connector-plugins?connectorsOnly=false``.

A pinned version that matches nothing installed is not something a retry fixes: Connect would
accept the config and then fail the connector at every start ("Plugin ... not found that
matches the version range ..."). The reconciler reports it as a condition instead, and checks
again when the spec or the worker's plugin list changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from connectops.models.connector import (
    CONNECTOR_VERSION_KEY,
    CONVERTER_CLASS_KEYS,
    CONVERTER_VERSION_KEYS,
    ConnectorSpec,
)
from connectops.models.maven_version import MavenVersion, requirement

CONNECTOR_TYPES = frozenset({"source", "sink"})
#: the plugin type each converter key loads (PluginType's names in the REST answer)
CONVERTER_TYPES = {"key": "converter", "value": "converter", "header": "header_converter"}
#: what Connect prints for a plugin that does not say its version (omitted from the REST answer)
UNDEFINED_VERSION = "undefined"


class Plugin(Protocol):
    """One entry of ``GET /connector-plugins?connectorsOnly=false`` (one per installed version)."""

    @property
    def class_name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def version(self) -> str | None: ...


def names_of(class_name: str) -> set[str]:
    """The names Connect resolves to ``class_name``: the full name, the simple name, and the simple
    name without its type suffix (``PluginUtils.prunedName``)."""
    simple = class_name.rsplit(".", 1)[-1]
    names = {class_name, simple}
    for suffix in ("Connector", "HeaderConverter", "Converter"):
        if simple.endswith(suffix) and len(simple) > len(suffix):
            names.add(simple.removesuffix(suffix))
    return names


@dataclass(frozen=True)
class VersionProblem:
    """A pinned version that no installed version of the plugin matches."""

    key: str
    plugin: str
    wanted: str
    #: the installed versions of that plugin, newest first
    available: tuple[str, ...]

    def message(self) -> str:
        shown = ", ".join(self.available) or "none that report a version"
        return f"{self.key}={self.wanted}: no installed version of {self.plugin} matches (installed: {shown})"


def version_problems(spec: ConnectorSpec, plugins: Sequence[Plugin]) -> list[VersionProblem]:
    """The spec's pinned versions the worker cannot run. A plugin whose class is not installed at
    all is left out: that is PluginNotFound (connector) or Connect's validation (converters)."""
    wanted: list[tuple[str, str, frozenset[str], str]] = []
    if spec.plugin_version is not None:
        wanted.append((CONNECTOR_VERSION_KEY, spec.connector_class, CONNECTOR_TYPES, spec.plugin_version))
    if spec.converter_versions is not None:
        for which, key in CONVERTER_VERSION_KEYS.items():
            version = getattr(spec.converter_versions, which)
            converter = spec.config.get(CONVERTER_CLASS_KEYS[which])
            if version is not None and isinstance(converter, str):
                wanted.append((key, converter, frozenset({CONVERTER_TYPES[which]}), version))
    problems = []
    for key, plugin, types, version in wanted:
        installed = [p for p in plugins if p.type in types and plugin in names_of(p.class_name)]
        required = requirement(version)
        if not installed or required is None:
            continue
        versions = [p.version or UNDEFINED_VERSION for p in installed]
        if not any(required.contains(v) for v in versions):
            newest_first = sorted(set(versions), key=MavenVersion, reverse=True)
            problems.append(VersionProblem(key, plugin, version, tuple(newest_first)))
    return problems
