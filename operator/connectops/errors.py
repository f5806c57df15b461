"""The one place where failures become kopf's retry decisions.

Every deliberate failure derives from :class:`connectops.failures.ConnectopsError` (adapters:
:mod:`~connectops.adapters.connect_rest`, :mod:`~connectops.adapters.kafka`,
:mod:`~connectops.adapters.kube`; the reconcilers' own below); reconcilers record them in
conditions and re-raise; handlers pass them through :func:`as_kopf_error`, which honours their
``retryable`` flag: a transient world (a Connect outage, a 409 during a rebalance, a Secret not
created yet) retries with a doubling delay; a permanent failure (a refused request, credentials,
a URL that is not Connect) is re-checked only on the capped delay, because only someone changing
something can cure it, and a spec change re-runs the handler at once anyway. Only an invalid spec
is kopf-permanent. The operator never crash-loops and recovers on its own.
"""

from __future__ import annotations

import kopf

from connectops.adapters.connect_rest import ConnectRebalancing
from connectops.adapters.kube import StatusRefused
from connectops.failures import ConnectopsError

__all__ = [
    "ConnectopsError",
    "NotReadyYet",
    "ReferenceInvalid",
    "SpecInvalid",
    "UrlNotAllowed",
    "WorkerStarting",
    "as_kopf_error",
    "retry_delay",
]


class SpecInvalid(ConnectopsError):
    """The object's spec cannot be acted on until the user changes it. Never retried."""

    reason = "InvalidSpec"


class ReferenceInvalid(ConnectopsError):
    """An object this one names (a Connector, a ConnectCluster) cannot be acted on until its owner
    fixes it. Not kopf-permanent like :class:`SpecInvalid`: fixing *that* object never re-runs
    this one's handler, so it is re-checked on the capped delay instead."""

    reason = "InvalidTarget"


class UrlNotAllowed(SpecInvalid):
    """A ConnectCluster's ``restUrl`` is outside the operator's allowlist: no request is made."""

    reason = "URLNotAllowed"


class NotReadyYet(ConnectopsError):
    """Something the operator waits for (a state, a lock) has not happened yet; retry soon."""

    retryable = True


class WorkerStarting(NotReadyYet):
    """The Connect worker says it is starting (``GET /health``, KIP-1017): wait, briefly and
    quietly, instead of reporting it unavailable."""

    reason = "WorkerStarting"


def retry_delay(attempt: int, base: float, maximum: float) -> float:
    return float(min(base * 2 ** max(attempt, 0), maximum))


def as_kopf_error(
    exc: BaseException, *, retry: int, base: float, maximum: float
) -> kopf.TemporaryError | kopf.PermanentError:
    """Map an error to kopf's retry semantics; ``retry`` is kopf's attempt counter."""
    message = str(exc)
    # a status the API server refuses for the spec stored (StatusRefused) fails the same way
    # until the spec changes, and a spec change re-runs the handler
    if isinstance(exc, SpecInvalid | StatusRefused):
        return kopf.PermanentError(message)
    if isinstance(exc, ConnectRebalancing | WorkerStarting):
        return kopf.TemporaryError(message, delay=min(base, 5.0))
    # their texts are built by the raisers to be free of secrets (tests/unit checks the Kafka one)
    if isinstance(exc, ConnectopsError) and exc.retryable:
        return kopf.TemporaryError(message, delay=retry_delay(retry, base, maximum))
    if isinstance(exc, ConnectopsError):
        return kopf.TemporaryError(message, delay=maximum)
    return kopf.TemporaryError(f"unexpected {type(exc).__name__}", delay=retry_delay(retry, base, maximum))
