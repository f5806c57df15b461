"""Keeping secret values out of every text the operator emits.

Connect may echo config values back inside error messages (``Invalid value … for
configuration …``), and exceptions may carry request bodies. Every text bound for a log line,
an Event, a condition or an exception passes through a :class:`Redactor` that knows the secret
values resolved for the object at hand.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = "[redacted]"
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
        return text

    def __bool__(self) -> bool:
        return bool(self._secrets)


NO_SECRETS = Redactor()
