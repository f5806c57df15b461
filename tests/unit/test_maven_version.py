"""Maven's version order and ranges, as Connect 4.3 applies them to plugin versions.

The expected order and range answers below were produced by maven-artifact 3.9.15 itself (the jar
Connect 4.3 ships, ``ComparableVersion.compareTo`` on every pair of these versions and
``VersionRange.createFromVersionSpec(...).containsVersion``), not written by hand.
"""

from __future__ import annotations

import itertools

import pytest

from connectops.models.maven_version import InvalidVersionSpec, MavenVersion, parse_range, requirement

#: ascending; the versions within a group are equal
MAVEN_ORDER: list[list[str]] = [
    ["0", "0.0"],
    ["0.9"],
    ["1-alpha"],
    ["1-alpha1", "1-alpha-1", "1-a1", "1a1"],
    ["1.0-alpha.1"],
    ["1-b1"],
    ["1-beta2", "1.0b2"],
    ["1.0.0-beta.11"],
    ["1-milestone-2"],
    ["1-m3"],
    ["1-rc"],
    ["1-rc1", "1-cr1"],
    ["1-RC2"],
    ["1.0.0-rc.1"],
    ["1-SNAPSHOT", "1.0-SNAPSHOT", "1.0.0-SNAPSHOT"],
    ["1", "1.0", "1.0.0", "1-ga", "1-final", "1.0.final", "1.0.0.Final", "1.0.0.RELEASE"],
    ["1-sp"],
    ["1-sp1"],
    ["1.0a"],
    ["1-bar"],
    ["1-foo", "1.foo"],
    ["1.0.0-x.7.z.92"],
    ["1-1", "1.0-1", "1.0.0-1"],
    ["1.0.1"],
    ["1.1"],
    ["2.0", "2.0.0", "2"],
    ["2.4.1.Final", "2.4.1-Final"],
    ["3.6.3.Final"],
    ["4.3.0"],
    ["4.3.0-ccs"],
    ["7.5.0-ccs"],
    ["10.0"],
]
ALL = [v for group in MAVEN_ORDER for v in group]
RANK = {v: i for i, group in enumerate(MAVEN_ORDER) for v in group}


def test_every_pair_compares_as_maven_does() -> None:
    for a, b in itertools.product(ALL, ALL):
        left, right = MavenVersion(a), MavenVersion(b)
        assert (left < right, left == right, left > right) == (
            RANK[a] < RANK[b],
            RANK[a] == RANK[b],
            RANK[a] > RANK[b],
        ), (a, b)


#: spec -> the versions of ALL it contains, per maven-artifact 3.9.15
RANGES = {
    "[1.0,2.0)": ["1", "1.0", "1.0.0", "1-ga", "1-final", "1.0.final", "1.0.0.Final", "1.0.0.RELEASE", "1-sp"],
    "[1.0]": ["1", "1.0", "1.0.0", "1-ga", "1-final", "1.0.final", "1.0.0.Final", "1.0.0.RELEASE"],
    "[2.0.0]": ["2.0", "2.0.0", "2"],
    "(1.0,2.0)": ["1-sp", "1.0.1", "1.1"],
    "[4.3,4.4)": ["4.3.0", "4.3.0-ccs"],
    "(,1.0],[1.2,)": ["0.9", "1", "2.0", "10.0"],
}


@pytest.mark.parametrize(("spec", "some_inside"), RANGES.items())
def test_ranges_contain_what_maven_says(spec: str, some_inside: list[str]) -> None:
    parsed = parse_range(spec)
    assert parsed.has_restrictions
    for version in some_inside:
        assert parsed.contains(version), (spec, version)


@pytest.mark.parametrize(
    ("spec", "inside", "outside"),
    [
        ("[1.0,2.0)", ["1.0.1", "1.1", "1-1"], ["2.0", "2", "0.9", "1-SNAPSHOT", "1-rc1", "10.0"]),
        ("[1.0,2.0]", ["2.0", "2.0.0", "1.1"], ["2.4.1.Final", "1-alpha"]),
        ("[1.0,)", ["10.0", "7.5.0-ccs", "1.0.0"], ["0.9", "1-SNAPSHOT"]),
        ("(,1.0]", ["0", "1-SNAPSHOT", "1-rc", "1.0"], ["1-sp", "1.0.1"]),
        ("[1.0.0-rc1,)", ["1-rc1", "1-RC2", "1-SNAPSHOT", "1.0.0"], ["1-rc", "1-m3"]),
        ("[,]", ALL, []),
        ("(,)", ALL, []),
    ],
)
def test_range_bounds(spec: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_range(spec)
    assert [v for v in inside if not parsed.contains(v)] == []
    assert [v for v in outside if parsed.contains(v)] == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("[1.0", "Unbounded range"),
        ("(1.0)", "Single version must be surrounded by []"),
        ("[2.0,1.0]", "Range defies version ordering"),
        ("[1.0,1.0)", "Range defies version ordering"),
        ("[1.0,2.0),[1.5,3.0)", "Ranges overlap"),
        ("[1.0,2.0),2.5", "Only fully-qualified sets allowed"),
    ],
)
def test_invalid_specs_are_refused_as_maven_does(spec: str, message: str) -> None:
    with pytest.raises(InvalidVersionSpec, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_range(spec)


def test_a_bare_version_is_soft_for_maven_and_exact_for_connect() -> None:
    # Maven: "1.0" is a recommendation that contains everything
    soft = parse_range("1.0")
    assert not soft.has_restrictions
    assert soft.contains("2.0")
    assert soft.contains("0.9")
    # Connect (PluginUtils.connectorVersionRequirement) encloses it: [1.0]
    exact = requirement(" 1.0 ")
    assert exact is not None
    assert exact.has_restrictions
    assert [v for v in ("1.0.0", "1", "1.0.1", "2.0", "0.9") if exact.contains(v)] == ["1.0.0", "1"]


def test_no_value_or_latest_is_no_requirement() -> None:
    assert requirement(None) is None
    assert requirement("latest") is None
    ranged = requirement("[1.0,2.0)")
    assert ranged is not None
    assert [v for v in ("0.9", "1.5", "2.0") if ranged.contains(v)] == ["1.5"]
