"""connectops.memory: the C heap's free pages go back to the system."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys

import pytest

from connectops import memory

#: run in a fresh interpreter: what glibc does with a freed block depends on the process's whole
#: heap history (CI43 ran this in an xdist worker that had hosted operators and held 450 MiB,
#: and the trim gave back 3 MiB), while the claim is about one burst in one process
_TRIM_PROBE = """
import ctypes, sys
from pathlib import Path
from connectops import memory

def rss_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS")

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
# below the mmap threshold (128 KiB), so they come from the heap, then one block on top
blocks = [libc.malloc(64 * 1024) for _ in range(1600)]  # 100 MiB
for b in blocks:
    ctypes.memset(b, 1, 64 * 1024)  # touched: resident
top = libc.malloc(64 * 1024)
for b in blocks:
    libc.free(b)
before = rss_kib()
trimmed = memory.trim()
print(trimmed, before, rss_kib())
libc.free(top)
"""


def test_trim_gives_back_pages_freed_below_a_live_block() -> None:
    """glibc keeps freed pages resident when a live block sits above them; trim returns them."""
    probe = subprocess.run([sys.executable, "-c", _TRIM_PROBE], capture_output=True, text=True, timeout=60, check=True)
    trimmed, before, after = probe.stdout.split()
    assert trimmed == "True"
    assert int(before) - int(after) > 50 * 1024, (before, after)  # most of the 100 MiB went back


async def test_trim_forever_trims_each_period_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(memory, "_TRIM", lambda pad: calls.append(pad) or 1)
    task = asyncio.create_task(memory.trim_forever(0.01))
    await asyncio.sleep(0.1)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert len(calls) >= 3
    assert set(calls) == {0}


async def test_a_period_of_zero_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(memory, "_TRIM", lambda pad: calls.append(pad) or 1)
    await asyncio.wait_for(memory.trim_forever(0), 1)  # returns at once
    assert calls == []


async def test_without_malloc_trim_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_TRIM", None)
    assert memory.trim() is False
    await asyncio.wait_for(memory.trim_forever(0.01), 1)  # returns at once


async def test_tls_connections_opened_after_the_setting_read_through_the_smaller_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """asyncio sizes each TLS connection's read buffer when the connection is made: one made
    after ``smaller_tls_buffers`` holds that size, not asyncio's 256 KiB."""
    import asyncio.sslproto
    import ssl

    protocol = asyncio.sslproto.SSLProtocol
    # asyncio's default, as a fresh process has it (an operator started earlier in this test
    # process has set it already); put back as it was after the test
    monkeypatch.setattr(protocol, "max_size", 256 * 1024)

    def opened() -> int:
        waiter = asyncio.get_running_loop().create_future()
        conn = protocol(asyncio.get_running_loop(), asyncio.Protocol(), ssl.create_default_context(), waiter)
        waiter.cancel()
        return len(conn._ssl_buffer)

    before = opened()
    assert memory.smaller_tls_buffers() is True
    assert (before, opened()) == (256 * 1024, memory.TLS_READ_BUFFER)
