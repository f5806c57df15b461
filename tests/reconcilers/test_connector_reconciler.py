"""Every decision of the Connector reconciler, through its public entry points (``reconcile`` as
kopf's change handler and resync timer call it, ``delete`` as the deletion handler does), against
``FakeConnect`` and ``FakeKube``. Each test asserts what the worker ended up holding and which
writes reached it, and what the reconciler published (status, conditions, Events, the error kopf
retries on). They add to the end-to-end suite (tests/e2e) and never replace it.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from pathlib import Path
from typing import Any, cast

import pytest

from connectops.adapters.connect_rest import (
    ConnectApi,
    ConnectConflict,
    ConnectRebalancing,
    ConnectUnavailable,
)
from connectops.errors import NotReadyYet, WorkerStarting
from connectops.planning.ownership import Claim
from connectops.planning.verbs import RECONCILE, RESTART, RESTART_TASKS
from connectops.reconcilers.connector import ConnectorObject, _config_and_status
from tests.doubles.connect import FILE_SINK, FILE_SOURCE, VERSIONED_PLUGINS, VERSIONED_SOURCE, Call, FakeConnect
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, World, make_world

pytestmark = pytest.mark.timeout(30)

NAME = "orders"
HOLDER = f"connectops.io/offsetreset/{NAMESPACE}/rewind/uid-r"


def spec(**extra: Any) -> dict[str, Any]:
    return {
        "clusterRef": {"name": CLUSTER},
        "class": FILE_SOURCE,
        "config": {"file": "/data/in.txt", "topic": "orders"},
        **extra,
    }


def desired(**extra: str) -> dict[str, str]:
    return {
        "file": "/data/in.txt",
        "topic": "orders",
        "connector.class": FILE_SOURCE,
        "tasks.max": "1",
        "name": NAME,
        **extra,
    }


def writes(world: World) -> list[Call]:
    return world.connect.writes()


async def created(world: World, **extra: Any) -> World:
    """The object applied and reconciled once (the connector exists, Ready); calls forgotten."""
    world.apply(spec(**extra))
    outcome = await world.reconcile()
    assert outcome.error is None
    world.connect.calls.clear()
    world.events.clear()
    return world


@pytest.fixture
def world() -> World:
    return make_world()


# -- create -------------------------------------------------------------------------------------


async def test_create_validates_then_creates_running(world: World) -> None:
    world.apply(spec())
    outcome = await world.reconcile()

    assert outcome.error is None
    assert world.connect.connectors[NAME].config == desired()
    assert [c.method for c in world.connect.calls if c.method in {"validate", "create"}] == ["validate", "create"]
    assert writes(world) == [Call("create", (NAME, desired(), "RUNNING"))]
    assert world.reasons() == {
        "Valid": ("True", "Validated"),
        "Synced": ("True", "Synced"),
        "Ready": ("True", "Running"),
    }
    assert world.status["connectorState"] == "RUNNING"
    assert world.status["tasksRunning"] == "1/1"
    assert world.status["connectorName"] == NAME
    assert world.status["observedGeneration"] == 1
    assert ("Normal", "Created") in world.event_reasons()


async def test_create_paused_uses_initial_state(world: World) -> None:
    world.apply(spec(state="paused"))
    await world.reconcile()
    assert writes(world) == [Call("create", (NAME, desired(), "PAUSED"))]
    assert world.status["connectorState"] == "PAUSED"
    # KIP-980: never ran, so no tasks; Ready does not wait for tasks of a paused connector
    assert world.status["tasks"] == []
    assert world.condition("Ready")["reason"] == "Paused"


async def test_create_on_a_worker_before_3_7_then_pauses() -> None:
    world = make_world((URL, FakeConnect(version="3.6.1")))
    world.apply(spec(state="paused"))
    await world.reconcile()
    assert [c.method for c in writes(world)] == ["create", "pause"]
    assert writes(world)[0] == Call("create", (NAME, desired(), None))
    assert world.status["connectorState"] == "PAUSED"
    assert world.condition("Ready")["status"] == "True"


async def test_a_first_commit_racing_the_create_is_not_an_earlier_connectors_offsets(world: World) -> None:
    """The new connector's first task commits while the pass is still busy (a fast flush on a
    loaded worker): the offsets the pass reports as found were read the moment Connect created
    it, so that commit is not taken for offsets an earlier connector of the name left."""
    world.apply(spec())
    announce = world.emit

    def task_commits_then_announce(type_: str, reason: str, message: str) -> None:
        if reason == "Created":
            committed = {"partition": {"filename": "/data/in.txt"}, "offset": {"position": 66}}
            world.connect._commit(world.connect.connectors[NAME], [committed])
        announce(type_, reason, message)

    world.emit = task_commits_then_announce  # type: ignore[method-assign]
    outcome = await world.reconcile()

    assert outcome.error is None
    # the commit did happen: Connect holds it now
    assert [e["offset"] for e in await world.connect.get_offsets(NAME)] == [{"position": 66}]
    assert world.status["offsetsOnCreate"]["foundPartitions"] == 0
    assert "no offsets under this name" in world.status["offsetsOnCreate"]["message"]
    assert ("Warning", "ExistingOffsets") not in world.event_reasons()
    methods = [c.method for c in world.connect.calls]
    assert methods.index("get_offsets") == methods.index("create") + 1


async def test_stopped_is_refused_on_a_worker_before_3_5() -> None:
    world = make_world((URL, FakeConnect(version="3.4.1")))
    world.apply(spec(state="stopped"))
    outcome = await world.reconcile()
    assert outcome.error is None
    assert writes(world) == []
    assert world.connect.connectors == {}
    assert world.condition("Valid")["reason"] == "Unsupported"
    assert world.condition("Ready")["reason"] == "Unsupported"


async def test_created_concurrently_falls_back_to_put(world: World) -> None:
    world.apply(spec())
    world.connect.fail_next("create", ConnectConflict("create connector: HTTP 409: Connector orders already exists"))
    outcome = await world.reconcile()
    assert outcome.error is None
    assert [c.method for c in writes(world)] == ["create", "put_config"]
    assert world.connect.connectors[NAME].config == desired()
    assert world.condition("Ready")["status"] == "True"


async def test_connector_name_from_spec(world: World) -> None:
    world.apply({**spec(), "connectorName": "orders source v2"})
    await world.reconcile()
    assert list(world.connect.connectors) == ["orders source v2"]
    assert world.status["connectorName"] == "orders source v2"


# -- config: only real drift is written ----------------------------------------------------------


async def test_equal_config_writes_nothing(world: World) -> None:
    await created(world)
    await world.reconcile(periodic=True)
    await world.reconcile()
    assert writes(world) == []
    assert "validate" not in {c.method for c in world.connect.calls}
    # and the status is not written either: the patches are empty
    assert world.patches[-2:] == [{}, {}]
    assert world.events == []


async def test_spec_change_puts_the_new_config(world: World) -> None:
    await created(world)
    world.apply(spec(tasksMax=3, producerOverrides={"lingerMs": 50}))
    await world.reconcile()
    new = desired(**{"tasks.max": "3", "producer.override.linger.ms": "50"})
    assert writes(world) == [Call("put_config", (NAME, new))]
    assert world.connect.connectors[NAME].config == new
    assert world.event_reasons() == [("Normal", "ConfigUpdated")]
    assert "producer.override.linger.ms, tasks.max" in world.events[0].message
    assert world.status["observedGeneration"] == 2
    assert world.condition("Synced")["status"] == "True"


async def test_drift_corrected_by_the_resync(world: World) -> None:
    await created(world)
    # someone edits the connector behind the operator's back
    world.connect.connectors[NAME].config = {**desired(), "topic": "elsewhere", "extra": "1"}
    await world.reconcile(periodic=True)
    assert writes(world) == [Call("put_config", (NAME, desired()))]
    assert world.connect.connectors[NAME].config == desired()
    assert world.event_reasons() == [("Warning", "DriftCorrected")]
    assert world.events[0].message == "config keys changed: extra, topic"


async def test_a_spec_change_the_resync_reaches_first_is_no_drift(world: World) -> None:
    """The resync reads the newest body; the change's own handler may still be queued (CI47)."""
    await created(world)
    world.apply(spec(tasksMax=3))
    await world.reconcile(periodic=True)
    new = desired(**{"tasks.max": "3"})
    assert writes(world) == [Call("put_config", (NAME, new))]
    assert world.event_reasons() == [("Normal", "ConfigUpdated")]
    assert world.status["observedGeneration"] == 2
    # the change's handler, run after it, finds nothing left to do
    await world.reconcile()
    assert writes(world) == [Call("put_config", (NAME, new))]
    assert world.event_reasons() == [("Normal", "ConfigUpdated")]


