"""The queues of connectops.concurrency.queues: the start-up backlog (each key run once, in
order, bounded, a failure not stopping the rest, closing cancels) and the delayed look (Later):
one per key, the latest asked replaces the one before, floored, cancellable."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from connectops.concurrency.queues import Backlog, Later


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
