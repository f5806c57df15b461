"""Which calls are periodic work: the resync timers mark their context, and every adapter with a
bounded number of calls in flight (Connect's lanes, the Kubernetes client's threads) serves a
user's change before them.

Issue 17: with 1,000 Connectors a change waited up to 11 s behind the resync's Connect GETs, and,
once those were one listing, 8 s behind the resync's Lease reads queued in the Kubernetes
client's threads. A context variable, not a parameter: the mark has to reach the adapters
through every layer in between without each of them passing it on.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("connectops_background", default=False)


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Calls made inside are periodic work: they wait while a change's calls are waiting."""
    token = BACKGROUND.set(True)
    try:
        yield
    finally:
        BACKGROUND.reset(token)