async def test_drift_after_a_change_is_drift_while_the_body_predates_its_status(world: World) -> None:
    """kopf patches a handler's status after the handler lets the object go: a resync right
    behind it can read the body without that patch (CI47: a manual pause called StateChanged)."""
    await created(world)
    world.apply(spec(tasksMax=3))
    await world.reconcile()
    world.status["observedGeneration"] = 1  # the body as the resync reads it: the patch not in yet
    world.events.clear()
    world.connect.connectors[NAME].config = {**world.connect.connectors[NAME].config, "extra": "1"}
    await world.reconcile(periodic=True)
    assert world.event_reasons() == [("Warning", "DriftCorrected")]


async def test_config_from_secret(world: World) -> None:
    world.kube.add_secret(NAMESPACE, "db", {"password": "hunter2"})
    world.apply(spec(configFrom={"db.password": {"secretKeyRef": {"name": "db", "key": "password"}}}))
    await world.reconcile()
    assert world.connect.connectors[NAME].config == desired(**{"db.password": "hunter2"})
    assert "hunter2" not in str(world.status)
    assert all("hunter2" not in e.message for e in world.events)


@pytest.mark.parametrize("secret", [None, {"user": "x"}], ids=["secret-missing", "key-missing"])
async def test_missing_secret_is_reported_and_nothing_written(world: World, secret: dict[str, str] | None) -> None:
    if secret is not None:
        world.kube.add_secret(NAMESPACE, "db", secret)
    world.apply(spec(configFrom={"db.password": {"secretKeyRef": {"name": "db", "key": "password"}}}))
    outcome = await world.reconcile()
    assert outcome.error is not None
    assert world.connect.calls == []
    ready = world.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ReferenceNotFound")
    assert ("Warning", "ReferenceNotFound") in world.event_reasons()


