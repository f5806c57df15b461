"""The root of every failure the operator raises on purpose.

One hierarchy so that one place (:func:`connectops.errors.as_kopf_error`) decides how to retry:
``retryable`` failures (an outage, a rebalance, a lock still held) come back with a doubling
delay; permanent ones (a refused request, wrong credentials, a URL that is not Kafka Connect)
cannot succeed until someone changes something, so they are re-checked only on the slow, capped
delay and never become a retry storm. ``str()`` of every failure is the user-facing message:
built by the raiser to be free of secrets and of bodies from the other side, so it may go into
conditions, Events and logs as is. ``reason`` is the condition reason a reconciler may show.

This module imports nothing from the package: every layer may raise these.
"""

from __future__ import annotations

from typing import ClassVar


class ConnectopsError(Exception):
    """Base of every deliberate failure: adapters', planning's and the reconcilers' own."""

    retryable: ClassVar[bool] = False
    #: a CamelCase condition reason; subclasses name themselves unless they say otherwise
    reason: ClassVar[str] = ""

    #: the other side checked the request and did nothing (a 4xx, a rebalance, a group still in
    #: use): a call that raised it changed nothing. False when the outcome is unknown (a 5xx, no
    #: answer), which is what a change log must then assume.
    refused: ClassVar[bool] = False

    def __init__(self, message: str, *, operation: str = "") -> None:
        super().__init__(message)
        self.operation = operation

    def changed_nothing(self) -> bool:
        """Whether the failed call is known to have changed nothing (see ``refused``)."""
        return self.refused

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "reason" not in cls.__dict__:
            cls.reason = cls.__name__
