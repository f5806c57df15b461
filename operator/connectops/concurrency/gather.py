"""Independent awaitables at once, each failure raised as itself (not an ExceptionGroup)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


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