# -- validation gate ------------------------------------------------------------------------------


async def test_invalid_config_is_reported_and_not_applied(world: World) -> None:
    world.apply({"clusterRef": {"name": CLUSTER}, "class": FILE_SOURCE, "config": {"file": "/data/in.txt"}})
    outcome = await world.reconcile()
    assert outcome.error is None
    assert writes(world) == []
    assert world.reasons()["Valid"] == ("False", "ConfigInvalid")
    assert world.reasons()["Synced"] == ("False", "ConfigInvalid")
    assert world.reasons()["Ready"] == ("False", "ConfigInvalid")
    assert "topic: Missing required configuration" in world.condition("Valid")["message"]
    assert world.event_reasons() == [("Warning", "ConfigInvalid")]


async def test_invalid_change_leaves_the_live_config(world: World) -> None:
    await created(world)
    world.apply({**spec(), "config": {"file": "/data/in.txt"}})
    await world.reconcile()
    assert writes(world) == []
    assert world.connect.connectors[NAME].config == desired()
    assert world.reasons()["Synced"] == ("False", "ConfigInvalid")


async def test_missing_plugin_reported_once_and_nothing_written(world: World) -> None:
    world.apply({**spec(), "class": "FileStreamSorce"})
    await world.reconcile()
    await world.reconcile(periodic=True)
    assert writes(world) == []
    assert "validate" not in {c.method for c in world.connect.calls}
    valid = world.condition("Valid")
    assert valid["reason"] == "PluginNotFound"
    # closest installed class first
    assert "installed, closest first: org.apache.kafka.connect.file.FileStreamSourceConnector" in valid["message"]
    assert world.reasons()["Ready"] == ("False", "PluginNotFound")
    assert world.event_reasons() == [("Warning", "PluginNotFound")]
    # fixed spec: applied
    world.apply(spec())
    await world.reconcile()
    assert [c.method for c in writes(world)] == ["create"]


# -- plugin versions (KIP-891) ------------------------------------------------------------------


def versioned(**extra: Any) -> dict[str, Any]:
    return {"clusterRef": {"name": CLUSTER}, "class": VERSIONED_SOURCE, "config": {"topic": "orders"}, **extra}


def versioned_config(**extra: str) -> dict[str, str]:
    return {"topic": "orders", "connector.class": VERSIONED_SOURCE, "tasks.max": "1", "name": NAME, **extra}


async def test_the_pinned_version_runs_and_status_shows_it(world: World) -> None:
    world.apply(versioned(pluginVersion="1.0.0"))
    await world.reconcile()
    assert writes(world) == [
        Call("create", (NAME, versioned_config(**{"connector.plugin.version": "1.0.0"}), "RUNNING"))
    ]
    assert world.connect.connectors[NAME].plugin.version == "1.0.0"
    assert world.status["connectorVersion"] == "1.0.0"
    assert [t["version"] for t in world.status["tasks"]] == ["1.0.0"]
    assert world.condition("Ready")["status"] == "True"

    # a range: Connect runs the newest version inside it
    world.connect.calls.clear()
    world.apply(versioned(pluginVersion="[1.0,)"))
    await world.reconcile()
    assert [c.method for c in writes(world)] == ["put_config"]
    assert world.status["connectorVersion"] == "2.0.0"

    # unpinned again: the key goes, the newest version runs
    world.apply(versioned())
    await world.reconcile()
    assert "connector.plugin.version" not in world.connect.connectors[NAME].config
    assert world.status["connectorVersion"] == "2.0.0"


async def test_a_version_nothing_matches_is_a_condition_not_a_retry(world: World) -> None:
    world.apply(versioned(pluginVersion="[3.0,)"))
    first = await world.reconcile()
    second = await world.reconcile(periodic=True)
    assert (first.error, second.error) == (None, None)  # nothing for kopf to retry
    assert writes(world) == []
    assert "validate" not in {c.method for c in world.connect.calls}
    valid = world.condition("Valid")
    assert valid["reason"] == "PluginVersionNotFound"
    assert f"connector.plugin.version=[3.0,): no installed version of {VERSIONED_SOURCE} matches" in valid["message"]
    assert "(installed: 2.0.0, 1.0.0)" in valid["message"]
    assert world.reasons()["Synced"] == ("False", "PluginVersionNotFound")
    assert world.reasons()["Ready"] == ("False", "PluginVersionNotFound")
    assert world.event_reasons() == [("Warning", "PluginVersionNotFound")]
    # the plugin list is read once per TTL, not on every resync
    assert [c.method for c in world.connect.calls].count("list_plugins") == 1

    world.apply(versioned(pluginVersion="2.0.0"))
    await world.reconcile()
    assert [c.method for c in writes(world)] == ["create"]
    assert world.status["connectorVersion"] == "2.0.0"
    assert world.reasons()["Valid"] == ("True", "Validated")


async def test_a_pin_on_an_existing_connector_leaves_it_running_as_it_was(world: World) -> None:
    world.apply(versioned(pluginVersion="1.0.0"))
    await world.reconcile()
    world.connect.calls.clear()
    world.apply(versioned(pluginVersion="9.9"))
    await world.reconcile()
    assert writes(world) == []
    assert world.connect.connectors[NAME].config["connector.plugin.version"] == "1.0.0"
    assert world.status["connectorVersion"] == "1.0.0"  # what still runs, from the worker
    assert world.reasons()["Synced"] == ("False", "PluginVersionNotFound")


