"""restUrl allowlist: globs match host and port only, never across into a path or another host."""

from __future__ import annotations

import pytest

from connectops.planning.urls import url_allowed

PATTERNS = ["https://*.connect.svc.cluster.local:8083", "http://connect-*.kafka:*"]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://main.connect.svc.cluster.local:8083", True),
        ("https://main.connect.svc.cluster.local:8083/", True),
        ("http://connect-eu.kafka:8083", True),
        ("http://connect-eu.kafka", True),  # the port glob is "*"
        ("https://main.connect.svc.cluster.local:9999", False),
        ("http://main.connect.svc.cluster.local:8083", False),  # scheme
        ("https://evil.example/x.connect.svc.cluster.local:8083", False),  # a path is not a host
        ("https://evil.example#.connect.svc.cluster.local:8083", False),
        ("https://user@main.connect.svc.cluster.local:8083", False),  # user-info: refused outright
        ("https://main.connect.svc.cluster.local.evil.example:8083", False),
        ("https://MAIN.connect.svc.cluster.local:8083", True),  # host names are case-insensitive
        ("http://connect-eu.kafka:notaport", False),
    ],
)
def test_allowlist(url: str, allowed: bool) -> None:
    assert url_allowed(url, PATTERNS) is allowed


def test_no_patterns_allow_everything() -> None:
    assert url_allowed("http://anything:1", [])
