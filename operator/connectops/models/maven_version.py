"""Maven's version order and version ranges, as Kafka Connect applies them to plugin versions (KIP-891).

Connect 4.1+ reads ``connector.plugin.version`` and ``*.converter.plugin.version`` with
``maven-artifact``'s ``VersionRange.createFromVersionSpec`` and compares plugin versions with its
``ComparableVersion``; the operator must match a spec's range against the worker's plugin list the
same way, or it would call a version missing that the worker would run (or the other way round).
This is a port of maven-artifact 3.9.15 (the one Connect 4.3 ships; checked against it
with every pair of the versions in tests/unit/test_maven_version.py): ``1.0`` equals ``1`` and
``1.0.0``, ``1-SNAPSHOT`` < ``1-rc1`` < ``1`` < ``1-sp``, ``alpha``/``beta``/``milestone``
are ordered, unknown qualifiers sort after them alphabetically.

Connect's own rule on top (``PluginUtils.connectorVersionRequirement``): no value or ``latest``
means no requirement (the newest installed version), and a bare version is NOT Maven's "soft"
requirement but an exact one: ``1.0`` is read as ``[1.0]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering

_QUALIFIERS = ("alpha", "beta", "milestone", "rc", "snapshot", "", "sp")
_ALIASES = {"ga": "", "final": "", "release": "", "cr": "rc"}
_RELEASE = str(_QUALIFIERS.index(""))


class InvalidVersionSpec(ValueError):
    """The text is not a Maven version range (Connect refuses it with the same kind of message)."""


# One item type with a kind tag, so the comparison rules read like Maven's switch statements.
_INT, _STRING, _LIST = "int", "string", "list"


@dataclass
class _Item:
    kind: str
    number: int = 0
    text: str = ""
    items: list[_Item] | None = None

    def is_null(self) -> bool:
        if self.kind == _INT:
            return self.number == 0
        if self.kind == _STRING:
            return self.text == ""
        return not self.items


def _string_item(value: str, followed_by_digit: bool) -> _Item:
    if followed_by_digit and len(value) == 1:
        value = {"a": "alpha", "b": "beta", "m": "milestone"}.get(value, value)
    return _Item(_STRING, text=_ALIASES.get(value, value))


def _comparable_qualifier(qualifier: str) -> str:
    # unknown qualifiers sort after the known ones, among themselves alphabetically
    return str(_QUALIFIERS.index(qualifier)) if qualifier in _QUALIFIERS else f"{len(_QUALIFIERS)}-{qualifier}"


def _cmp_text(a: str, b: str) -> int:
    return (a > b) - (a < b)


def _parse_item(digit: bool, buf: str) -> _Item:
    return _Item(_INT, number=int(buf)) if digit else _string_item(buf, False)


def _compare(left: _Item | None, right: _Item | None) -> int:
    """Maven's ``Item.compareTo`` (negative, zero, positive); None is a missing item."""
    if left is None:
        return 0 if right is None else -_compare(right, None)
    if left.kind == _INT:
        return _compare_int(left, right)
    if left.kind == _STRING:
        return _compare_string(left, right)
    return _compare_list(left, right)


def _compare_int(left: _Item, right: _Item | None) -> int:
    if right is None:
        return 0 if left.number == 0 else 1  # 1.0 == 1, 1.1 > 1
    if right.kind == _INT:
        return (left.number > right.number) - (left.number < right.number)
    return 1  # 1.1 > 1-sp, 1.1 > 1-1


def _compare_string(left: _Item, right: _Item | None) -> int:
    mine = _comparable_qualifier(left.text)
    if right is None:
        return _cmp_text(mine, _RELEASE)  # 1-rc < 1, 1-ga == 1, 1-sp > 1
    if right.kind == _STRING:
        return _cmp_text(mine, _comparable_qualifier(right.text))
    return -1  # 1.any < 1.1, 1.any < 1-1


def _compare_list(left: _Item, right: _Item | None) -> int:
    items = left.items or []
    if right is None:
        return next((r for r in (_compare(item, None) for item in items) if r), 0)
    if right.kind == _INT:
        return -1  # 1-1 < 1.0.x
    if right.kind == _STRING:
        return 1  # 1-1 > 1-sp
    others = right.items or []
    for i in range(max(len(items), len(others))):
        mine_item = items[i] if i < len(items) else None
        other_item = others[i] if i < len(others) else None
        result = -_compare(other_item, None) if mine_item is None else _compare(mine_item, other_item)
        if result:
            return result
    return 0


def _normalize(items: list[_Item]) -> None:
    """Drop trailing null items (``1.0.0`` is ``1``, ``1.0-1`` is ``1-1``), as ``ListItem.normalize``."""
    for i in range(len(items) - 1, -1, -1):
        if items[i].is_null():
            del items[i]
        elif items[i].kind != _LIST:
            break