async def test_connect_has_the_last_word_on_a_version(world: World) -> None:
    # the plugin list read before 2.0.0 was uninstalled still shows it; Connect's validation does not
    world.apply(versioned(pluginVersion="1.0.0"))
    await world.reconcile()
    world.connect.plugins.remove(VERSIONED_PLUGINS[1])
    world.connect.calls.clear()
    world.apply(versioned(pluginVersion="2.0.0"))
    await world.reconcile()
    assert writes(world) == []
    valid = world.condition("Valid")
    assert valid["reason"] == "PluginVersionNotFound"
    assert "not found that matches the version range [2.0.0,2.0.0]" in valid["message"]


async def test_plugin_versions_are_refused_on_a_worker_before_4_1() -> None:
    world = make_world((URL, FakeConnect(version="4.0.0")))
    world.apply(versioned(pluginVersion="1.0.0"))
    outcome = await world.reconcile()
    assert outcome.error is None
    assert writes(world) == []
    assert world.condition("Valid")["reason"] == "Unsupported"
    assert "4.1" in world.condition("Valid")["message"]


async def test_invalid_spec_touches_nothing(world: World) -> None:
    world.apply({"clusterRef": {"name": CLUSTER}, "class": FILE_SOURCE, "config": {"name": "x"}})
    await world.reconcile()
    assert world.connect.calls == []
    assert world.kube.calls == []
    assert world.reasons() == {"Valid": ("False", "InvalidSpec"), "Ready": ("False", "InvalidSpec")}


# -- state --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "call", "connect_state", "reason"),
    [("paused", "pause", "PAUSED", "Paused"), ("stopped", "stop", "STOPPED", "Stopped")],
)
async def test_desired_state_change(world: World, state: str, call: str, connect_state: str, reason: str) -> None:
    await created(world)
    world.apply(spec(state=state))
    await world.reconcile()
    assert writes(world) == [Call(call, (NAME,))]
    assert world.connect.connectors[NAME].state(world.connect.worker_id).state == connect_state
    assert world.event_reasons() == [("Normal", "StateChanged")]
    assert world.condition("Ready")["reason"] == reason
    world.apply(spec())
    await world.reconcile()
    assert writes(world)[-1] == Call("resume", (NAME,))
    assert world.status["connectorState"] == "RUNNING"
    assert world.status["tasksRunning"] == "1/1"


async def test_state_drift_corrected_by_the_resync(world: World) -> None:
    await created(world)
    await world.connect.pause(NAME)  # someone else
    world.connect.calls.clear()
    await world.reconcile(periodic=True)
    assert writes(world) == [Call("resume", (NAME,))]
    assert world.event_reasons() == [("Warning", "StateDriftCorrected")]
    assert world.events[0].message == "PAUSED -> RUNNING"


# -- failures: auto-restart ------------------------------------------------------------------------


async def seen_failing(world: World, monkeypatch: pytest.MonkeyPatch, initial_seconds: float) -> None:
    """The look that first sees the failure restarts nothing and asks for the look at which the
    first restart falls due, ``initial_seconds`` later; the clock is then moved there."""
    before = time.time()
    outcome = await world.reconcile(periodic=True)
    assert not [c for c in writes(world) if c.method.startswith("restart")]
    assert outcome.look_at is not None
    assert before + initial_seconds <= outcome.look_at <= time.time() + initial_seconds
    move_clock(monkeypatch, initial_seconds)


