"""Workarounds for kopf behaviour that does not scale, installed when the handlers are imported.

**Start-up with indexes is quadratic in kopf 1.45.2** (the newest release on 2026-11-26). When an
operator declares ``@kopf.index`` handlers, every object of the first listing gets a toggle in
the operator's ``operator_indexed`` set (``ToggleSet(all)``) and its worker waits on the set's
one ``asyncio.Condition`` until the whole set is on; each toggle made, and each dropped once its
object is indexed, calls ``notify_all``. So N objects make 2N notifications to up to N waiters:
N² wake-ups, each re-evaluating the set only to go back to sleep. Measured with
``benchmarks/apply_bench.py``: a restart with 10,000 Connectors spent its first minutes of CPU in
``asyncio.Condition.notify`` (py-spy: 60% of samples in ``BaseEventLoop._call_soon`` under
``ToggleSet.make_toggle``) before any handler ran; at 1,000 this was most of the 8 s resync.

Adding a toggle or removing one changes no single toggle's state, so the only waiters that can
care are the set's own (``ToggleSet.wait_for``), and they wait for the set's state. Here the set
notifies only when its state changed: the same wake-ups that release someone, none of the
N² that release no one. ``Toggle.turn_to`` is unchanged.

The patch checks that kopf's ToggleSet still has the shape it was written against (``_condition``,
``_toggles``, ``is_on``); if a kopf release changes it, nothing is patched and a warning says so
(start-up is then slow again, never wrong). ``tests/unit/test_kopf_fixes.py`` pins both the wake-up
count and that every waiter is still released.

**kopf's API requests are unbounded.** Its aiohttp session has no connection limit
(``TCPConnector(limit=0)``) and every object's worker patches its object on its own, so when
hundreds of objects are handled at once (the first listing of a start-up that meets a GitOps
sync) kopf opens one TLS connection per request in flight: 2,014 at one tracemalloc snapshot
of 1,000 creations that began with the operator, each with its buffers and OpenSSL state.
:func:`bound_requests` lets at most N requests wait for their answer's headers at once; a
watch holds its slot only until its headers arrive (its stream is read outside), so no watch
can starve the others. A connection limit would not do: watches hold their connections for
minutes, and with enough namespaces they would take every one.

**kopf queues every object of a listing with its whole body.** Its worker limit bounds the
workers, not the events waiting for one: ``Scheduler.spawn`` puts each object's worker on an
unbounded queue and returns, so the watcher reads on and a start with 10,000 Connectors holds
all 10,000 decoded bodies until a worker takes each. :func:`strip_managed_fields` takes
``metadata.managedFields`` (which neither kopf nor this operator reads) out of every object as
kopf's watch-stream yields it, before it is queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import api, watching

logger = logging.getLogger(__name__)
_MARK = "_connectops_quiet_notify"
#: kopf's own methods, kept so a test can measure kopf without the patch
_ORIGINALS: dict[str, Any] = {}


async def _changing(self: Any, change: Callable[[set[aiotoggles.Toggle]], object]) -> None:
    """Apply ``change`` to the set's toggles; wake its waiters only if the set's state moved."""
    async with self._condition:
        before = self.is_on()
        change(self._toggles)
        if self.is_on() != before:
            self._condition.notify_all()


async def _make_toggle(self: Any, __val: bool = False, *, name: str | None = None) -> aiotoggles.Toggle:
    toggle = aiotoggles.Toggle(__val, name=name, condition=self._condition)
    await _changing(self, lambda toggles: toggles.add(toggle))
    return toggle


async def _drop_toggle(self: Any, toggle: aiotoggles.Toggle) -> None:
    await _changing(self, lambda toggles: toggles.discard(toggle))


async def _drop_toggles(self: Any, toggles: Iterable[aiotoggles.Toggle]) -> None:
    await _changing(self, lambda present: present.difference_update(toggles))


def _shape_known() -> bool:
    probe = aiotoggles.ToggleSet(all)
    return (
        isinstance(getattr(probe, "_condition", None), asyncio.Condition)
        and isinstance(getattr(probe, "_toggles", None), set)
        and all(callable(getattr(probe, m, None)) for m in ("is_on", "make_toggle", "drop_toggle", "drop_toggles"))
    )


def install() -> bool:
    """Patch kopf's ToggleSet once; False (and a warning) when kopf's shape is not the known one."""
    cls: Any = aiotoggles.ToggleSet
    if getattr(cls, _MARK, False):
        return True
    if not _shape_known():
        logger.warning("kopf's ToggleSet changed shape: start-up with many objects is not sped up")
        return False
    _ORIGINALS.update({name: cls.__dict__[name] for name in ("make_toggle", "drop_toggle", "drop_toggles")})
    cls.make_toggle = _make_toggle
    cls.drop_toggle = _drop_toggle
    cls.drop_toggles = _drop_toggles
    setattr(cls, _MARK, True)
    return True


def forget_managed_fields(body: Any) -> None:
    """Drop ``metadata.managedFields`` from the event body kopf keeps for the object.

    Each Connector's latest body is kept for its resync (``connectops.indexes``, encoded), and
    kopf keeps the event's body for the object's handlers: about a third of a Connector's is
    managedFields (1 of 3 KB), which neither kopf nor this operator reads (server-side apply's
    field ownership is the API server's; GitOps tools read it from the server). Called by the
    Connector event handler before it keeps the body, so neither copy has it. With
    :func:`strip_managed_fields` installed the field is already gone; this is what still trims
    when kopf's watch-stream changed shape and that patch was not installed. Reaches into kopf's
    view for its source dict; if that ever is not a plain dict, nothing is dropped.
    """
    forget_managed_fields_of(getattr(body, "_src", None))


_WATCH_MARK = "_connectops_no_managed_fields"


def strip_managed_fields() -> bool:
    """Every object kopf's watch-streams yield (the listing's and the watch's) loses
    ``metadata.managedFields`` before kopf queues it (see the module's docstring). False, with a
    warning, when kopf's ``infinite_watch`` is not the async generator this was written against."""
    original = watching.infinite_watch
    if getattr(original, _WATCH_MARK, False):
        return True
    if not inspect.isasyncgenfunction(original):
        logger.warning("kopf's watch-stream changed shape: queued objects keep their managedFields")
        return False

    async def infinite_watch(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with contextlib.aclosing(original(*args, **kwargs)) as events:
            async for event in events:
                if isinstance(event, dict):
                    forget_managed_fields_of(event.get("object"))
                yield event

    setattr(infinite_watch, _WATCH_MARK, True)
    _ORIGINALS["infinite_watch"] = original
    watching.infinite_watch = infinite_watch
    return True


def forget_managed_fields_of(obj: Any) -> None:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)


_REQUEST_MARK = "_connectops_bounded"


def bound_requests(limit: int) -> bool:
    """At most ``limit`` of kopf's API requests wait for their answer at once (per event loop:
    the tests run several operators one after another in one process). False, with a warning,
    when kopf's ``api.request`` is not the coroutine function this was written against."""
    original = api.request
    if getattr(original, _REQUEST_MARK, False):
        return True
    if not inspect.iscoroutinefunction(original) or limit < 1:
        logger.warning("kopf's API requests are not bounded (kopf changed shape, or the limit is < 1)")
        return False
    slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()

    async def request(*args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        slot = slots.get(loop)
        if slot is None:
            slot = slots[loop] = asyncio.Semaphore(limit)
        async with slot:
            return await original(*args, **kwargs)

    setattr(request, _REQUEST_MARK, True)
    _ORIGINALS["request"] = original
    api.request = request
    return True
