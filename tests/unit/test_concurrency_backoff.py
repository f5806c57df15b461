"""``concurrency.backoff.Backoff``: a first short wait, doubling to a cap, held at the first for
``hold`` seconds. The sleeps are recorded, not slept: the waits asked for are what is checked."""

from __future__ import annotations

import asyncio
import itertools
import types

import pytest

from connectops.concurrency import backoff
from connectops.concurrency.backoff import Backoff


def _waits(monkeypatch: pytest.MonkeyPatch, make: Backoff, n: int) -> list[float]:
    asked: list[float] = []

    async def sleep(seconds: float) -> None:
        asked.append(seconds)

    # backoff's own reference only: the asyncio module's sleep is every thread's (a session's
    # background loop sleeping meanwhile would be recorded here, and would not sleep)
    monkeypatch.setattr(backoff, "asyncio", types.SimpleNamespace(sleep=sleep))

    async def scenario() -> None:
        for _ in range(n):
            await make.wait()

    asyncio.run(scenario())
    return asked


def test_waits_double_from_the_first_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _waits(monkeypatch, Backoff(0.05, 0.3), 6) == [0.05, 0.1, 0.2, 0.3, 0.3, 0.3]


def test_the_defaults_start_at_50_ms_and_stop_at_one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = _waits(monkeypatch, Backoff(), 8)
    assert waits[0] == 0.05
    assert waits[-1] == 1.0
    assert all(b in (a * 2, 1.0) for a, b in itertools.pairwise(waits))


def test_a_hold_keeps_the_waits_at_the_first_until_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    # the sleeps are not slept, so an hour's hold outlasts the whole scenario
    assert _waits(monkeypatch, Backoff(0.05, 1.0, hold=3600), 5) == [0.05] * 5