async def test_failed_task_is_restarted(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    await created(world)
    world.connect.fail_task(NAME, 0)
    await seen_failing(world, monkeypatch, 10)  # backoff.initialSeconds, 10 s by default
    outcome = await world.reconcile(periodic=True)
    assert writes(world) == [Call("restart", (NAME, True, True))]
    # the next look: when the next restart would fall due (20 s after this one), in case the
    # task fails again; the resync is soon enough only once it runs for good
    assert outcome.look_at is not None
    assert outcome.look_at == pytest.approx(time.time() + 20, abs=1)
    assert world.connect.connectors[NAME].task_restarts == {0: 1}
    assert world.status["autoRestart"]["count"] == 1
    assert world.status["autoRestart"]["lastRestartTime"]
    assert world.event_reasons() == [("Warning", "Restarted")]
    assert world.condition("Ready")["status"] == "True"
    # healthy on the next pass, but not yet for long: a task failing in start() is RUNNING for
    # a moment after each restart (CI25)
    move_clock(monkeypatch, 20)
    outcome = await world.reconcile(periodic=True)
    assert world.status["autoRestart"]["count"] == 1
    assert outcome.look_at is None  # Ready: the resync's
    # up for backoff.maxSeconds (600 s by default) since the restart: the count starts again
    move_clock(monkeypatch, 601)
    await world.reconcile(periodic=True)
    assert world.status["autoRestart"]["count"] == 0
    assert len(writes(world)) == 1


def move_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The wall clock the reconciler plans with, ``seconds`` later than it is."""
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + seconds)


async def test_restart_backs_off_then_gives_up(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    await created(world, autoRestart={"maxRestarts": 2, "backoff": {"initialSeconds": 60}})
    world.connect.fail_task(NAME, 0, "java.lang.IllegalStateException: disk full", sticky=True)
    await seen_failing(world, monkeypatch, 60)
    await world.reconcile(periodic=True)
    assert writes(world) == [Call("restart", (NAME, True, True))]
    assert world.reasons()["Ready"] == ("False", "TasksFailed")
    assert world.status["tasks"][0]["state"] == "FAILED"
    assert world.status["tasks"][0]["trace"] == "java.lang.IllegalStateException: disk full"
    assert world.status["autoRestart"]["count"] == 1
    # the next pass comes before the backoff (120 s after the first restart): no restart
    await world.reconcile(periodic=True)
    assert len(writes(world)) == 1
    # once due (the clock moved past the delay): the second restart
    move_clock(monkeypatch, 121)
    await world.reconcile(periodic=True)
    assert len(writes(world)) == 2
    assert world.status["autoRestart"]["count"] == 2
    # the limit of two restarts is reached: no more, even when due, and no look asked for
    move_clock(monkeypatch, 121 + 241)
    outcome = await world.reconcile(periodic=True)
    assert outcome.look_at is None
    assert len(writes(world)) == 2
    assert world.connect.connectors[NAME].task_restarts == {0: 2}
    ready = world.condition("Ready")
    assert ready["reason"] == "RestartLimitReached"
    assert ready["message"].startswith("gave up after 2 automatic restarts")
    assert ("Warning", "RestartLimitReached") in world.event_reasons()


async def test_a_task_shown_restarting_for_long_is_not_ready_and_never_clears_the_count(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI29-CI31: on a loaded machine the worker showed the restarted task RESTARTING for seconds
    before it FAILED again; counted as Ready, that run of looks cleared the count (maxSeconds 2)
    and the task was restarted again: 4 Restarted Events where maxRestarts said 2."""
    await created(world, autoRestart={"maxRestarts": 2, "backoff": {"initialSeconds": 1, "maxSeconds": 2}})
    fake = world.connect.connectors[NAME]
    world.connect.fail_task(NAME, 0, sticky=True)
    world.connect.slow_restarts(NAME, 10**6)  # after a restart: RESTARTING until told otherwise
    second = 0

    async def resync() -> None:  # one every 3 s
        nonlocal second
        move_clock(monkeypatch, second)
        await world.reconcile(periodic=True)
        second += 3

    for _ in range(2):
        before = fake.task_restarts.get(0, 0)
        while fake.task_restarts.get(0, 0) == before:  # until it restarts
            await resync()
        for _ in range(4):  # 12 s of looks at the task RESTARTING
            await resync()
            assert world.status["tasks"][0]["state"] == "RESTARTING"
            assert world.reasons()["Ready"] == ("False", "TasksNotRunning")
        fake.down_reads = 0  # and then it has FAILED again
    for _ in range(4):
        await resync()
    assert fake.task_restarts == {0: 2}
    assert [e.reason for e in world.events].count("Restarted") == 2
    assert world.status["autoRestart"]["count"] == 2
    assert world.reasons()["Ready"] == ("False", "RestartLimitReached")


async def test_a_resync_queued_behind_a_restart_does_not_restart_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI (stop 24): kopf patches the status after the handler returns, outside the per-object
    lock, so a resync timer that waited on the lock reconciles a body from before the restart it
    waited for. It must count from what was done, not from that body: one restart, one Event."""
    await created(world, autoRestart={"maxRestarts": 2, "backoff": {"initialSeconds": 60}})
    world.connect.fail_task(NAME, 0, sticky=True)
    await seen_failing(world, monkeypatch, 60)
    before = copy.deepcopy(world.body)
    await world.reconcile(periodic=True)
    assert world.connect.connectors[NAME].task_restarts == {0: 1}
    stale = ConnectorObject.from_body(before)
    assert stale.status.auto_restart.count == 0  # the timer's view: no restart yet
    outcome = await world.reconciler.reconcile(stale, world.emit, periodic=True)
    assert world.connect.connectors[NAME].task_restarts == {0: 1}
    assert [e.reason for e in world.events].count("Restarted") == 1
    assert outcome.status["autoRestart"]["count"] == 1
    # a new process knows only the status: the record across restarts
    fresh = make_world((URL, world.connect))
    fresh.body = world.body
    await fresh.reconcile(periodic=True)
    assert world.connect.connectors[NAME].task_restarts == {0: 1}
    assert fresh.status["autoRestart"]["count"] == 1


async def test_the_restarts_of_a_task_failing_in_start_come_at_2_4_4_and_then_the_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each reconcile says when to look next (Outcome.look_at): the change that created the
    connector stops waiting once its task has FAILED, and asks for the look initialSeconds
    later; each look restarts and asks for the next one at the doubled delay; the look after
    the last restart the limit allows says so, and asks for none. Whatever the resync period:
    only the looks asked for run here."""
    world = make_world(settle_seconds=1.0)
    offset = [0.0]
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + offset[0])
    world.apply(
        {
            "clusterRef": {"name": CLUSTER},
            "class": FILE_SINK,
            "config": {"file": str(tmp_path), "topics": "orders"},  # a directory: start() fails
            "autoRestart": {"maxRestarts": 3, "backoff": {"initialSeconds": 2, "maxSeconds": 4}},
        }
    )
    began = real()
    outcome = await world.reconcile()
    assert real() - began < 0.5  # not settle_seconds: a new connector's failure is its own
    assert world.reasons()["Ready"] == ("False", "TasksFailed")
    seen, looks = time.time(), []
    while outcome.look_at is not None:
        looks.append(outcome.look_at)
        offset[0] += outcome.look_at - time.time()  # the clock moves to the look asked for
        outcome = await world.reconcile(periodic=True)
    restarts = [c for c in writes(world) if c.method == "restart"]
    assert len(restarts) == 3
    assert [round(b - a, 1) for a, b in itertools.pairwise([seen, *looks])] == [2.0, 4.0, 4.0]
    assert world.reasons()["Ready"] == ("False", "RestartLimitReached")
    assert world.condition("Ready")["message"].startswith("gave up after 3 automatic restarts")


