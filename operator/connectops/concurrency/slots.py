"""A bound on holders per key, for keys that come and go."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass


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
