"""Gives the C heap's free pages back to the system after a burst of work.

Why: a burst (a GitOps sync creating 1,000 Connectors, a restart resuming every object) makes
the process allocate hundreds of MiB at once, and almost all of it is freed again once the
burst is over. Python's own small-object arenas go back to the system when they empty, but
what CPython, httpx, pydantic and the Kubernetes client allocate through glibc's malloc stays in
the process: glibc returns memory only from the top of each heap, so one live block above many
free pages keeps them all resident. ``malloc_trim(0)`` releases every free page in every heap
(glibc >= 2.8), at the cost of a walk of the heap (milliseconds at a few hundred MiB). Run
periodically, it turns "RSS stays at the burst's peak" into "RSS returns to what is live".

Only glibc has it (the image is Debian-based); elsewhere this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

#: how often the heap is trimmed by default (``CONNECTOPS_MALLOC_TRIM_SECONDS``): often enough
#: that a burst's pages go back within a minute, rarely enough that the walk costs nothing
#: measurable
TRIM_SECONDS = 60.0


def _malloc_trim() -> Callable[[int], int] | None:
    # the symbols already loaded in this process (libc among them): no library lookup, which
    # on Linux runs ldconfig in a subprocess
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc (musl has no malloc_trim)
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_TRIM = _malloc_trim()


def trim() -> bool:
    """Release the free pages of the C heap now; False when this libc cannot."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


async def trim_forever(period: float = TRIM_SECONDS) -> None:
    """Trims every ``period`` seconds until cancelled (started with the operator); a period of
    0 turns it off."""
    if period <= 0:
        return
    if _TRIM is None:
        log.info("malloc_trim is not available in this libc: freed heap pages stay resident")
        return
    while True:
        await asyncio.sleep(period)
        # a walk of the heap, in a thread: the event loop keeps serving meanwhile
        await asyncio.to_thread(trim)