async def test_no_restart_when_disabled(world: World) -> None:
    await created(world, autoRestart={"enabled": False})
    world.connect.fail_task(NAME, 0)
    await world.reconcile(periodic=True)
    assert writes(world) == []
    assert world.reasons()["Ready"] == ("False", "TasksFailed")


async def test_no_restart_while_paused(world: World) -> None:
    await created(world, state="paused")
    world.connect.connectors[NAME].task_configs = 1  # it had run before it was paused
    world.connect.fail_task(NAME, 0)
    await world.reconcile(periodic=True)
    assert writes(world) == []


async def test_failed_connector_and_tasks_on_a_worker_before_3_0(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world((URL, FakeConnect(version="2.8.2")))
    await created(world, tasksMax=2)
    world.connect.connectors[NAME].plugin = world.connect.plugins[0]  # a sink: tasks.max tasks
    world.connect.connectors[NAME].task_configs = 2
    world.connect.fail_connector(NAME)
    world.connect.fail_task(NAME, 1)
    await seen_failing(world, monkeypatch, 10)
    await world.reconcile(periodic=True)
    # no onlyFailed before KIP-745: the connector, then each failed task
    assert writes(world) == [Call("restart", (NAME, False, False)), Call("restart_task", (NAME, 1))]
    assert world.connect.connectors[NAME].connector_failure is None
    assert world.condition("Ready")["status"] == "True"


# -- ownership and the reset lock ---------------------------------------------------------------


def rival(created: str, cluster: str = CLUSTER, namespace: str = NAMESPACE) -> Claim:
    return Claim(namespace, "orders-old", "uid-old", created, cluster)


async def test_an_older_claim_on_the_same_kafka_cluster_owns_it(world: World) -> None:
    outcome = None
    world.apply(spec())
    outcome = await world.reconcile(rivals=[rival("2024-01-01T00:00:00Z")])
    assert outcome.error is None
    assert writes(world) == []
    assert world.reasons() == {"Ready": ("False", "NameConflict"), "Synced": ("False", "NameConflict")}
    assert "managed by Connector orders-old (older)" in world.condition("Ready")["message"]
    # a younger claim does not
    await world.reconcile(rivals=[rival("2025-01-01T00:00:00Z")])
    assert [c.method for c in writes(world)] == ["create"]


async def test_a_claim_on_another_kafka_cluster_does_not_count() -> None:
    other_url = "http://connect.other:8083"
    world = make_world((URL, FakeConnect()), (other_url, FakeConnect(kafka_cluster_id="another-kafka")))
    world.kube.add_connect_cluster(NAMESPACE, "other", {"restUrl": other_url})
    world.apply(spec())
    await world.reconcile(rivals=[rival("2024-01-01T00:00:00Z", cluster="other")])
    assert [c.method for c in writes(world)] == ["create"]
    assert world.workers[other_url].writes() == []


@pytest.mark.parametrize("scope", ["kafka", "legacy"])
async def test_reset_lock_held_waits(world: World, scope: str) -> None:
    await created(world)
    owner = {"apiVersion": "connectops.io/v1alpha1", "kind": "OffsetReset", "name": "rewind", "uid": "uid-r"}
    # the lock is per Kafka cluster; resets from before lock scopes hold it under the cluster's name
    lock_scope = f"kafka/{world.connect.kafka_cluster_id}" if scope == "kafka" else CLUSTER
    await world.kube.acquire_lock(NAMESPACE, lock_scope, NAME, HOLDER, owner)
    world.apply(spec(state="paused", tasksMax=2))
    outcome = await world.reconcile()
    assert outcome.error is None
    assert writes(world) == []
    assert world.reasons()["Synced"] == ("False", "OffsetResetInProgress")
    assert world.reasons()["Ready"] == ("False", "OffsetResetInProgress")
    # released: the change goes through
    await world.kube.release_lock(NAMESPACE, lock_scope, NAME, HOLDER)
    await world.reconcile()
    assert [c.method for c in writes(world)] == ["put_config", "pause"]


async def test_the_reset_lock_is_read_only_when_there_is_something_to_decide(world: World) -> None:
    """A Lease GET per Connector per resync was a third of the operator's CPU at a 3,000-Connector
    restart; a lock can only hold back what would be done, so it is read when something would."""
    await created(world)
    world.kube.calls.clear()
    await world.reconcile(periodic=True)
    assert [m for m, _ in world.kube.calls if m == "lock_holder"] == []
    assert world.reasons()["Ready"] == ("True", "Running")
    # a reset took the lock and stopped the connector: now there is something to do, and the
    # lock is read before it is done
    await world.kube.acquire_lock(NAMESPACE, f"kafka/{world.connect.kafka_cluster_id}", NAME, HOLDER, None)
    await world.connect.stop(NAME)
    world.connect.calls.clear()
    await world.reconcile(periodic=True)
    assert [m for m, _ in world.kube.calls if m == "lock_holder"] == ["lock_holder"]
    assert writes(world) == []
    assert world.reasons()["Ready"] == ("False", "OffsetResetInProgress")


async def test_reset_lock_in_the_lock_namespace_waits() -> None:
    """With a lock namespace (the chart's), a reset from any namespace holds the connector there:
    a lock of the same name in this namespace is not the one that counts."""
    world = make_world(lock_namespace="connectops-system")
    await created(world)
    scope = f"kafka/{world.connect.kafka_cluster_id}"
    await world.kube.acquire_lock("connectops-system", scope, NAME, "connectops.io/offsetreset/team-b/r/u", None)
    world.apply(spec(state="paused", tasksMax=2))
    await world.reconcile()
    assert writes(world) == []
    assert world.reasons()["Synced"] == ("False", "OffsetResetInProgress")
    assert "team-b" not in str(world.status)  # another tenant's reset, not named
    assert "an OffsetReset in another namespace" in str(world.status)
    await world.kube.release_lock("connectops-system", scope, NAME, "connectops.io/offsetreset/team-b/r/u")
    await world.reconcile()
    assert [c.method for c in writes(world)] == ["put_config", "pause"]


# -- the worker ---------------------------------------------------------------------------------


async def test_worker_starting_waits_quietly(world: World) -> None:
    world.connect.mode = "starting"
    world.apply(spec())
    outcome = await world.reconcile()
    assert isinstance(outcome.error, WorkerStarting)
    assert world.connect.connectors == {}
    ready = world.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "WorkerStarting")
    assert "Worker is still starting up." in ready["message"]
    assert world.event_reasons() == [("Normal", "WorkerStarting")]
    world.connect.mode = "up"
    await world.reconcile()
    assert world.condition("Ready")["status"] == "True"


