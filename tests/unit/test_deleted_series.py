"""A deleted object's per-object series go with it, whatever held the object when it was deleted.

CI49 left a deleted Connector's series behind: its delete handler forgot the series before it
took the object's lock, and the periodic resync holding the lock then observed the object as it
let go. The handlers run here against a stand-in runtime (its Connect and Kubernetes calls are
not what is under test); the lock and the collector are the operator's own.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock

import kopf
import pytest

from connectops import handlers
from connectops.object_metrics import OBJECTS

NS, NAME, UID = "team-a", "orders", "uid-orders"


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    stand_in = SimpleNamespace(
        locks=defaultdict(asyncio.Lock),
        connectors=SimpleNamespace(delete=AsyncMock()),
        resets=SimpleNamespace(release=AsyncMock(), follow_check=AsyncMock()),
    )
    monkeypatch.setattr(handlers, "_runtime", stand_in)
    monkeypatch.setattr(handlers.random, "uniform", lambda low, high: 0.0)  # the timer's jitter
    yield stand_in
    OBJECTS.forget("Connector", NS, NAME)
    OBJECTS.forget("OffsetReset", NS, NAME)


def body(**metadata: Any) -> kopf.Body:
    raw = {
        "apiVersion": "connectops.io/v1alpha1",
        "metadata": {"namespace": NS, "name": NAME, "uid": UID, **metadata},
        "spec": {"clusterRef": {"name": "main"}},
        "status": {"phase": "Succeeded"},
    }
    return kopf.Body(raw)  # type: ignore[arg-type]


async def test_a_connector_deleted_while_its_resync_held_it_leaves_no_series(rt: SimpleNamespace) -> None:
    lock = rt.locks[UID]
    await lock.acquire()  # the resync holds the object
    deleting = asyncio.create_task(handlers.connector_deleted(body=body(), retry=0, connector_claims={}))
    await asyncio.sleep(0.01)
    assert not deleting.done()  # the delete waits for the resync
    OBJECTS.observe_connector(NS, NAME, {"state": "running"}, {})  # the resync observes as it lets go
    lock.release()
    await asyncio.wait_for(deleting, 5)
    rt.connectors.delete.assert_awaited_once()
    assert (NS, NAME) not in OBJECTS.connectors
    assert UID not in rt.locks


async def test_a_reset_deleted_while_its_check_timer_held_it_leaves_no_series(rt: SimpleNamespace) -> None:
    ticking = asyncio.Event()
    release_tick = asyncio.Event()

    async def follow(*_: Any) -> None:
        ticking.set()
        await release_tick.wait()

    rt.resets.follow_check = follow
    tick = asyncio.create_task(handlers.offset_reset_check(body=body()))
    await asyncio.wait_for(ticking.wait(), 5)  # the timer observed the reset and holds it
    assert (NS, NAME) in OBJECTS.resets
    deleting = asyncio.create_task(handlers.offset_reset_deleted(body=body(deletionTimestamp="2026-11-28T10:00:00Z")))
    await asyncio.sleep(0.01)
    assert not deleting.done()
    release_tick.set()
    await asyncio.wait_for(asyncio.gather(tick, deleting), 5)
    rt.resets.release.assert_awaited_once()
    assert (NS, NAME) not in OBJECTS.resets
    # a tick that comes after the deletion began observes nothing
    await handlers.offset_reset_check(body=body(deletionTimestamp="2026-11-28T10:00:00Z"))
    assert (NS, NAME) not in OBJECTS.resets
