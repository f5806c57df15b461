"""A URL's credentials kept out of everything the job writes.

The operator hands the job URLs without user-info and the credentials as env vars from a Secret
(``--connect-auth-env``, ``--metrics-auth-env``), but a URL written by hand, or an error of the
HTTP client quoting one, may still hold ``user:password@``: it is masked in every note, error and
verdict. (The operator has its own copy in ``connectops.redact``: the two packages never import
each other.)
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "[redacted]"
#: the user-info of any URL in a text, up to the ``@`` before its host
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s\"'<>]*@")


def redact_userinfo(text: str) -> str:
    """``text`` with the user-info of every URL in it masked (``http://[redacted]@host``)."""
    return _USERINFO.sub(rf"\1{MASK}@", text) if "@" in text else text


def shown_url(url: str) -> str:
    """``url`` as a note may show it: its user-info masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_userinfo(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{MASK}@{parts.netloc.rpartition('@')[2]}"))
