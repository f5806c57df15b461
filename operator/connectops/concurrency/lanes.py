"""Which calls are periodic work, and the lanes that serve them last: the resync timers mark
their context, and every adapter with a bounded number of calls in flight (Connect's
:class:`Lanes`, the Kubernetes client's threads) serves a user's change before them.

With 1,000 Connectors a change waited up to 11 s behind the resync's Connect GETs, and,
once those were one listing, 8 s behind the resync's Lease reads queued in the Kubernetes
client's threads. A context variable, not a parameter: the mark has to reach the adapters
through every layer in between without each of them passing it on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator

BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("connectops_background", default=False)


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Calls made inside are periodic work: they wait while a change's calls are waiting."""
    token = BACKGROUND.set(True)
    try:
        yield
    finally:
        BACKGROUND.reset(token)


class Lanes:
    """At most ``limit`` calls in flight; a freed slot goes to the oldest waiting change call
    before any waiting background call (FIFO within each lane). A plain semaphore would serve
    them in arrival order, so a change arriving behind a resync burst waited for all of it."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._changes: collections.deque[asyncio.Future[None]] = collections.deque()
        self._background: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def waiting(self) -> tuple[int, int]:
        return len(self._changes), len(self._background)

    async def acquire(self, background: bool) -> None:
        if self._free > 0:
            self._free -= 1
            return
        lane = self._background if background else self._changes
        slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.append(slot)
        try:
            await slot
        except asyncio.CancelledError:
            if slot.done() and not slot.cancelled():
                self.release()  # handed a slot at the moment of cancellation: pass it on
            else:
                lane.remove(slot)
            raise

    def release(self) -> None:
        for lane in (self._changes, self._background):
            while lane:
                slot = lane.popleft()
                if not slot.done():
                    slot.set_result(None)
                    return
        self._free += 1

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire(BACKGROUND.get())
        try:
            yield
        finally:
            self.release()
