"""The per-cluster resync loop (connectops.concurrency.sweep): paced, bounded, never stopped by
one failure, members read afresh each pass, stopping promptly."""

from __future__ import annotations

import asyncio
import contextlib

from connectops.concurrency.sweep import sweep


class Stopper:
    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def wait(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), seconds)
        return self.event.is_set()


async def _run(
    period: float, passes: float, members: list[str], *, fail: str | None = None, in_flight: int = 16, work: float = 0
) -> tuple[list[tuple[float, str]], int]:
    loop = asyncio.get_running_loop()
    seen: list[tuple[float, str]] = []
    stop = Stopper()
    busy = peak = 0

    async def resync(key: str) -> None:
        nonlocal busy, peak
        seen.append((loop.time(), key))
        busy += 1
        peak = max(peak, busy)
        try:
            await asyncio.sleep(work)
            if key == fail:
                raise RuntimeError("boom")
        finally:
            busy -= 1

    task = asyncio.create_task(sweep(lambda: list(members), resync, stop.wait, period=period, in_flight=in_flight))
    await asyncio.sleep(period * passes)
    stop.event.set()
    await asyncio.wait_for(task, 15)
    return seen, peak


def test_each_member_once_per_period_spread_across_it() -> None:
    async def go() -> None:
        t0 = asyncio.get_running_loop().time()
        seen, _ = await _run(0.4, 3.5, ["a", "b", "c", "d"])
        # nothing in the first period (the change handlers' time), then two and a half passes
        keys = [k for _, k in seen]
        assert keys[:8] == ["a", "b", "c", "d"] * 2
        # never early: member i of pass p starts no sooner than its slot, period / n = 0.1 s apart
        # (a loaded machine can only make it later, so that is not asserted tightly)
        for n, (at, _key) in enumerate(seen[:8]):
            passes, i = divmod(n, 4)
            slot = t0 + 0.4 * (passes + 1) + 0.1 * i
            assert slot - 0.01 <= at <= slot + 1.0, (n, at - t0)

    asyncio.run(go())


def test_first_pass_waits_one_period() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        seen, _ = await _run(0.5, 1.5, ["a"])
        assert seen
        assert seen[0][0] - t0 >= 0.45

    asyncio.run(go())


def test_a_failing_resync_does_not_stop_the_others() -> None:
    async def go() -> None:
        seen, _ = await _run(0.3, 6, ["a", "bad", "c"], fail="bad")
        keys = [k for _, k in seen]
        assert keys.count("c") >= 2
        assert keys.count("bad") >= 2

    asyncio.run(go())


def test_members_are_read_each_pass() -> None:
    async def go() -> None:
        members = ["a"]
        seen: list[str] = []
        stop = Stopper()

        async def resync(key: str) -> None:
            seen.append(key)
            if key == "a" and "b" not in members:
                members.append("b")  # created during the pass
            if key == "b":
                members.remove("a")  # deleted

        task = asyncio.create_task(sweep(lambda: list(members), resync, stop.wait, period=0.2, in_flight=4))
        await asyncio.sleep(0.2 * 4.5)
        stop.event.set()
        await asyncio.wait_for(task, 5)
        assert seen[:3] == ["a", "a", "b"], seen
        assert set(seen[3:]) == {"b"}, seen

    asyncio.run(go())


def test_in_flight_is_bounded() -> None:
    async def go() -> None:
        # 10 members 0.1 s apart, each taking 0.5 s: without the bound 5 would overlap
        seen, peak = await _run(1.0, 2.0, [f"m{i}" for i in range(10)], in_flight=3, work=0.5)
        assert peak == 3
        assert 3 <= len(seen) <= 10

    asyncio.run(go())


def test_a_late_loop_still_stops_when_told() -> None:
    """Behind schedule (every member's slot already passed, each resync slow), the loop stops at
    its next member, not after running out its pass (50 x 0.2 s here)."""

    async def go() -> None:
        loop = asyncio.get_running_loop()
        stop = Stopper()
        started: list[float] = []

        async def resync(key: str) -> None:
            started.append(loop.time())
            await asyncio.sleep(0.2)

        members = [f"m{i}" for i in range(50)]
        task = asyncio.create_task(sweep(lambda: members, resync, stop.wait, period=0.1, in_flight=1))
        await asyncio.sleep(0.5)
        stop.event.set()
        told = loop.time()
        await asyncio.wait_for(task, 5)
        assert loop.time() - told < 0.6
        assert len(started) < 10

    asyncio.run(go())


def test_a_member_never_overlaps_itself() -> None:
    """A resync slower than the period is skipped by the next pass, not started beside itself
    (two at once would act on the same status: 4 restarts were seen where maxRestarts said 2)."""

    async def go() -> None:
        seen, peak = await _run(0.1, 8, ["only"], work=0.35)
        assert peak == 1
        assert 2 <= len(seen) <= 4

    asyncio.run(go())