async def test_worker_unavailable_is_a_warning_and_retried(world: World) -> None:
    world.connect.mode = "down"
    world.apply(spec())
    outcome = await world.reconcile()
    assert isinstance(outcome.error, ConnectUnavailable)
    assert outcome.error.retryable
    assert world.reasons()["Ready"] == ("False", "ConnectUnavailable")
    assert world.event_reasons() == [("Warning", "ConnectUnavailable")]


async def test_rebalance_on_the_write_is_retried(world: World) -> None:
    await created(world)
    world.apply(spec(tasksMax=2))
    world.connect.fail_next("put_config", ConnectRebalancing("update config: HTTP 409: rebalance in progress"))
    outcome = await world.reconcile()
    assert isinstance(outcome.error, ConnectRebalancing)
    assert world.connect.connectors[NAME].config == desired()
    assert world.reasons()["Ready"] == ("False", "ConnectUnavailable")
    await world.reconcile()  # kopf's retry
    assert world.connect.connectors[NAME].config == desired(**{"tasks.max": "2"})
    assert world.condition("Ready")["status"] == "True"


async def test_connect_cluster_missing_or_not_allowed(world: World) -> None:
    world.apply({**spec(), "clusterRef": {"name": "nope"}})
    outcome = await world.reconcile()
    assert outcome.error is not None
    assert world.reasons()["Ready"] == ("False", "ReferenceNotFound")
    allowlisted = make_world(allowed_rest_urls=("https://connect.prod:8083",))
    allowlisted.apply(spec())
    await allowlisted.reconcile()
    assert allowlisted.connect.calls == []
    assert allowlisted.reasons()["Valid"] == ("False", "URLNotAllowed")


async def test_a_connect_cluster_url_with_credentials_is_refused_and_never_repeated() -> None:
    """A ConnectCluster stored before its CRD refused user-info (the CRD's pattern says so at
    admission): the operator refuses it too, before any call, and repeats no part of it."""
    for allowlist in ((), ("http://connect.team-a:8083",)):
        world = make_world(allowed_rest_urls=allowlist)
        world.kube.add_connect_cluster(
            NAMESPACE,
            "creds",
            {
                "restUrl": "http://ops:hunter22@connect.team-a:8083",
                "workerMetrics": {"urls": ["http://scrape:hunter23@connect-0:9404/metrics"]},
            },
        )
        world.apply({**spec(), "clusterRef": {"name": "creds"}})
        await world.reconcile()
        assert world.connect.calls == []
        assert world.reasons()["Valid"] == ("False", "InvalidSpec")
        said = str(world.status) + "".join(e.message for e in world.events)
        assert "restUrl: a URL must not hold credentials" in said
        assert "credentials" in said
        assert "hunter22" not in said
        assert "hunter23" not in said


async def test_metadata_urls_are_refused_without_an_allowlist_and_the_refusal_names_the_chart_value() -> None:
    world = make_world()
    world.kube.add_connect_cluster(NAMESPACE, "meta", {"restUrl": "http://169.254.169.254/latest"})
    world.apply({**spec(), "clusterRef": {"name": "meta"}})
    await world.reconcile()
    assert world.connect.calls == []
    assert world.reasons()["Valid"] == ("False", "URLNotAllowed")
    message = world.condition("Valid")["message"]
    assert "link-local" in message
    assert "settings.allowedRestUrls" in message
    assert "connect.allowedUrls" not in message


