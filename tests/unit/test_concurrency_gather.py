"""``concurrency.gather``: ``both`` and ``each``, reads at once, failures raised as themselves,
nothing left running."""

from __future__ import annotations

import asyncio

import pytest

from connectops.concurrency.gather import both, each, unwrap


async def test_both_results_in_argument_order() -> None:
    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    assert await both(value(1, 0.02), value(2, 0.0)) == (1, 2)


async def test_the_reads_overlap() -> None:
    running = 0
    peak = 0

    async def read() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    await both(read(), read())
    assert peak == 2


async def test_a_failure_is_raised_as_itself_after_the_other_read_ended() -> None:
    finished: list[str] = []

    async def slow() -> str:
        await asyncio.sleep(0.02)
        finished.append("slow")
        return "slow"

    async def failing() -> str:
        raise KeyError("broker")

    with pytest.raises(KeyError, match="broker"):
        await both(slow(), failing())
    assert finished == ["slow"]  # awaited to its end: no task left running unseen


async def test_the_first_failure_in_argument_order_wins() -> None:
    async def fail(exc: Exception) -> None:
        raise exc

    with pytest.raises(ValueError, match="connect"):
        await both(fail(ValueError("connect")), fail(KeyError("broker")))


async def test_each_keeps_the_order_of_its_reads_and_overlaps_them() -> None:
    running = 0
    peak = 0

    async def value(v: int, delay: float) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(delay)
        running -= 1
        return v

    assert await each(value(i, 0.03 - i * 0.01) for i in range(3)) == [0, 1, 2]
    assert peak == 3
    assert await each([]) == []


async def test_each_raises_the_first_failure_after_every_read_ended() -> None:
    finished: list[int] = []

    async def read(i: int) -> int:
        await asyncio.sleep(0.01 * i)
        if i in (1, 2):
            raise ValueError(f"read {i}")
        finished.append(i)
        return i

    with pytest.raises(ValueError, match="read 1"):
        await each(read(i) for i in range(4))
    assert sorted(finished) == [0, 3]


def test_unwrap_returns_a_result_and_raises_an_exception() -> None:
    assert unwrap("offsets") == "offsets"
    with pytest.raises(KeyError, match="broker"):
        unwrap(KeyError("broker"))
