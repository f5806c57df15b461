"""What a change cost (issue 18, item 4): the Connector's status.lastInterruption and the
OffsetReset's status.interruptions, the histogram and the Event, through the reconcilers' public
entry points against ``FakeConnect`` with restarts that show in the status as the real worker's
do (``slow_restarts``: the restarted tasks read UNASSIGNED or RESTARTING for a few polls). The
end-to-end test (tests/e2e/test_change_cost.py) checks the figure against the broker."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from connectops.adapters.connect_rest import ConnectUnavailable
from connectops.models.base import epoch_of
from connectops.planning.verbs import RESTART, RESTART_TASKS
from tests.doubles.connect import FILE_SINK, Call
from tests.reconcilers.reset_world import CLUSTER as RESET_CLUSTER
from tests.reconcilers.reset_world import ResetWorld, make_reset_world
from tests.reconcilers.world import CLUSTER, World, make_world

pytestmark = pytest.mark.timeout(30)

NAME = "orders"


def spec(**extra: Any) -> dict[str, Any]:
    return {
        "clusterRef": {"name": CLUSTER},
        "class": FILE_SINK,
        "config": {"file": "/data/out.txt", "topics": "orders"},
        "tasksMax": 2,
        **extra,
    }


def at(text: str | None) -> float:
    moment = epoch_of(text)
    assert moment is not None
    return moment


def histogram_count(cause: str) -> float:
    return REGISTRY.get_sample_value("connectops_connector_interruption_seconds_count", {"cause": cause}) or 0.0


@pytest.fixture
async def world() -> World:
    # a settle window long enough for a few polls (the double answers at once; the waits are
    # Backoff's 50 ms doubling)
    w = make_world(settle_seconds=3.0)
    w.apply(spec())
    assert (await w.reconcile()).error is None
    w.connect.calls.clear()
    w.events.clear()
    return w


async def test_a_config_change_that_restarts_the_tasks_is_measured(world: World) -> None:
    world.connect.slow_restarts(NAME, reads=3)
    before = histogram_count("ConfigUpdated")
    world.apply(spec(config={"file": "/data/other.txt", "topics": "orders"}))
    await world.reconcile()

    cost = world.status["lastInterruption"]
    assert (cost["cause"], cost["connector"], cost["outcome"]) == ("ConfigUpdated", NAME, "Measured")
    # three polls saw the tasks UNASSIGNED (at 0, 50, 150 ms), the fourth RUNNING (350 ms)
    assert 0.3 <= cost["seconds"] < 1.5
    assert cost["allTasksSeconds"] == cost["seconds"]
    assert 0.15 <= cost["precisionSeconds"] < 0.6
    assert at(cost["firstTaskRunningAt"]) - at(cost["stoppedAt"]) == pytest.approx(cost["seconds"], abs=0.002)
    assert histogram_count("ConfigUpdated") == before + 1
    assert ("Normal", "Interrupted") in world.event_reasons()
    assert world.condition("Ready")["status"] == "True"


async def test_a_restart_nobody_saw_is_said_so_without_an_event(world: World) -> None:
    before = histogram_count("ConfigUpdated")
    world.apply(spec(config={"file": "/data/other.txt", "topics": "orders"}))
    await world.reconcile()
    cost = world.status["lastInterruption"]
    assert (cost["outcome"], cost.get("seconds")) == ("NoStopSeen", None)
    assert histogram_count("ConfigUpdated") == before
    assert [r for _, r in world.event_reasons()] == ["ConfigUpdated"]


async def test_drift_corrected_by_the_resync_is_its_own_cause(world: World) -> None:
    world.connect.slow_restarts(NAME, reads=2)
    world.connect.connectors[NAME].config["topics"] = "elsewhere"
    await world.reconcile(periodic=True)
    assert world.status["lastInterruption"]["cause"] == "DriftCorrected"
    assert world.status["lastInterruption"]["outcome"] == "Measured"


async def test_a_spec_change_a_resync_applies_first_costs_as_a_config_change(world: World) -> None:
    world.connect.slow_restarts(NAME, reads=2)
    world.apply(spec(config={"file": "/data/other.txt", "topics": "orders"}))
    await world.reconcile(periodic=True)
    assert world.status["lastInterruption"]["cause"] == "ConfigUpdated"
    assert world.status["lastInterruption"]["outcome"] == "Measured"


async def test_a_paused_connector_loses_nothing_to_a_config_change(world: World) -> None:
    world.apply(spec(state="paused"))
    await world.reconcile()
    world.connect.slow_restarts(NAME, reads=3)
    world.apply(spec(state="paused", config={"file": "/data/other.txt", "topics": "orders"}))
    await world.reconcile()
    assert "lastInterruption" not in world.status


async def test_restart_verbs_are_measured_and_only_failed_restarts_are_not(world: World) -> None:
    world.connect.slow_restarts(NAME, reads=2)
    world.annotate({RESTART_TASKS: "1:t1"})
    await world.reconcile()
    assert world.connect.writes() == [Call("restart_task", (NAME, 1))]
    cost = world.status["lastInterruption"]
    assert (cost["cause"], cost["outcome"]) == ("Restarted", "Measured")
    assert cost["seconds"] > 0

    world.connect.fail_task(NAME, 0)
    world.annotate({RESTART_TASKS: "1:t1", RESTART: "t2"})
    world.status.pop("lastInterruption")
    await world.reconcile()
    # task 0 is FAILED, task 1 RUNNING: restarting everything stops task 1
    assert world.connect.writes()[-1] == Call("restart", (NAME, True, False))
    assert world.status["lastInterruption"]["outcome"] == "Measured"

    world.connect.fail_task(NAME, 0)
    world.annotate({RESTART_TASKS: "failed:t3", RESTART: "t2"})
    world.status.pop("lastInterruption")
    await world.reconcile()
    assert world.connect.writes()[-1] == Call("restart", (NAME, True, True))
    assert "lastInterruption" not in world.status


# -- OffsetReset: stop -> resume ------------------------------------------------------------------

SOURCE = {"connector.class": "FileStreamSource", "tasks.max": "1", "file": "/data/in.txt", "topic": "orders"}


def reset_world(monkeypatch: pytest.MonkeyPatch, target: str = "STARTED") -> ResetWorld:
    world = make_reset_world(monkeypatch)
    world.seed(NAME, SOURCE, [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 42}}], target=target)
    return world


async def test_a_reset_costs_from_its_first_stop_call_to_the_first_task_back(monkeypatch: pytest.MonkeyPatch) -> None:
    world = reset_world(monkeypatch)
    # the first stop is lost on the way back: the step runs again, the start stays the first call
    world.connect.lose_answer("stop", ConnectUnavailable("stop: cannot reach Connect"))
    before = histogram_count("OffsetReset")
    world.create({"connectorName": NAME, "clusterRef": {"name": RESET_CLUSTER}, "action": "reset"})
    assert await world.drive() is True

    status = world.status()
    assert [c.method for c in world.connect.calls].count("stop") == 2
    [cost] = status["interruptions"]
    assert (cost["cause"], cost["connector"], cost["outcome"]) == ("OffsetReset", NAME, "Measured")
    assert cost["stoppedAt"] == status["stoppedAt"]
    stop_started = at(world.step("stop")["startedAt"])
    # the stop step's last attempt started after the first call, which is where the cost starts
    assert at(cost["stoppedAt"]) <= stop_started + 1  # startedAt is cut to the second
    assert at(cost["firstTaskRunningAt"]) - at(cost["stoppedAt"]) == pytest.approx(cost["seconds"], abs=0.002)
    assert cost["seconds"] >= cost["precisionSeconds"] >= 0
    assert histogram_count("OffsetReset") == before + 1
    assert NAME in world.step("verify")["message"]


async def test_a_reset_that_leaves_the_connector_paused_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    world = reset_world(monkeypatch)
    world.create({"connectorName": NAME, "clusterRef": {"name": RESET_CLUSTER}, "action": "reset", "resume": "paused"})
    assert await world.run() is True
    [cost] = world.status()["interruptions"]
    assert (cost["outcome"], cost.get("seconds")) == ("NotResumed", None)
    assert "PAUSED" in cost["message"]
