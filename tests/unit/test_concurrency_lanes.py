"""``concurrency.lanes``: a bounded number of holders, a freed slot going to a waiting change
before any waiting background work, FIFO within each lane; and the context mark saying which is
which."""

from __future__ import annotations

import asyncio

import pytest

from connectops.concurrency.lanes import BACKGROUND, Lanes, background


def test_a_freed_slot_goes_to_the_oldest_change_before_any_background_waiter() -> None:
    async def scenario() -> list[str]:
        lanes = Lanes(1)
        order: list[str] = []
        await lanes.acquire(False)

        async def call(name: str, in_background: bool) -> None:
            await lanes.acquire(in_background)
            order.append(name)
            lanes.release()

        tasks = [asyncio.create_task(call(f"resync{i}", True)) for i in range(3)]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(call(f"change{i}", False)) for i in range(2)]
        await asyncio.sleep(0)
        assert lanes.waiting == (2, 3)
        lanes.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["change0", "change1", "resync0", "resync1", "resync2"]


def test_slot_takes_the_lane_from_the_context_mark() -> None:
    async def scenario() -> list[str]:
        lanes = Lanes(1)
        order: list[str] = []
        await lanes.acquire(False)

        async def call(name: str, in_background: bool) -> None:
            if in_background:
                with background():
                    async with lanes.slot():
                        order.append(name)
            else:
                async with lanes.slot():
                    order.append(name)

        tasks = [asyncio.create_task(call("resync", True))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(call("change", False)))
        await asyncio.sleep(0)
        lanes.release()
        await asyncio.gather(*tasks)
        assert lanes.waiting == (0, 0)
        return order

    assert asyncio.run(scenario()) == ["change", "resync"]


def test_without_background_calls_it_is_a_fifo_semaphore() -> None:
    async def scenario() -> list[int]:
        lanes = Lanes(2)
        order: list[int] = []
        await lanes.acquire(False)
        await lanes.acquire(False)

        async def call(i: int) -> None:
            await lanes.acquire(False)
            order.append(i)
            lanes.release()

        tasks = [asyncio.create_task(call(i)) for i in range(5)]
        await asyncio.sleep(0)
        assert lanes.waiting == (5, 0)
        lanes.release()
        lanes.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("handed_first", [True, False])
def test_a_cancelled_waiter_neither_leaks_nor_loses_a_slot(handed_first: bool) -> None:
    async def scenario() -> int:
        lanes = Lanes(1)
        await lanes.acquire(False)
        waiter = asyncio.create_task(lanes.acquire(True))
        await asyncio.sleep(0)
        if handed_first:
            lanes.release()  # the slot goes to the waiter, which is cancelled before it runs
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        if not handed_first:
            lanes.release()
        # exactly one slot is free again: one acquire passes at once, a second one waits
        await asyncio.wait_for(lanes.acquire(False), 1)
        second = asyncio.create_task(lanes.acquire(False))
        await asyncio.sleep(0.01)
        blocked = not second.done()
        second.cancel()
        return int(blocked)

    assert asyncio.run(scenario()) == 1


def test_background_marks_only_its_own_calls() -> None:
    assert BACKGROUND.get() is False
    with background():
        assert BACKGROUND.get() is True
    assert BACKGROUND.get() is False
