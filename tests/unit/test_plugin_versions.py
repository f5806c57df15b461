"""Plugin version pins (KIP-891): the spec fields, the rendered keys, and the check against the
worker's plugin list, with plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from connectops.models.connector import ConnectorSpec
from connectops.planning.connector import (
    ObservedConnector,
    RestartBook,
    capabilities_for,
    plan_connector,
    render_config,
)
from connectops.planning.plugin_versions import names_of, version_problems

SOURCE = "io.example.VersionedSourceConnector"
JSON = "org.apache.kafka.connect.json.JsonConverter"


@dataclass(frozen=True)
class P:
    class_name: str
    type: str
    version: str | None


PLUGINS = [
    P(SOURCE, "source", "1.0.0"),
    P(SOURCE, "source", "2.0.0"),
    P(JSON, "converter", "4.3.0"),
    P(JSON, "header_converter", "4.3.0"),
    P("io.example.Unversioned", "source", None),
]


def spec(**kw: Any) -> ConnectorSpec:
    return ConnectorSpec.model_validate({"clusterRef": {"name": "c"}, "class": SOURCE, "config": {"t": "x"}, **kw})


def test_pins_render_as_connects_keys() -> None:
    s = spec(
        pluginVersion="[1.0,2.0)",
        converterVersions={"value": "4.3.0", "header": "latest"},
        config={"value.converter": JSON, "header.converter": JSON},
    )
    config = render_config(s, "n", {})
    assert config["connector.plugin.version"] == "[1.0,2.0)"
    assert config["value.converter.plugin.version"] == "4.3.0"
    assert config["header.converter.plugin.version"] == "latest"
    assert "key.converter.plugin.version" not in config
    assert "connector.plugin.version" not in render_config(spec(), "n", {})


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"pluginVersion": "[1.0"}, "Unbounded range"),
        ({"pluginVersion": "(1.0)"}, "Single version must be surrounded by []"),
        ({"pluginVersion": ""}, "at least 1 character"),
        ({"converterVersions": {"key": "1.0"}}, "needs the converter class in config.key.converter"),
        ({"config": {"connector.plugin.version": "1.0"}}, "set by spec.pluginVersion"),
        ({"config": {"value.converter.plugin.version": "1.0"}}, "set by spec.pluginVersion"),
        (
            {"configFrom": {"connector.plugin.version": {"secretKeyRef": {"name": "s", "key": "k"}}}},
            "set by spec fields",
        ),
    ],
)
def test_bad_pins_are_refused_at_the_spec(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error.replace("[", r"\[").replace("]", r"\]")):
        spec(**fields)


@pytest.mark.parametrize(
    ("pin", "problem"),
    [
        (None, False),
        ("latest", False),
        ("1.0.0", False),
        ("1.0", False),  # [1.0] contains 1.0.0 in Maven's order
        ("2", False),
        ("[1.5,)", False),
        ("1.5", True),  # a bare version is exact for Connect
        ("[3.0,)", True),
        ("(,1.0)", True),
    ],
)
def test_a_pin_is_matched_against_every_installed_version(pin: str | None, problem: bool) -> None:
    found = version_problems(spec(pluginVersion=pin) if pin else spec(), PLUGINS)
    assert bool(found) is problem
    if found:
        assert found[0].available == ("2.0.0", "1.0.0")
        assert found[0].message() == (
            f"connector.plugin.version={pin}: no installed version of {SOURCE} matches (installed: 2.0.0, 1.0.0)"
        )


def test_the_class_resolves_by_alias_and_converters_by_their_kind() -> None:
    assert version_problems(spec(**{"class": "VersionedSource", "pluginVersion": "1.0.0"}), PLUGINS) == []
    assert names_of(JSON) == {JSON, "JsonConverter", "Json"}
    s = spec(
        converterVersions={"key": "[5.0,)", "header": "4.3.0"},
        config={"key.converter": "JsonConverter", "header.converter": JSON},
    )
    [problem] = version_problems(s, PLUGINS)
    assert (problem.key, problem.plugin, problem.available) == (
        "key.converter.plugin.version",
        "JsonConverter",
        ("4.3.0",),
    )


def test_a_missing_class_is_not_a_version_problem() -> None:
    # PluginNotFound (connector) or Connect's validation (converter) says that, not this check
    assert version_problems(spec(**{"class": "io.example.Missing", "pluginVersion": "1.0"}), PLUGINS) == []
    s = spec(converterVersions={"value": "1.0"}, config={"value.converter": "io.example.MissingConverter"})
    assert version_problems(s, PLUGINS) == []


def test_a_plugin_without_a_version_is_shown_as_connect_names_it() -> None:
    [problem] = version_problems(spec(**{"class": "io.example.Unversioned", "pluginVersion": "[1.0,)"}), PLUGINS)
    assert problem.available == ("undefined",)


@pytest.mark.parametrize(("version", "supported"), [("4.0.0", False), ("4.1.0", True), ("8.1.0-ccs", True)])
def test_a_pin_needs_connect_4_1(version: str, supported: bool) -> None:
    s = spec(pluginVersion="1.0.0")
    plan = plan_connector(
        s,
        render_config(s, "n", {}),
        ObservedConnector(live_config=None, state=None),
        capabilities_for(version),
        locked_by=None,
        restarts=RestartBook(),
        now=0.0,
    )
    assert (plan.unsupported is None) is supported
    # without a pin, any version is fine
    unpinned = spec()
    plain = plan_connector(
        unpinned,
        render_config(unpinned, "n", {}),
        ObservedConnector(live_config=None, state=None),
        capabilities_for(version),
        locked_by=None,
        restarts=RestartBook(),
        now=0.0,
    )
    assert plain.unsupported is None
