"""Work queued by key outside kopf's handlers: :class:`Backlog` runs each queued key once, a
bounded number at a time (the start-up resume of every Connector); :class:`Later` runs one key's
work once after a delay (a reconcile that needs its object looked at sooner than the sweep of
:mod:`connectops.concurrency.sweep` comes by)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


class Backlog:
    """Keys to run once each, at most ``workers`` at once, in the order they came.

    Why not a kopf handler each (what this replaced for the start-up resume): kopf holds the
    object's worker while its handler runs, and every resume waits for its worker group's one
    expanded listing, which Connect builds in time quadratic in its connectors (20-61 s at
    10,000). So kopf's work for all but the first thousand objects waited behind it, and ran
    after it, one object at a time (restart_bench at 10,000: the listing, then ~23 s of kopf).
    Here a queued key costs its string; a worker task exists only while there is work.

    A key already waiting is not queued twice. A failing ``run`` is logged and the others go on:
    what failed is the caller's to report (its status) and to retry (its next resync).
    """

    def __init__(self, run: Callable[[str], Awaitable[None]], *, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a backlog needs at least one worker, not {workers}")
        self._run = run
        self._limit = workers
        self._queue: deque[str] = deque()
        self._waiting: set[str] = set()
        self._workers: set[asyncio.Task[None]] = set()
        #: workers still taking keys: counted down in the very step a worker finds the queue
        #: empty (a finished task leaves ``_workers`` only on a later turn of the loop, and a
        #: key added in between, counted against it, waited with no worker to take it)
        self._active = 0

    def add(self, key: str) -> None:
        """Queue ``key`` (called on the running loop); a worker starts if fewer than the limit run."""
        if key in self._waiting:
            return
        self._waiting.add(key)
        self._queue.append(key)
        if self._active < self._limit:
            self._active += 1
            task = asyncio.get_running_loop().create_task(self._work(), name="backlog worker")
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    def __len__(self) -> int:
        """Keys queued and not yet taken by a worker."""
        return len(self._queue)

    async def _work(self) -> None:
        try:
            while self._queue:
                key = self._queue.popleft()
                self._waiting.discard(key)
                try:
                    await self._run(key)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a bug in one must not end the others'
                    logger.exception("queued resync of %s failed", key)
        finally:
            self._active -= 1

    async def close(self) -> None:
        """Drop what is queued and cancel what runs: the next process resumes every object again."""
        self._queue.clear()
        self._waiting.clear()
        workers = list(self._workers)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


class Later:
    """At most one delayed run per key: a reconcile that needs its object looked at again
    sooner than the sweep comes by (an automatic restart falling due) asks for it here.

    Why not kopf's own means: a ``TemporaryError(delay=...)`` is a failure (kopf logs it, keeps
    a progress annotation on the object and counts its retries), and a kopf timer per object is
    what the sweep replaced (see :mod:`connectops.concurrency.sweep`). Here a pending run costs a timer handle;
    the task exists only while it runs.

    Bounded: asking again replaces the key's pending run (the latest reconcile has the freshest
    view), so a key never has more than one waiting; a key's runs start at least ``spacing``
    apart, so runs that keep asking to run at once cannot spin (a run asked for a moment already
    past starts at once otherwise: the reconcile that asked may have waited up to it); :meth:`cancel`
    drops a key's (its object is deleted), :meth:`close` every one. A failing ``run`` is logged,
    as in :class:`Backlog`.
    """

    def __init__(self, run: Callable[[str], Awaitable[None]], *, spacing: float) -> None:
        self._run = run
        self._spacing = spacing
        self._pending: dict[str, asyncio.TimerHandle] = {}
        #: when each key's last run started (loop time), while it can still delay the next
        self._started: dict[str, float] = {}
        self._running: set[asyncio.Task[None]] = set()

    def at(self, key: str, delay: float | None) -> None:
        """Run ``key`` ``delay`` seconds from now instead of whenever it was to run; None: not at all."""
        handle = self._pending.pop(key, None)
        if handle is not None:
            handle.cancel()
        last = self._started.get(key)
        if last is None and delay is None:
            return
        loop = asyncio.get_running_loop()
        earliest = 0.0 if last is None else last + self._spacing - loop.time()
        if delay is None:
            if earliest <= 0:
                self._started.pop(key, None)  # kept only while it can still space a run
            return
        self._pending[key] = loop.call_later(max(delay, earliest, 0.0), self._start, key)

    def cancel(self, key: str) -> None:
        """Forget ``key``: its object is gone (a run at work goes on, and finds it gone)."""
        self.at(key, None)
        self._started.pop(key, None)

    def __len__(self) -> int:
        """Keys with a run waiting."""
        return len(self._pending)

    @property
    def remembered(self) -> int:
        """Keys anything is kept for (a run waiting, or the start of the last one)."""
        return len(self._pending.keys() | self._started.keys())

    def _start(self, key: str) -> None:
        self._pending.pop(key, None)
        loop = asyncio.get_running_loop()
        self._started[key] = loop.time()
        task = loop.create_task(self._one(key), name=f"look again at {key}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _one(self, key: str) -> None:
        try:
            await self._run(key)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in one must not go unseen, nor end the others'
            logger.exception("delayed reconcile of %s failed", key)

    async def close(self) -> None:
        """Drop what waits and cancel what runs."""
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()
        self._started.clear()
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
