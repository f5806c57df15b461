"""A deleted object's per-object series go with it, whatever was still at work on it.

CI49 left a deleted Connector's series behind: its delete handler forgot the series, and the
periodic resync that held the object meanwhile observed it once more as it let go. The handlers
run here against a stand-in runtime (their Connect and Kubernetes calls are not what is under
test); the lock and the collector are the operator's own.
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
from connectops.object_metrics import GONE_REMEMBERED, OBJECTS, ObjectMetrics

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


def body(uid: str = UID, **metadata: Any) -> kopf.Body:
    raw = {
        "apiVersion": "connectops.io/v1alpha1",
        "metadata": {"namespace": NS, "name": NAME, "uid": uid, **metadata},
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
    OBJECTS.observe_connector(NS, NAME, {"state": "running"}, {}, uid=UID)  # the resync, as it lets go
    lock.release()
    await asyncio.wait_for(deleting, 5)
    rt.connectors.delete.assert_awaited_once()
    assert (NS, NAME) not in OBJECTS.connectors
    # a Connector made again under the same name is a new object: observed
    OBJECTS.observe_connector(NS, NAME, {"state": "running"}, {}, uid="uid-orders-again")
    assert (NS, NAME) in OBJECTS.connectors


async def test_a_check_timer_tick_after_a_reset_is_deleted_leaves_no_series(rt: SimpleNamespace) -> None:
    uid = "uid-reset"  # the collector is the process's own: a uid of its own, not the Connector's
    await handlers.offset_reset_check(body=body(uid))
    assert OBJECTS.resets[(NS, NAME)].phase == "Succeeded"
    await handlers.offset_reset_deleted(body=body(uid, deletionTimestamp="2026-11-28T10:00:00Z"))
    rt.resets.release.assert_awaited_once()
    assert (NS, NAME) not in OBJECTS.resets
    # the timer's next tick, with the body it was handed before the deletion
    await handlers.offset_reset_check(body=body(uid))
    assert (NS, NAME) not in OBJECTS.resets


def test_the_deleted_uids_remembered_are_bounded() -> None:
    metrics = ObjectMetrics()
    for i in range(GONE_REMEMBERED + 1):
        metrics.forget("OffsetReset", NS, f"r{i}", uid=f"u{i}")
    metrics.observe_reset(NS, "r0", {"phase": "Running"}, uid="u0")  # the oldest, no longer remembered
    metrics.observe_reset(NS, "r1", {"phase": "Running"}, uid="u1")
    assert set(metrics.resets) == {(NS, "r0")}
