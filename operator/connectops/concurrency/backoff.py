"""Waits between polls of a state that changes on someone else's clock."""

from __future__ import annotations

import asyncio
import time


class Backoff:
    """Waits between polls of a state that follow Connect instead of a fixed clock: a first
    short wait (most transitions take tens of milliseconds to a few seconds), doubling to a cap so
    a slow transition does not cost a request every 50 ms."""

    def __init__(self, first: float = 0.05, cap: float = 1.0, *, hold: float = 0.0) -> None:
        """``hold``: seconds during which the waits stay at ``first`` before doubling (a wait
        whose every interval of slack is downtime keeps them short while the usual transition
        runs, and still backs off from one that is stuck)."""
        self._next = first
        self._cap = cap
        # no hold: no clock read at all (the waits double whatever a clock says)
        self._hold_until = time.monotonic() + hold if hold > 0 else None

    async def wait(self) -> None:
        await asyncio.sleep(self._next)
        if self._hold_until is None or time.monotonic() >= self._hold_until:
            self._next = min(self._next * 2, self._cap)