def _parse(version: str) -> _Item:
    text = version.lower()
    root = _Item(_LIST, items=[])
    current = root
    stack = [root]
    is_digit = False
    start = 0

    def push_list() -> None:
        nonlocal current
        new = _Item(_LIST, items=[])
        assert current.items is not None
        current.items.append(new)
        current = new
        stack.append(new)

    for i, c in enumerate(text):
        assert current.items is not None
        if c == ".":
            current.items.append(_Item(_INT) if i == start else _parse_item(is_digit, text[start:i]))
            start = i + 1
        elif c == "-":
            current.items.append(_Item(_INT) if i == start else _parse_item(is_digit, text[start:i]))
            start = i + 1
            push_list()
        elif c.isdigit():
            if not is_digit and i > start:
                # rc1: the qualifier, then a sublist for the number
                current.items.append(_string_item(text[start:i], True))
                start = i
                push_list()
            is_digit = True
        else:
            if is_digit and i > start:
                current.items.append(_parse_item(True, text[start:i]))
                start = i
                push_list()
            is_digit = False
    if len(text) > start:
        assert current.items is not None
        # 1.0.0.X1 < 1.0.0-X2: a trailing .X is read as -X
        if not is_digit and current.items:
            push_list()
        assert current.items is not None
        current.items.append(_parse_item(is_digit, text[start:]))
    while stack:
        item = stack.pop()
        assert item.items is not None
        _normalize(item.items)
    return root


@total_ordering
class MavenVersion:
    """A version in Maven's order (``ComparableVersion``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._item = _parse(text)

    def _cmp(self, other: MavenVersion) -> int:
        return _compare(self._item, other._item)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MavenVersion) and self._cmp(other) == 0

    def __lt__(self, other: MavenVersion) -> bool:
        return self._cmp(other) < 0

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"MavenVersion({self.text!r})"


@dataclass(frozen=True)
class Restriction:
    lower: MavenVersion | None
    lower_inclusive: bool
    upper: MavenVersion | None
    upper_inclusive: bool

    def contains(self, version: MavenVersion) -> bool:
        if self.lower is not None and (self.lower > version or (self.lower == version and not self.lower_inclusive)):
            return False
        return not (
            self.upper is not None and (self.upper < version or (self.upper == version and not self.upper_inclusive))
        )


def _restriction(spec: str) -> Restriction:
    lower_inclusive, upper_inclusive = spec.startswith("["), spec.endswith("]")
    inner = spec[1:-1].strip()
    if "," not in inner:
        if not (lower_inclusive and upper_inclusive):
            raise InvalidVersionSpec(f"Single version must be surrounded by []: {spec}")
        version = MavenVersion(inner)
        return Restriction(version, True, version, True)
    low_text, high_text = (part.strip() for part in inner.split(",", 1))
    low = MavenVersion(low_text) if low_text else None
    high = MavenVersion(high_text) if high_text else None
    if (
        low is not None
        and high is not None
        and (high < low or (high == low and not (lower_inclusive and upper_inclusive)))
    ):
        raise InvalidVersionSpec(f"Range defies version ordering: {spec}")
    return Restriction(low, lower_inclusive, high, upper_inclusive)


@dataclass(frozen=True)
class VersionRange:
    """``VersionRange.createFromVersionSpec``: restrictions, or a bare (recommended) version."""

    spec: str
    restrictions: tuple[Restriction, ...]
    recommended: MavenVersion | None

    @property
    def has_restrictions(self) -> bool:
        return bool(self.restrictions) and self.recommended is None

    def contains(self, version: str) -> bool:
        parsed = MavenVersion(version)
        return any(r.contains(parsed) for r in self.restrictions)


def parse_range(spec: str) -> VersionRange:
    """Maven's ``createFromVersionSpec``; :class:`InvalidVersionSpec` as Maven refuses."""
    rest = spec
    restrictions: list[Restriction] = []
    upper: MavenVersion | None = None
    while rest.startswith(("[", "(")):
        closers = [i for i in (rest.find(")"), rest.find("]")) if i >= 0]
        if not closers:
            raise InvalidVersionSpec(f"Unbounded range: {spec}")
        index = min(closers)
        restriction = _restriction(rest[: index + 1])
        if upper is not None and (restriction.lower is None or restriction.lower < upper):
            raise InvalidVersionSpec(f"Ranges overlap: {spec}")
        restrictions.append(restriction)
        upper = restriction.upper
        rest = rest[index + 1 :].strip()
        if rest.startswith(","):
            rest = rest[1:].strip()
    if rest:
        if restrictions:
            raise InvalidVersionSpec(f"Only fully-qualified sets allowed in multiple set scenario: {spec}")
        return VersionRange(spec, (Restriction(None, False, None, False),), MavenVersion(rest))
    return VersionRange(spec, tuple(restrictions), None)


def requirement(value: str | None) -> VersionRange | None:
    """What Connect requires of a ``*.plugin.version`` value (``PluginUtils.connectorVersionRequirement``):
    None for no value or ``latest``; a bare version is exact (``1.0`` -> ``[1.0]``)."""
    if value is None or value == "latest":
        return None
    text = value.strip()
    parsed = parse_range(text)
    if parsed.has_restrictions:
        return parsed
    return parse_range(f"[{text}]")
