"""Crash injection for the reset step machine's crash-safety tests.

``CONNECTOPS_FAILPOINT=<step>:<when>`` makes the operator process die with ``os._exit`` (no
cleanup, no status write: what a SIGKILL or an OOM kill looks like) when the named point is
reached. ``when`` is ``effects`` (the step acted, its completion is not yet recorded) or ``done``
(recorded, the next step not started). Unset in production; reading one environment variable
is the whole cost.

``<step>:<when>:kill`` sends the process SIGKILL instead, for the benchmarks' crash matrix,
which must show survival of ``kill -9`` itself.
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "CONNECTOPS_FAILPOINT"
EXIT_CODE = 137


def hit(step: str, when: str) -> None:
    point = os.environ.get(ENV)
    if point is None or not point.startswith(f"{step}:{when}"):
        return
    if point == f"{step}:{when}:kill":
        sys.stderr.write(f"failpoint {step}:{when} reached: SIGKILL\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    if point == f"{step}:{when}":
        sys.stderr.write(f"failpoint {step}:{when} reached: exiting\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)
