"""The one place where adapter errors become kopf's retry decisions.

Adapters raise their own typed errors (:mod:`connectops.adapters.connect_rest`,
:mod:`connectops.adapters.kube`); reconcilers record them in conditions and re-raise; handlers
pass them through :func:`as_kopf_error`. Nothing here is permanent for a *transient* world:
a Connect outage, a 409 during a rebalance, a Secret not created yet — all retry with a doubling
delay, so the operator never crash-loops and recovers on its own.
"""

from __future__ import annotations

import kopf

from connectops.adapters.connect_rest import (
    ConnectAuthFailed,
    ConnectError,
    ConnectRebalancing,
)
from connectops.adapters.kafka_offsets import KafkaOffsetsError
from connectops.adapters.kube import KubeError


class ConnectopsError(Exception):
    """Base for the operator's own (non-adapter) failures."""


class SpecInvalid(ConnectopsError):
    """The object's spec cannot be acted on until the user changes it. Never retried."""


class NotReadyYet(ConnectopsError):
    """Something the operator waits for (a state, a lock) has not happened yet; retry soon."""


def retry_delay(attempt: int, base: float, maximum: float) -> float:
    return float(min(base * 2 ** max(attempt, 0), maximum))


def as_kopf_error(
    exc: BaseException, *, retry: int, base: float, maximum: float
) -> kopf.TemporaryError | kopf.PermanentError:
    """Map an error to kopf's retry semantics; ``retry`` is kopf's attempt counter."""
    message = str(exc)
    if isinstance(exc, SpecInvalid):
        return kopf.PermanentError(message)
    if isinstance(exc, ConnectRebalancing):
        return kopf.TemporaryError(message, delay=min(base, 5.0))
    if isinstance(exc, ConnectAuthFailed):
        # a fixed Secret is the only cure; poll slowly rather than hammer the worker
        return kopf.TemporaryError(message, delay=maximum)
    # their texts are built by the adapters to be free of secrets (tests/unit checks the Kafka one)
    if isinstance(exc, ConnectError | KubeError | KafkaOffsetsError | NotReadyYet):
        return kopf.TemporaryError(message, delay=retry_delay(retry, base, maximum))
    return kopf.TemporaryError(f"unexpected {type(exc).__name__}", delay=retry_delay(retry, base, maximum))
