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

The other half is not allocating what a burst does not need: :func:`smaller_tls_buffers`.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

#: how often the heap is trimmed by default (``CONNECTOPS_MALLOC_TRIM_SECONDS``): often enough
#: that a burst's pages go back within a minute, rarely enough that the walk costs nothing
#: measurable
TRIM_SECONDS = 60.0

#: the read buffer of each TLS connection the event loop opens (asyncio's own: 256 KiB): one
#: TLS record's worth
TLS_READ_BUFFER = 16 * 1024


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


def smaller_tls_buffers(size: int = TLS_READ_BUFFER) -> bool:
    """Gives every TLS connection asyncio opens from now on a read buffer of ``size`` bytes.

    Why: asyncio's TLS transport allocates a zero-filled 256 KiB ``bytearray`` per connection
    (``SSLProtocol.max_size``), resident at once, and kopf's API client has no connection limit:
    during a burst of changes it opens one connection per concurrent request to the API server
    (60 and more at 1,000 Connector creations), so the buffers alone are tens of MiB, and glibc
    keeps their pages after they are freed. A TLS record carries at most 16 KiB of data, so a
    read of 16 KiB still takes a whole record; a large answer (a listing) costs more reads of
    the socket, each microseconds. Measured side by side, 1,000 Connector creations
    (``benchmarks/burst_memory_bench.py`` conditions, 2 rounds): peak RSS 175-183 MiB with
    256 KiB, 150-156 with 64 KiB, 139-146 with 16 KiB. The attribute is asyncio's (3.11+), not
    a public setting: if it is ever gone this does nothing and says so.
    """
    protocol = asyncio.sslproto.SSLProtocol
    if not isinstance(getattr(protocol, "max_size", None), int):
        log.info("asyncio's TLS read buffer size is not settable in this Python: left as it is")
        return False
    protocol.max_size = size
    return True
