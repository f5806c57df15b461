"""``concurrency.slots.KeyedSlots``: a bound per key (a change's ConnectCluster), nothing kept per key
once no one holds or awaits it."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from connectops.concurrency.slots import KeyedSlots


async def test_each_key_has_its_own_bound_and_keys_do_not_wait_for_each_other() -> None:
    slots = KeyedSlots(2)
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    release = asyncio.Event()

    async def work(key: str) -> None:
        async with slots.hold(key):
            running[key] += 1
            peak[key] = max(peak[key], running[key])
            if key == "a":
                await release.wait()  # key a's workers stay stuck (say, its Connect unreachable)
            else:
                await asyncio.sleep(0.001)
            running[key] -= 1

    stuck = [asyncio.create_task(work("a")) for _ in range(5)]
    # key b's ten get through while a's slots are all held, at most two at a time
    await asyncio.wait_for(asyncio.gather(*(work("b") for _ in range(10))), timeout=2)
    assert peak == Counter({"a": 2, "b": 2})
    assert running["a"] == 2  # the other three of a wait
    release.set()
    await asyncio.gather(*stuck)
    assert peak["a"] == 2


async def test_a_key_is_forgotten_once_no_one_holds_or_awaits_it() -> None:
    slots = KeyedSlots(1)
    held = asyncio.Event()
    release = asyncio.Event()

    async def hold(key: object) -> None:
        async with slots.hold(key):
            held.set()
            await release.wait()

    first = asyncio.create_task(hold(("ns", "c")))
    await held.wait()
    waiting = asyncio.create_task(hold(("ns", "c")))
    await asyncio.sleep(0)
    assert len(slots) == 1
    release.set()
    await asyncio.gather(first, waiting)
    assert len(slots) == 0
    # names a user wrote, each held once: none is kept
    for i in range(100):
        async with slots.hold(("ns", f"cluster-{i}")):
            pass
    assert len(slots) == 0


async def test_a_holder_that_fails_or_is_cancelled_lets_its_slot_go() -> None:
    slots = KeyedSlots(1)
    with pytest.raises(RuntimeError):
        async with slots.hold("k"):
            raise RuntimeError("boom")
    blocker = asyncio.Event()

    async def stuck() -> None:
        async with slots.hold("k"):
            await blocker.wait()

    task = asyncio.create_task(stuck())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(stuck())
    await asyncio.sleep(0)
    waiter.cancel()  # cancelled while awaiting the slot
    task.cancel()  # cancelled while holding it
    await asyncio.gather(task, waiter, return_exceptions=True)
    assert len(slots) == 0
    async with asyncio.timeout(1), slots.hold("k"):
        pass
