"""A reset's ``resume`` policy held on its Connector object (planning.resume_hold), through the
executor against FakeConnect and FakeKube: what the worker holds, the mark on the Connector, and
what the reset reports. The Connector pass that honours the mark is tested end to end in
tests/e2e/test_reset_resume_held.py."""

from __future__ import annotations

import json

import pytest

from connectops.planning.resume_hold import HOLD_ANNOTATION
from tests.doubles.connect import FILE_SOURCE
from tests.reconcilers.reset_world import CLUSTER, NAMESPACE, RESET, Crash, ResetWorld, make_reset_world

pytestmark = pytest.mark.timeout(30)

NAME = "orders"
CONFIG = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": "/data/in.txt", "topic": "orders"}
OFFSETS = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 42}}]


def connector_spec(state: str) -> dict[str, object]:
    return {
        "clusterRef": {"name": CLUSTER},
        "connectorName": NAME,
        "class": FILE_SOURCE,
        "config": {"file": "/data/in.txt", "topic": "orders"},
        "state": state,
    }


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> ResetWorld:
    w = make_reset_world(monkeypatch)
    w.seed(NAME, CONFIG, OFFSETS)
    w.add_connector_object("orders-obj", connector_spec("running"))
    w.connect.calls.clear()
    return w


def annotations_of(world: ResetWorld) -> dict[str, str]:
    meta = world.kube.objects[(NAMESPACE, "connectors", "orders-obj")]["metadata"]
    return dict(meta.get("annotations") or {})


async def test_resume_stopped_on_a_running_connector_is_held_and_reported(world: ResetWorld) -> None:
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset", "resume": "stopped"})
    assert await world.run() is True

    assert world.state(NAME) == ("STOPPED", 0)
    assert world.writes() == ["stop", "delete_offsets"]
    hold = json.loads(annotations_of(world)[HOLD_ANNOTATION])
    assert hold == {"reset": RESET, "generation": 1, "state": "stopped"}
    status = world.status()
    assert status["plan"]["connectors"][0]["managedBy"] == "orders-obj"
    assert status["plan"]["connectors"][0]["managedGeneration"] == 1
    said = world.step("resume")["message"]
    assert "held: Connector orders-obj keeps it stopped until its spec changes" in said
    assert said in world.condition("Succeeded")["message"]


async def test_resume_as_the_spec_says_leaves_no_mark(world: ResetWorld) -> None:
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset", "resume": "running"})
    assert await world.run() is True
    assert world.state(NAME) == ("STARTED", 1)
    assert HOLD_ANNOTATION not in annotations_of(world)
    assert world.condition("Succeeded")["message"] == "offset reset completed"


async def test_a_connector_spec_changed_during_the_reset_wins(world: ResetWorld) -> None:
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset", "resume": "stopped"})
    world.crash_on_event("StepReset")  # offsets changed; the operator dies before the resume
    with pytest.raises(Crash):
        await world.run()
    # meanwhile the user edits the Connector (a new generation): a later decision than the reset's
    world.kube.replace_spec(NAMESPACE, "connectors", "orders-obj", connector_spec("paused"))
    assert await world.run() is True

    assert world.state(NAME)[0] == "PAUSED"
    assert HOLD_ANNOTATION not in annotations_of(world)
    status = world.status()
    assert status["plan"]["connectors"][0]["resumeTo"] == "paused"
    said = world.step("resume")["message"]
    assert "spec changed during the reset, generation 1 -> 2: its spec.state paused wins over resume: stopped" in said
    assert said in world.condition("Succeeded")["message"]
    assert status["phase"] == "Succeeded"


async def test_a_failed_reset_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_reset_world(monkeypatch)
    world.seed(NAME, CONFIG, OFFSETS)
    world.add_connector_object("orders-obj", connector_spec("running"))
    world.connect.lag_stop(NAME, reads=10**9)  # never shows STOPPED: the stop fails
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset", "resume": "stopped"})
    assert await world.drive() is True

    assert world.condition("Succeeded")["reason"] == "StopFailed"
    assert world.offsets(NAME) == OFFSETS
    # nothing was done as asked: the Connector's spec applies again, not the reset's resume policy
    assert HOLD_ANNOTATION not in annotations_of(world)
