"""The oldest claimant owns a connector; ties by creation second are broken by uid."""

from __future__ import annotations

from connectops.planning.ownership import Claim, conflict_message, owner


def claim(ns: str, name: str, uid: str, created: str) -> Claim:
    return Claim(ns, name, uid, created, "main")


def test_oldest_owns_then_uid() -> None:
    a = claim("a", "first", "u-2", "2026-11-24T10:00:00Z")
    b = claim("b", "second", "u-1", "2026-11-24T10:00:01Z")
    c = claim("a", "twin", "u-0", "2026-11-24T10:00:00Z")
    assert owner(b, [a]) == a
    assert owner(a, [b]) == a
    # same second: the uid decides, the same way from every claimant's point of view
    assert owner(a, [b, c]) == c
    assert owner(c, [a, b]) == c
    assert owner(b, []) == b


def test_the_message_names_only_same_namespace_owners() -> None:
    me = claim("b", "grab", "u-9", "2026-11-24T11:00:00Z")
    there = claim("a", "payments", "u-1", "2026-11-24T10:00:00Z")
    here = claim("b", "older", "u-2", "2026-11-24T10:00:00Z")
    assert "payments" not in conflict_message("orders", me, there)
    assert "another namespace" in conflict_message("orders", me, there)
    assert "Connector older (older)" in conflict_message("orders", me, here)
