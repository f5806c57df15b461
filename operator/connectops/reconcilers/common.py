"""Pieces every reconciler shares: Events, status diffs, conditions."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from connectops.models.base import Condition, get_condition, set_condition

A = TypeVar("A")
B = TypeVar("B")

#: (type "Normal"|"Warning", reason, message) -> posts a Kubernetes Event on the object
EmitEvent = Callable[[str, str, str], None]


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
        self._hold_until = time.monotonic() + hold

    async def wait(self) -> None:
        await asyncio.sleep(self._next)
        if time.monotonic() >= self._hold_until:
            self._next = min(self._next * 2, self._cap)


class KeyedSlots:
    """At most ``limit`` holders at once for each key, and a key's count kept only while someone
    holds or awaits it: keys come from what users write (a ConnectCluster's name), so none may
    outlive its use."""

    @dataclass
    class _Entry:
        slots: asyncio.Semaphore
        users: int = 0

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: dict[Hashable, KeyedSlots._Entry] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = KeyedSlots._Entry(asyncio.Semaphore(self._limit))
        entry.users += 1
        try:
            async with entry.slots:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._entries[key]

    def __len__(self) -> int:
        """Keys held or awaited now."""
        return len(self._entries)


async def each_object(pages: AsyncIterator[list[A]]) -> AsyncIterator[A]:
    """The objects of a paged listing one at a time, so a scan keeps one page, not the list."""
    async for page in pages:
        for obj in page:
            yield obj


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Two independent reads at once. Both are awaited to their end even when one fails (no
    task is left running unseen), and the first failure, in argument order, is raised as itself:
    callers catch the adapters' typed errors, not an ExceptionGroup."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    return unwrap(a), unwrap(b)


async def each(reads: Iterable[Awaitable[A]]) -> list[A]:
    """Independent reads at once, as :func:`both` does for two: all awaited to their end, the
    first failure raised as itself."""
    return [unwrap(r) for r in await asyncio.gather(*reads, return_exceptions=True)]


def unwrap(result: A | BaseException) -> A:
    """One result of ``asyncio.gather(..., return_exceptions=True)``, or what it raised."""
    if isinstance(result, BaseException):
        raise result
    return result


@dataclass
class Outcome:
    """What a reconcile decided: a status to publish and, maybe, an error to retry on."""

    status: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    #: when (wall-clock seconds) the object is to be reconciled again, sooner than its resync
    #: would: an automatic restart falling due (None: the resync is soon enough)
    look_at: float | None = None


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Only the top-level status fields whose value changed (Strimzi: write status only on
    change), so a resync that finds nothing new makes no API write at all."""
    return {k: v for k, v in new.items() if old.get(k) != v}


class Conditions:
    """Collects condition updates and emits an Event only when a condition really changes."""

    def __init__(
        self, current: Sequence[Condition | dict[str, Any]] | None, generation: int | None, emit: EmitEvent
    ) -> None:
        self._items = [c if isinstance(c, Condition) else Condition.model_validate(c) for c in current or []]
        self._generation = generation
        self._emit = emit

    def set(
        self,
        type_: str,
        status: bool | None,
        reason: str,
        message: str,
        *,
        event_on_change: bool = False,
        warning: bool = False,
    ) -> None:
        before = get_condition(self._items, type_)
        self._items = set_condition(self._items, type_, status, reason, message, self._generation)
        changed = before is None or (before.status, before.reason, before.message) != (
            "Unknown" if status is None else str(status),
            reason,
            message,
        )
        if changed and event_on_change:
            self._emit("Warning" if warning else "Normal", reason, message)

    def get(self, type_: str) -> Condition | None:
        return get_condition(self._items, type_)

    @property
    def items(self) -> list[Condition]:
        """The conditions as models, for a status model (its ``for_storage`` drops empty strings:
        some API servers, 1.20 built with Go >= 1.16, kubernetes#99804, reject "" in custom objects)."""
        return list(self._items)
