"""Each OffsetReset step's deadline (planning.reset_deadlines), through the executor against
FakeConnect and FakeKube: a status read that never finishes (a worker trickling its answer)
cut at the stop step's deadline, a step retried past its deadline, and what the connector and
its offsets are left as. The slow-loris worker itself: tests/e2e/test_reset_production.py."""

from __future__ import annotations

import asyncio

import pytest

from connectops.adapters.connect_rest import ConnectorState, ConnectUnavailable
from connectops.errors import NotReadyYet
from connectops.planning.offset_reset import Step
from connectops.planning.reset_deadlines import STEP_DEADLINE_SECONDS, deadline_message, seconds_left
from tests.doubles.connect import FILE_SOURCE
from tests.reconcilers.reset_world import CLUSTER, Crash, ResetWorld, make_reset_world

pytestmark = pytest.mark.timeout(30)

NAME = "orders"
CONFIG = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": "/data/in.txt", "topic": "orders"}
OFFSETS = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 42}}]
SPEC = {"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "reset"}


def test_a_deadline_counts_from_the_first_attempt() -> None:
    assert seconds_left(Step.STOP, 100.0, 150.0, STEP_DEADLINE_SECONDS) == 40.0
    assert seconds_left(Step.STOP, None, 150.0, STEP_DEADLINE_SECONDS) == 90.0
    assert seconds_left(Step.STOP, 100.0, 150.0, {Step.STOP: 10.0}) == -40.0
    assert deadline_message(Step.STOP, 90, 3, "GET status: no answer") == (
        "the stop could not be confirmed within the step's deadline of 90 s (3 attempt(s); last: GET status: no answer)"
    )
    assert deadline_message(Step.INSPECT, 120, 1, None) == (
        "the inspect step did not finish within the step's deadline of 120 s (1 attempt(s))"
    )


def world_with(monkeypatch: pytest.MonkeyPatch, **deadlines: float) -> ResetWorld:
    world = make_reset_world(
        monkeypatch, step_deadlines={**STEP_DEADLINE_SECONDS, **{Step(k): v for k, v in deadlines.items()}}
    )
    world.seed(NAME, CONFIG, OFFSETS)
    world.connect.calls.clear()
    return world


async def test_a_status_read_that_never_ends_is_cut_at_the_stop_deadline_and_the_connector_resumed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = world_with(monkeypatch, stop=0.3)
    real = world.connect.get_status

    async def trickled(name: str) -> ConnectorState | None:
        if world.connect.connectors[name].target == "STOPPED":
            await asyncio.sleep(3600)  # the answer never ends
        return await real(name)

    monkeypatch.setattr(world.connect, "get_status", trickled)
    world.create(SPEC)
    assert await world.run() is True

    # stopped, never confirmed, resumed: the offsets are as they were, the lock released
    assert world.writes() == ["stop", "resume"]
    assert world.state(NAME) == ("STARTED", 1)
    assert world.offsets(NAME) == OFFSETS
    assert world.kube.leases == {}
    assert world.step("stop")["state"] == "Failed"
    assert world.steps()["reset"] == "Pending"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "StopFailed"
    assert "the stop could not be confirmed within the step's deadline of 0.3 s" in cond["message"]
    assert "Offsets were not changed" in cond["message"]
    assert "the connector(s) were resumed" in cond["message"]
    assert world.status()["phase"] == "Failed"
    assert "restoreManifest" not in world.status()


async def test_a_step_retried_past_its_deadline_fails_at_its_next_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    world = world_with(monkeypatch, stop=0.5)
    world.connect.lag_stop(NAME, reads=10**9)  # never shows STOPPED: each attempt ends in NotReadyYet
    world.create(SPEC)
    with pytest.raises(NotReadyYet):
        await world.run()
    first = world.step("stop")
    assert first["firstStartedAt"] == first["startedAt"]
    await asyncio.sleep(0.6)
    assert await world.run() is True  # kopf's retry, after the deadline

    assert world.writes() == ["stop", "resume"]  # the retry did not stop it again: it failed at once
    assert world.state(NAME) == ("STARTED", 1)
    assert world.offsets(NAME) == OFFSETS
    step = world.step("stop")
    assert (step["state"], step["attempts"], step["firstStartedAt"]) == ("Failed", 2, first["firstStartedAt"])
    message = world.condition("Succeeded")["message"]
    assert "the stop could not be confirmed within the step's deadline of 0.5 s (1 attempt(s); last: " in message
    assert "did not reach STOPPED with no tasks" in message
    assert "the connector(s) were resumed" in message


async def test_an_offsets_call_retried_past_the_deadline_fails_and_the_read_back_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = world_with(monkeypatch, reset=0.3)
    world.connect.lose_answer("delete_offsets", ConnectUnavailable("DELETE offsets: no answer"))
    world.create(SPEC)
    with pytest.raises(ConnectUnavailable):
        await world.run()  # the DELETE took effect; its answer was lost
    await asyncio.sleep(0.4)
    assert await world.run() is True  # the retry finds the deadline passed

    assert world.writes() == ["stop", "delete_offsets"]  # not sent again, not resumed
    assert world.offsets(NAME) == []
    assert world.state(NAME) == ("STOPPED", 0)
    assert world.lock(NAME) is not None
    message = world.condition("Succeeded")["message"]
    assert "the reset step did not finish within the step's deadline of 0.3 s" in message
    assert "stay STOPPED and locked" in message
    assert world.backup_name() in message


async def test_an_offsets_step_interrupted_by_an_outage_runs_again_past_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = world_with(monkeypatch, reset=0.3)
    world.crash_on_event("StepReset")  # the operator dies after the DELETE, before recording it
    world.create(SPEC)
    with pytest.raises(Crash):
        await world.run()
    await asyncio.sleep(0.4)  # down for longer than the step's deadline
    assert await world.run() is True

    assert world.status()["phase"] == "Succeeded"
    assert world.offsets(NAME) == []
    assert world.state(NAME) == ("STARTED", 1)
