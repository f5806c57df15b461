"""The per-cluster resync loop (connectops.reconcilers.sweep): paced, bounded, never stopped by
one failure, members read afresh each pass, stopping promptly; and the start-up backlog: each key
run once, in order, bounded, a failure not stopping the rest, closing cancels; and the delayed
look (Later): one per key, the latest asked replaces the one before, floored, cancellable."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import pytest

from connectops.reconcilers.sweep import Backlog, Later, sweep


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
    (two at once would act on the same status: CI29 saw 4 restarts where maxRestarts said 2)."""

    async def go() -> None:
        seen, peak = await _run(0.1, 8, ["only"], work=0.35)
        assert peak == 1
        assert 2 <= len(seen) <= 4

    asyncio.run(go())


def _backlog_run(keys: list[str], *, workers: int, fail: str = "", gate: float = 0.01) -> tuple[list[str], int, int]:
    """Adds ``keys`` (duplicates included) to a backlog whose runs each wait ``gate`` seconds;
    returns the keys run in order, the most at once, and the worker tasks left after."""

    async def main() -> tuple[list[str], int, int]:
        ran: list[str] = []
        busy = peak = 0

        async def run(key: str) -> None:
            nonlocal busy, peak
            busy += 1
            peak = max(peak, busy)
            try:
                await asyncio.sleep(gate)
                ran.append(key)
                if key == fail:
                    raise RuntimeError("boom")
            finally:
                busy -= 1

        backlog = Backlog(run, workers=workers)
        for key in keys:
            backlog.add(key)
        for _ in range(1000):
            await asyncio.sleep(0.01)
            if len(ran) >= len(set(keys)) and busy == 0:
                break
        await asyncio.sleep(0)  # the workers' done callbacks
        return ran, peak, len(backlog._workers)

    return asyncio.run(main())


def test_backlog_runs_each_queued_key_once_in_order_bounded() -> None:
    keys = [f"k{i:03d}" for i in range(100)]
    ran, peak, left = _backlog_run([*keys, "k005", "k099"], workers=8)
    # the two repeats were still waiting when added again: not run twice
    assert sorted(ran) == keys
    assert peak == 8
    # each worker takes the next key in order, so the starts (and, equal waits, the ends) keep it
    assert sorted(ran[:8]) == keys[:8]
    assert left == 0  # no task idles once the queue is empty


def test_a_failing_run_does_not_stop_the_backlog(caplog: pytest.LogCaptureFixture) -> None:
    keys = [f"k{i}" for i in range(20)]
    ran, _, _ = _backlog_run(keys, workers=2, fail="k3")
    assert sorted(ran) == sorted(keys)
    assert "queued resync of k3 failed" in caplog.text


def test_a_key_already_taken_can_be_queued_again() -> None:
    async def main() -> list[str]:
        ran: list[str] = []
        release = asyncio.Event()

        async def run(key: str) -> None:
            ran.append(key)
            await release.wait()

        backlog = Backlog(run, workers=1)
        backlog.add("a")
        await asyncio.sleep(0.01)  # taken: running, no longer waiting
        backlog.add("a")
        assert len(backlog) == 1
        release.set()
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(ran) == 2:
                break
        return ran

    assert asyncio.run(main()) == ["a", "a"]


def test_closing_cancels_running_and_drops_queued() -> None:
    async def main() -> tuple[list[str], list[str], int]:
        started: list[str] = []
        cancelled: list[str] = []

        async def run(key: str) -> None:
            started.append(key)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(key)
                raise

        backlog = Backlog(run, workers=2)
        for key in "abcde":
            backlog.add(key)
        await asyncio.sleep(0.01)
        await backlog.close()
        return started, cancelled, len(backlog)

    started, cancelled, queued = asyncio.run(main())
    assert started == ["a", "b"]
    assert sorted(cancelled) == ["a", "b"]
    assert queued == 0


def test_a_backlog_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        Backlog(lambda key: asyncio.sleep(0), workers=0)


def test_a_key_added_as_the_last_worker_finishes_is_run() -> None:
    """A worker that found the queue empty has ended, but its task leaves the set of workers
    only on a later turn of the loop: a key added in that turn must still get a worker."""

    async def main() -> tuple[list[str], int]:
        ran: list[str] = []

        async def run(key: str) -> None:
            ran.append(key)  # no await: the worker ends in the step it ran "a"

        backlog = Backlog(run, workers=1)
        backlog.add("a")
        await asyncio.sleep(0)  # the worker runs "a", finds the queue empty and ends
        backlog.add("b")
        for _ in range(10):
            await asyncio.sleep(0.001)
        return ran, len(backlog)

    assert asyncio.run(main()) == (["a", "b"], 0)


def test_later_runs_a_key_once_when_asked_and_the_latest_ask_wins() -> None:
    async def main() -> tuple[list[tuple[str, float]], int]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        ran: list[tuple[str, float]] = []

        async def run(key: str) -> None:
            ran.append((key, loop.time() - start))

        later = Later(run, spacing=0.05)
        later.at("a", 0.3)
        later.at("a", 0.1)  # replaces the 0.3 s one: never two waiting for one key
        later.at("b", 0.2)
        later.at("c", 0.1)
        later.at("c", None)  # asked not to look again
        later.at("d", -1.0)  # a moment already past: at once (its asker may have waited up to it)
        assert len(later) == 3
        await asyncio.sleep(0.5)
        return ran, len(later)

    ran, waiting = asyncio.run(main())
    assert [key for key, _ in ran] == ["d", "a", "b"]
    assert ran[0][1] < 0.05
    assert 0.1 <= ran[1][1] < 0.25
    assert 0.2 <= ran[2][1] < 0.35
    assert waiting == 0


def test_later_runs_of_a_key_start_spacing_apart_so_a_run_asking_again_cannot_spin() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        ran: list[float] = []

        async def run(key: str) -> None:
            ran.append(loop.time() - start)
            later.at(key, 0.0)  # a look that finds its moment a hair early asks again at once

        later = Later(run, spacing=0.1)
        later.at("a", 0.0)
        await asyncio.sleep(0.35)
        await later.close()
        return ran

    ran = asyncio.run(main())
    assert 3 <= len(ran) <= 4
    assert all(b - a >= 0.09 for a, b in itertools.pairwise(ran))


def test_later_cancel_and_close() -> None:
    async def main() -> tuple[list[str], list[str], int]:
        ran: list[str] = []
        cancelled: list[str] = []

        async def run(key: str) -> None:
            ran.append(key)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(key)
                raise

        later = Later(run, spacing=0.01)
        later.at("deleted", 0.05)
        later.cancel("deleted")  # its object is gone
        later.at("running", 0.01)
        later.at("waiting", 30)
        await asyncio.sleep(0.1)
        await later.close()
        return ran, cancelled, len(later)

    ran, cancelled, waiting = asyncio.run(main())
    assert ran == ["running"]
    assert cancelled == ["running"]
    assert waiting == 0


def test_a_failing_later_run_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async def run(key: str) -> None:
            raise RuntimeError(key)

        later = Later(run, spacing=0.01)
        later.at("x", 0.01)
        await asyncio.sleep(0.1)

    asyncio.run(main())
    assert "delayed reconcile of x failed" in caplog.text
