"""Changes before resyncs: a freed Connect slot goes to a waiting change call first (the lanes
themselves: test_concurrency_lanes.py)."""

from __future__ import annotations

import asyncio

import httpx

from connectops.adapters.connect_rest import ConnectClient
from connectops.concurrency.lanes import background

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
