"""The crash failpoints: exit code, SIGKILL variant, and no effect on other points."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from connectops.failpoints import ENV, EXIT_CODE

CALL = "from connectops.failpoints import hit; hit('stop', 'done'); print('alive')"


@pytest.mark.parametrize(
    ("point", "code", "alive"),
    [
        ("stop:done", EXIT_CODE, False),
        ("stop:done:kill", -signal.SIGKILL, False),
        ("stop:effects", 0, True),
        ("stopx:done", 0, True),
        ("stop:done:other", 0, True),
    ],
)
def test_failpoint(point: str, code: int, alive: bool) -> None:
    env = {**os.environ, ENV: point}
    result = subprocess.run(
        [sys.executable, "-c", CALL], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == code, result.stderr
    assert ("alive" in result.stdout) is alive
