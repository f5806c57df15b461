"""The fence every mutating call passes: a process that no longer leads never writes.

Leader election's watchdog ends a process that has not renewed its Lease for the renew deadline,
but it runs on a timer: a process frozen (SIGSTOP, a stalled VM, a long GC-like pause) and then
thawed could run a queued write before the watchdog wakes, after a standby already took over. So
each write to Connect or Kafka asks first; the question is one clock read.

Nothing is installed with ``--standalone`` (one process by contract) and in tests that run the
handlers in-process: :func:`check` is then a no-op.
"""

from __future__ import annotations

from collections.abc import Callable

_ensure: Callable[[], None] | None = None


def install(ensure: Callable[[], None]) -> None:
    """``ensure`` returns when this process still leads, and ends the process otherwise."""
    global _ensure
    _ensure = ensure


def check() -> None:
    if _ensure is not None:
        _ensure()
