"""Keeping secret values out of every text the operator emits.

Connect may echo config values back inside error messages (``Invalid value … for
configuration …``), and exceptions may carry request bodies. Every text bound for a log line,
an Event, a condition or an exception passes through a :class:`Redactor` that knows the secret
values resolved for the object at hand.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "[redacted]"
#: the user-info part of any URL in a text (``scheme://user:password@``): whatever follows the
#: scheme up to an ``@`` before the host ends, stopping at what cannot be inside an authority
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s\"'<>]*@")
#: Values this short are too likely to occur by accident in ordinary text ("1", "true") and
#: are not meaningful secrets; masking them would garble messages without protecting anything.
_MIN_SECRET_LEN = 4


class Redactor:
    """Replaces known secret values (longest first) by a mask."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        values = set(self._secrets)
        values.update(s for s in secrets if s and len(s) >= _MIN_SECRET_LEN)
        self._secrets = sorted(values, key=len, reverse=True)

    def include(self, other: Redactor) -> None:
        self.add(other._secrets)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        # a URL's credentials are a secret nobody resolved from a Secret: masked wherever they are
        return redact_userinfo(text)

    def __bool__(self) -> bool:
        return bool(self._secrets)


NO_SECRETS = Redactor()


def redact_userinfo(text: str) -> str:
    """``text`` with the user-info of every URL in it masked (``http://[redacted]@host``)."""
    return _USERINFO.sub(rf"\1{MASK}@", text) if "@" in text else text


def redact_url(url: str) -> str:
    """``url`` as it may be shown: its user-info (``user:password@``) masked, the rest as written."""
    return _replace_userinfo(url, f"{MASK}@")


def without_userinfo(url: str) -> str:
    """``url`` as it may be handed on (to a check's job): its user-info left out, the rest as
    written. Credentials travel through Secrets, never inside a URL."""
    return _replace_userinfo(url, "")


def _replace_userinfo(url: str, by: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # does not split (an unclosed "["): masked as text
        return redact_userinfo(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=by + parts.netloc.rpartition("@")[2]))


class UserinfoFilter(logging.Filter):
    """Masks URLs' user-info in every record a handler writes. What the operator builds is
    masked already; this is for what others log: kopf's debug level writes whole object bodies,
    and an object stored before its schema refused user-info holds it in its spec."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "@" in message:
            record.msg, record.args = redact_userinfo(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and "@" in record.exc_text:
            record.exc_text = redact_userinfo(record.exc_text)
        return True


def mask_logged_userinfo(*loggers: logging.Logger) -> None:
    """Put a :class:`UserinfoFilter` on every handler of these loggers (default: the root's)."""
    for logger in loggers or (logging.getLogger(),):
        for handler in logger.handlers:
            if not any(isinstance(f, UserinfoFilter) for f in handler.filters):
                handler.addFilter(UserinfoFilter())
