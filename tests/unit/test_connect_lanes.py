"""Changes before resyncs (issue 17): a freed Connect slot goes to a waiting change call first."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from connectops.adapters.connect_rest import ConnectClient, Lanes
from connectops.priority import background

STATUS = {"name": "c", "connector": {"state": "RUNNING", "worker_id": "w:8083"}, "tasks": [], "type": "source"}


def test_a_change_overtakes_queued_background_calls() -> None:
    """One slot, held; ten resync calls queue, then one change call: the change is served next,
    then the resyncs in their own order. Requests are observed at the transport (what Connect sees)."""

    async def scenario() -> list[str]:
        seen: list[str] = []
        gate = asyncio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path.split("/")[2])
            if len(seen) == 1:
                await gate.wait()
            return httpx.Response(200, json={**STATUS, "name": request.url.path.split("/")[2]})

        client = ConnectClient("http://connect:8083", max_concurrency=1, transport=httpx.MockTransport(handler))
        first = asyncio.create_task(client.get_status("holder"))
        while not seen:
            await asyncio.sleep(0)

        async def resync(i: int) -> None:
            with background():
                await client.get_status(f"resync{i}")

        resyncs = [asyncio.create_task(resync(i)) for i in range(10)]
        await asyncio.sleep(0.01)
        change = asyncio.create_task(client.get_status("change"))
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(first, change, *resyncs)
        await client.aclose()
        return seen

    seen = asyncio.run(scenario())
    assert seen == ["holder", "change", *(f"resync{i}" for i in range(10))]


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
    from connectops.priority import BACKGROUND

    assert BACKGROUND.get() is False
    with background():
        assert BACKGROUND.get() is True
    assert BACKGROUND.get() is False
