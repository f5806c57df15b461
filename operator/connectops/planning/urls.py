"""Which Connect URLs the operator may call on a user's behalf.

A ``restUrl`` is a request the operator makes with its own network position (often inside the
cluster, where a user's pods may not reach): the platform team may limit it to the Connect
workers it runs. Patterns are ``scheme://host[:port]`` with shell globs in the host and port
(``https://*.connect.svc.cluster.local:8083``, ``http://connect-*.kafka:*``); the URL is split
first, so a glob never spans into a path, a user-info part or another host
(``http://evil.example/x.connect.svc.cluster.local`` does not match the first pattern).
No patterns: every URL is allowed (the default, documented in the chart).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from urllib.parse import urlsplit


def url_allowed(url: str, patterns: Sequence[str]) -> bool:
    if not patterns:
        return True
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    if parts.username is not None or parts.password is not None or not parts.hostname:
        return False
    default = {"http": 80, "https": 443}.get(parts.scheme)
    actual_port = str(port if port is not None else default)
    for pattern in patterns:
        scheme, sep, rest = pattern.partition("://")
        if not sep or scheme != parts.scheme:
            continue
        host_glob, _, port_glob = rest.rstrip("/").partition(":")
        if fnmatchcase(parts.hostname, host_glob.lower()) and fnmatchcase(actual_port, port_glob or str(default)):
            return True
    return False