# -- annotations ----------------------------------------------------------------------------------


async def test_reconcile_paused_annotation(world: World) -> None:
    await created(world)
    world.connect.connectors[NAME].config = {**desired(), "topic": "elsewhere"}
    world.annotate({RECONCILE: "paused"})
    await world.reconcile(periodic=True)
    assert writes(world) == []
    assert world.reasons()["ReconcilePaused"] == ("True", "AnnotationSet")
    world.annotate({})
    await world.reconcile(periodic=True)
    assert writes(world) == [Call("put_config", (NAME, desired()))]
    assert world.reasons()["ReconcilePaused"] == ("False", "AnnotationRemoved")


async def test_restart_verbs_act_once_per_token(world: World) -> None:
    await created(world, tasksMax=3)
    world.connect.connectors[NAME].plugin = world.connect.plugins[0]  # a sink: tasks.max tasks
    world.connect.connectors[NAME].task_configs = 3
    world.annotate({RESTART: "t1", RESTART_TASKS: "0,2:t1"})
    await world.reconcile()
    assert writes(world) == [
        Call("restart", (NAME, True, False)),
        Call("restart_task", (NAME, 0)),
        Call("restart_task", (NAME, 2)),
    ]
    assert world.status["verbs"] == {"restart": "t1", "restartTasks": "0,2:t1"}
    await world.reconcile(periodic=True)  # same tokens: nothing again
    assert len(writes(world)) == 3
    world.annotate({RESTART: "t1", RESTART_TASKS: "failed:t2"})
    await world.reconcile()
    assert writes(world)[3:] == [Call("restart", (NAME, True, True))]
    world.annotate({RESTART: "not a token!", RESTART_TASKS: "failed:t2"})
    await world.reconcile()
    assert len(writes(world)) == 4
    assert ("Warning", "BadAnnotation") in world.event_reasons()


async def test_config_and_status_leave_no_read_behind_when_one_fails() -> None:
    """A failed read is raised as itself, after the other read has finished (gather left it
    running, unawaited), and no task ends with an exception: kopf re-raises, at shutdown, every
    failed task of the loop, even one whose error was handled (CI22, CI24)."""
    tasks: list[asyncio.Task[Any]] = []

    class OneFails:
        async def get_config(self, name: str) -> dict[str, str] | None:
            tasks.append(cast("asyncio.Task[Any]", asyncio.current_task()))
            raise ConnectUnavailable("get config: HTTP 503", operation="get config")

        async def get_status(self, name: str) -> None:
            tasks.append(cast("asyncio.Task[Any]", asyncio.current_task()))
            await asyncio.sleep(0.05)

    with pytest.raises(ConnectUnavailable, match="HTTP 503"):
        await _config_and_status(cast(ConnectApi, OneFails()), NAME)
    assert len(tasks) == 2
    assert all(t.done() and not t.cancelled() and t.exception() is None for t in tasks)
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


# -- delete ---------------------------------------------------------------------------------------


async def test_delete_removes_the_connector(world: World) -> None:
    await created(world)
    await world.delete()
    assert world.connect.connectors == {}
    assert world.event_reasons() == [("Normal", "Deleted")]
    await world.delete()  # already gone: nothing to say
    assert world.event_reasons() == [("Normal", "Deleted")]


async def test_delete_leaves_another_objects_connector(world: World) -> None:
    await created(world)
    await world.delete(rivals=[rival("2024-01-01T00:00:00Z")])
    assert NAME in world.connect.connectors
    assert writes(world) == []
    assert world.event_reasons() == [("Normal", "NotDeleted")]


async def test_delete_waits_for_the_reset_lock(world: World) -> None:
    await created(world)
    owner = {"apiVersion": "connectops.io/v1alpha1", "kind": "OffsetReset", "name": "rewind", "uid": "uid-r"}
    await world.kube.acquire_lock(NAMESPACE, f"kafka/{world.connect.kafka_cluster_id}", NAME, HOLDER, owner)
    with pytest.raises(NotReadyYet, match=f"held by OffsetReset {NAMESPACE}/rewind"):
        await world.delete()
    assert NAME in world.connect.connectors


async def test_delete_with_the_cluster_gone_releases_the_object(world: World) -> None:
    await created(world)
    del world.kube.connect_clusters[(NAMESPACE, CLUSTER)]
    await world.delete()
    assert NAME in world.connect.connectors
    assert world.event_reasons() == [("Warning", "ClusterGone")]


async def test_delete_while_the_worker_is_down_is_retried(world: World) -> None:
    await created(world)
    world.connect.mode = "down"
    with pytest.raises(ConnectUnavailable):
        await world.delete()
    world.connect.mode = "up"
    await world.delete()
    assert world.connect.connectors == {}


async def test_delete_of_an_invalid_spec_does_nothing(world: World) -> None:
    world.apply({"clusterRef": {"name": CLUSTER}, "class": FILE_SINK, "tasksMax": 0})
    await world.delete()
    assert world.connect.calls == []
    assert world.events == []
