"""The periodic resync of one Connect cluster's Connectors, paced across the period.

Why not a kopf timer per Connector (what this replaced): a timer is an asyncio task, a stopper
with a threading and an asyncio event, a throttler and the object's whole latest body kept alive
for each object, about 18 KB of heap per Connector (apply_bench --tracemalloc at 1,000; 2,048
tasks, 2,036 threading conditions), so 10,000 Connectors held ~700 MiB; and every timer fires
on the same period, so they arrive in bursts that needed jitter. Here one loop per ConnectCluster
takes its Connectors one after another, ``period / n`` apart, at most ``in_flight`` at once: the
same cadence per object, no burst by construction, and nothing kept per object but what the
caller's index holds.

The loop knows nothing of kopf or Kubernetes: ``members`` says who is due this pass (read afresh
every pass, so a Connector created or deleted since is seen), ``resync`` runs one, ``wait``
sleeps unless the loop is told to stop. A failing ``resync`` is the caller's to report; it
never stops the loop.

:class:`~connectops.concurrency.queues.Backlog` is the start-up half: every Connector resumes
once when the operator starts, and the resume is queued there rather than run in kopf's
handler, so kopf's own per-object work (the watch event, its cause detection, its logs) goes on
while the queued resyncs wait for the worker group's one listing, instead of after it.

:class:`~connectops.concurrency.queues.Later` is the in-between: one object's resync sooner than
its pass, when a reconcile needs it (an automatic restart falls due seconds from now, the pass
comes once a period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

logger = logging.getLogger(__name__)

#: how long a stopping loop lets its in-flight resyncs finish before cancelling them
DRAIN_SECONDS = 10.0


async def sweep(
    members: Callable[[], Sequence[str]],
    resync: Callable[[str], Awaitable[None]],
    wait: Callable[[float], Awaitable[bool]],
    *,
    period: float,
    in_flight: int,
) -> None:
    """Resync every member once per ``period`` until ``wait`` says stop (returns True).

    The first pass starts one period after the loop does: at start-up every Connector resumes
    (a full reconcile), and a Connector just created is its change handler's."""
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(in_flight)
    #: each member's resync in flight: one per member at most, and what a stop drains
    running: dict[str, asyncio.Task[None]] = {}

    async def one(key: str) -> None:
        try:
            await resync(key)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in one resync must not end every other's
            logger.exception("resync of %s failed", key)
        finally:
            running.pop(key, None)
            slots.release()

    try:
        if await wait(period):
            return
        while True:
            started = loop.time()
            due = list(members())
            spacing = period / len(due) if due else period
            for i, key in enumerate(due):
                # asked even when behind schedule (a zero wait): a loop that is late must still
                # stop when told, not run out the rest of its pass first
                if await wait(max(started + i * spacing - loop.time(), 0.0)):
                    return
                if key in running:
                    continue  # its last resync still runs (a slow worker): it never overlaps itself
                await slots.acquire()
                running[key] = asyncio.create_task(one(key), name=f"resync {key}")
            rest = started + period - loop.time()
            if await wait(max(rest, 0.0)):
                return
    finally:
        if running:
            _, late = await asyncio.wait(set(running.values()), timeout=DRAIN_SECONDS)
            for task in late:
                task.cancel()
