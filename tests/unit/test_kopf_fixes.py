"""kopf's start-up index gate without its N² wake-ups (connectops.kopf_fixes).

The scenario is kopf's own (kopf/_core/reactor/queueing.py and processing.py): a blocker toggle,
one toggle made per listed object, every object's worker waiting for the set to be on, each
toggle dropped once its object is indexed. Wake-ups are counted by wrapping the predicate each
waiter re-evaluates; that is what every ``notify_all`` costs per waiter.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kopf._cogs.aiokits import aiotoggles

from connectops import kopf_fixes

N = 300


async def _start_up(objects: int) -> tuple[int, list[bool]]:
    """kopf's start-up: the listing makes one toggle per object, yielding between objects as the
    watcher does between stream events; each object's worker indexes, drops its toggle and waits
    for the set; the blocker goes once the listing is over. Returns the set's evaluations (each
    woken waiter makes one) and who was released."""
    toggles = aiotoggles.ToggleSet(all)
    wakeups = 0
    released: list[bool] = []
    original = toggles.is_on

    def counting_is_on() -> bool:
        nonlocal wakeups
        wakeups += 1
        return original()

    object.__setattr__(toggles, "is_on", counting_is_on)
    blocker = await toggles.make_toggle(name="orchestration blocker")

    async def worker(own: aiotoggles.Toggle) -> None:
        await asyncio.sleep(0)  # indexing
        await toggles.drop_toggle(own)
        await toggles.wait_for(True)
        released.append(True)

    workers: list[asyncio.Task[None]] = []
    for i in range(objects):
        own = await toggles.make_toggle(name=f"object {i}")
        workers.append(asyncio.create_task(worker(own)))
        await asyncio.sleep(0)  # the next event of the listing
    await asyncio.sleep(0.01)
    assert released == []  # nobody is released before the blocker goes
    await toggles.drop_toggle(blocker)
    await asyncio.wait_for(asyncio.gather(*workers), 10)
    return wakeups, released


@pytest.fixture
def unpatched() -> Any:
    cls: Any = aiotoggles.ToggleSet
    saved = {name: cls.__dict__[name] for name in ("make_toggle", "drop_toggle", "drop_toggles")}
    marked = cls.__dict__.get(kopf_fixes._MARK)
    originals = getattr(kopf_fixes, "_ORIGINALS", None)
    if marked and originals:
        for name, fn in originals.items():
            setattr(cls, name, fn)
        delattr(cls, kopf_fixes._MARK)
    yield
    for name, fn in saved.items():
        setattr(cls, name, fn)
    if marked:
        setattr(cls, kopf_fixes._MARK, True)


def test_every_waiter_is_released_with_few_wakeups() -> None:
    assert kopf_fixes.install()
    wakeups, released = asyncio.run(_start_up(N))
    assert released == [True] * N
    # each waiter wakes once or twice (its first check, and the blocker going), and each make or
    # drop checks the set before and after
    assert wakeups <= 7 * N, wakeups


def test_kopf_alone_wakes_every_waiter_per_change(unpatched: Any) -> None:
    """The cost the fix removes, measured on kopf's own ToggleSet: every make and drop wakes every
    waiter so far (if kopf fixes this, this test fails and the patch can go)."""
    wakeups, released = asyncio.run(_start_up(N))
    assert released == [True] * N
    assert wakeups >= N * N // 4, wakeups


async def _waiting_for_off() -> bool:
    toggles = aiotoggles.ToggleSet(any)
    on = await toggles.make_toggle(True)
    seen = asyncio.Event()

    async def waiter() -> None:
        await toggles.wait_for(False)
        seen.set()

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0.01)
    assert not seen.is_set()
    await toggles.drop_toggle(on)  # any() of nothing: off, a state change, so a wake-up
    await asyncio.wait_for(task, 5)
    return seen.is_set()


def test_a_state_change_by_drop_still_wakes_waiters() -> None:
    assert kopf_fixes.install()
    assert asyncio.run(_waiting_for_off())


def test_install_is_idempotent() -> None:
    assert kopf_fixes.install()
    first = aiotoggles.ToggleSet.make_toggle
    assert kopf_fixes.install()
    assert aiotoggles.ToggleSet.make_toggle is first


def test_the_kept_body_loses_managed_fields_only() -> None:
    """The body kopf keeps for a Connector's timer is the raw event dict behind its view: the
    trim must reach it (if kopf's view stops exposing it, this fails and the trim is a no-op)."""
    import kopf

    raw: dict[str, Any] = {
        "apiVersion": "connectops.io/v1alpha1",
        "kind": "Connector",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "u",
            "annotations": {"a": "b"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"class": "X"},
    }
    body = kopf.Body(raw)
    kopf_fixes.forget_managed_fields(body)
    assert "managedFields" not in raw["metadata"]
    assert raw["metadata"] == {"name": "c", "namespace": "ns", "uid": "u", "annotations": {"a": "b"}}
    assert body["spec"] == {"class": "X"}
    kopf_fixes.forget_managed_fields({"metadata": "not a dict"})  # anything else: left alone


async def test_kopf_api_requests_wait_for_a_slot_and_a_stream_holds_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's get/patch/post/stream all send through ``api.request``; bounded, at most ``limit``
    wait for an answer at once, every one is answered, and a watch whose headers have come holds
    no slot while its stream is read."""
    from kopf._cogs.clients import api

    in_flight, most, answered = 0, 0, 0
    # the module attribute is process-wide: an e2e operator this xdist worker started earlier in
    # the session runs on in its own thread and event loop, and its requests must still reach
    # the API server rather than be counted here (CI52 counted them)
    previous, here = api.request, asyncio.get_running_loop()

    async def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if asyncio.get_running_loop() is not here:
            return await previous(method, url, *args, **kwargs)
        nonlocal in_flight, most, answered
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        answered += 1
        return f"{method} {url}"

    monkeypatch.setattr(api, "request", request)  # kopf's own, put back after the test
    assert kopf_fixes.bound_requests(4) is True
    assert api.request is not request
    assert kopf_fixes.bound_requests(4) is True  # once only: not wrapped twice

    # watches that have their headers and read their streams for as long as the test runs
    streams = [await api.request("get", f"/watch/{i}") for i in range(8)]
    assert streams[0] == "get /watch/0"
    answers = await asyncio.gather(*(api.request("patch", f"/o/{i}") for i in range(50)))
    assert answers == [f"patch /o/{i}" for i in range(50)]
    assert (most, answered) == (4, 58)


async def test_objects_lose_managed_fields_as_the_watch_stream_yields_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf queues each listed object with its body before any worker (or handler) sees it, so
    the trim is made where kopf's watch-stream yields: every object yielded has no managedFields
    and is otherwise whole, other items (kopf's bookmarks) pass as they are, and closing the
    stream closes kopf's own (its watch request's connection goes with it)."""
    from kopf._cogs.clients import watching

    closed: list[bool] = []

    def listed(i: int) -> dict[str, Any]:
        return {
            "metadata": {"name": f"c{i}", "uid": str(i), "managedFields": [{"manager": "kubectl", "fieldsV1": {}}]},
            "spec": {"class": "X", "managedFields": "a spec key of that name is the user's"},
        }

    async def kopf_stream(**_: Any) -> Any:
        try:
            yield {"type": None, "object": listed(0)}
            yield "LISTED"  # a bookmark: not an event
            yield {"type": "MODIFIED", "object": listed(1)}
            yield {"type": "ADDED", "object": {"metadata": "not a dict"}}
            await asyncio.sleep(3600)
        finally:
            closed.append(True)

    monkeypatch.setattr(watching, "infinite_watch", kopf_stream)
    monkeypatch.setitem(kopf_fixes._ORIGINALS, "infinite_watch", None)
    assert kopf_fixes.strip_managed_fields()
    assert kopf_fixes.strip_managed_fields()  # installed once
    stream = watching.infinite_watch(settings=None, resource=None, namespace=None)
    seen = [await anext(stream) for _ in range(4)]
    assert seen[0] == {"type": None, "object": {**listed(0), "metadata": {"name": "c0", "uid": "0"}}}
    assert seen[1] == "LISTED"
    assert seen[2]["object"]["metadata"] == {"name": "c1", "uid": "1"}
    assert seen[2]["object"]["spec"]["managedFields"] == "a spec key of that name is the user's"
    assert seen[3] == {"type": "ADDED", "object": {"metadata": "not a dict"}}
    await stream.aclose()
    assert closed == [True]
