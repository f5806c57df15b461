"""``spec.offsets.from``: a rename carries the old connector's offsets over, through the
Connector reconciler with the doubles (the end-to-end proof with real output is
tests/e2e/test_rename.py). The OffsetReset it creates is run by its own executor there; here its
phase is set by hand, since what is judged is what the rename does around it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connectops.adapters.connect_rest import ConnectUnavailable
from connectops.errors import NotReadyYet
from connectops.planning.on_create import HANDED_OVER
from connectops.planning.ownership import Claim
from tests.doubles.connect import FILE_SOURCE
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, World, make_world

OLD = "orders-v1"
NEW = "orders-v2"
OLD_OFFSETS = [
    {"partition": {"filename": "/data/a.txt"}, "offset": {"position": 120}},
    {"partition": {"filename": "/data/b.txt"}, "offset": {"position": 7}},
]
RESET = f"{NEW}-offsets-uid-orde"  # reset_name("orders-v2", "uid-orders-v2")


def spec(**offsets: Any) -> dict[str, Any]:
    return {
        "clusterRef": {"name": CLUSTER},
        "class": FILE_SOURCE,
        "config": {"topic": "orders"},
        "offsets": offsets or {"from": {"connector": OLD}},
    }


def world_with_old(*, handed_over: bool = True) -> World:
    world = make_world()
    old = world.connect.seed(OLD, {"connector.class": FILE_SOURCE, "topic": "orders", "name": OLD})
    old.task_configs = 1
    for entry in OLD_OFFSETS:
        old.offsets[json.dumps(entry["partition"], sort_keys=True)] = json.loads(json.dumps(entry))
    world.apply(spec(), name=NEW, annotations={HANDED_OVER: OLD} if handed_over else {})
    # the API server's copy is the world's body: the marker is patched there before anything else
    world.kube.objects[(NAMESPACE, "connectors", NEW)] = world.body
    return world


def reset_object(world: World) -> dict[str, Any] | None:
    return world.kube.objects.get((NAMESPACE, "offsetresets", RESET))


def finish_reset(world: World, phase: str = "Succeeded") -> None:
    obj = reset_object(world)
    assert obj is not None
    obj["status"] = {"phase": phase, "conditions": [{"type": "Succeeded", "status": "False", "message": "boom"}]}


async def test_the_rename_waits_while_the_old_connector_object_exists() -> None:
    world = world_with_old(handed_over=False)
    claims = [Claim(NAMESPACE, "orders-v1-obj", "uid-old", "2024-01-01T00:00:00Z", CLUSTER)]
    await world.reconcile(old_claims=claims)
    cond = world.condition("OffsetsOnCreate")
    assert (cond["status"], cond["reason"]) == ("False", "RenameWaiting")
    assert "Connector orders-v1-obj still manages connector orders-v1" in cond["message"]
    assert world.connect.writes() == []  # nothing stopped, nothing created
    assert reset_object(world) is None
    assert "offsetsOnCreate" not in world.status  # no marker: nothing started


async def test_a_connector_of_another_namespace_is_refused() -> None:
    world = world_with_old()
    world.kube.add_connect_cluster("team-b", CLUSTER, {"restUrl": URL})  # the same worker
    await world.reconcile(old_claims=[Claim("team-b", "theirs", "uid-b", "2024-01-01T00:00:00Z", CLUSTER)])
    assert world.reasons()["OffsetsOnCreate"] == ("False", "RenameRefused")
    assert "another namespace" in world.condition("OffsetsOnCreate")["message"]
    assert world.connect.writes() == []


async def test_a_connector_never_handed_over_is_refused() -> None:
    world = world_with_old(handed_over=False)
    await world.reconcile()
    assert world.reasons()["OffsetsOnCreate"] == ("False", "RenameRefused")
    assert world.connect.writes() == []
    assert world.connect.connectors[OLD].target == "STARTED"


async def test_a_missing_old_connector_creates_nothing() -> None:
    world = make_world()
    world.apply(spec(), name=NEW, annotations={HANDED_OVER: OLD})
    world.kube.objects[(NAMESPACE, "connectors", NEW)] = world.body
    await world.reconcile()
    assert world.reasons()["OffsetsOnCreate"] == ("False", "RenameSourceMissing")
    assert NEW not in world.connect.connectors


async def test_a_rename_of_itself_is_refused() -> None:
    world = make_world()
    world.apply({**spec(), "connectorName": OLD}, name=NEW, annotations={HANDED_OVER: OLD})
    world.kube.objects[(NAMESPACE, "connectors", NEW)] = world.body
    await world.reconcile()
    assert world.reasons()["OffsetsOnCreate"] == ("False", "RenameInvalid")
    assert world.connect.writes() == []


async def test_the_old_offsets_are_carried_over_and_the_old_connector_goes_only_after_the_reset() -> None:
    world = world_with_old()
    # an earlier namesake left an offset under the new name: it must not survive
    world.connect.seed(NEW, {"connector.class": FILE_SOURCE, "topic": "orders", "name": NEW}, target="STOPPED")
    world.connect.connectors[NEW].offsets["x"] = {"partition": {"filename": "/old/z.txt"}, "offset": {"position": 3}}
    del world.connect.connectors[NEW]  # deleted since: Connect keeps the offsets ...
    leftover = {"partition": {"filename": "/old/z.txt"}, "offset": {"position": 3}}

    outcome = await world.reconcile()
    # first: the old connector is stopped, and its offsets are read only once it has no task
    assert isinstance(outcome.error, NotReadyYet)
    assert world.connect.connectors[OLD].target == "STOPPED"
    assert world.status["offsetsOnCreate"]["state"] == "Applying"
    assert world.status["offsetsOnCreate"]["renamedFrom"] == OLD
    assert world.reasons()["OffsetsOnCreate"] == ("Unknown", "Renaming")
    assert reset_object(world) is None

    # ... a fake cannot keep offsets of a deleted connector: give them back to the recreated one
    real_create = world.connect.create

    async def create(name: str, config: dict[str, str], initial_state: str | None = None) -> None:
        await real_create(name, config, initial_state)
        if name == NEW:
            world.connect.connectors[NEW].offsets["x"] = dict(leftover)

    world.connect.create = create  # type: ignore[method-assign]

    outcome = await world.reconcile()
    assert outcome.error is None
    assert world.connect.connectors[NEW].target == "STOPPED"  # created stopped, no task ran
    reset = reset_object(world)
    assert reset is not None
    assert reset["spec"]["action"] == "alter"
    assert reset["spec"]["connectorRef"] == {"name": NEW}
    # exactly the old connector's offsets, read from the worker, and the leftover removed
    assert reset["spec"]["offsets"] == [*OLD_OFFSETS, {"partition": leftover["partition"], "offset": None}]
    assert world.status["offsetsOnCreate"]["carried"] == 2
    assert OLD in world.connect.connectors  # kept until the reset has verified the new offsets

    await world.reconcile()  # the reset is still running: nothing more happens
    assert OLD in world.connect.connectors
    assert world.reasons()["OffsetsOnCreate"] == ("Unknown", "Applying")

    finish_reset(world)
    await world.reconcile()
    assert OLD not in world.connect.connectors
    marker = world.status["offsetsOnCreate"]
    assert marker["state"] == "Applied"
    assert "renamed from orders-v1: 2 partition offset(s) carried over" in marker["message"]
    assert ("Normal", "Renamed") in world.event_reasons()
    assert world.reasons()["OffsetsOnCreate"] == ("True", "Applied")


async def test_a_failed_reset_leaves_the_old_connector_stopped_and_says_so() -> None:
    world = world_with_old()
    await world.reconcile()
    await world.reconcile()
    finish_reset(world, "Failed")
    await world.reconcile()
    assert world.connect.connectors[OLD].target == "STOPPED"
    assert world.connect.connectors[OLD].offsets  # untouched
    cond = world.condition("OffsetsOnCreate")
    assert cond["reason"] == "ResetFailed"
    assert "orders-v1 (renamed from) is left STOPPED with its offsets untouched" in cond["message"]


@pytest.mark.parametrize("lost", ["create", "create_object"])
async def test_a_crash_between_the_steps_redoes_them_once(lost: str) -> None:
    """The process dies after the old connector stopped and before the reset exists (its
    answer lost): the next reconcile finds the stored marker and finishes, with one of each."""
    world = world_with_old()
    await world.reconcile()  # stops the old connector
    if lost == "create":
        # the new connector was created, the answer never came back
        world.connect.lose_answer("create", ConnectUnavailable("create connector: connection reset"))
        outcome = await world.reconcile()
        assert isinstance(outcome.error, ConnectUnavailable)
    else:
        original = world.kube.create_object

        async def dies(*args: Any, **kwargs: Any) -> bool:
            world.kube.create_object = original  # type: ignore[method-assign]
            raise RuntimeError("operator killed")

        world.kube.create_object = dies  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await world.reconcile()
    assert reset_object(world) is None
    await world.reconcile()
    reset = reset_object(world)
    assert reset is not None
    assert reset["spec"]["offsets"] == OLD_OFFSETS
    assert [c.method for c in world.connect.writes()].count("create") == 1
    assert sum(1 for (ns, pl, _), _o in world.kube.objects.items() if pl == "offsetresets") == 1
    finish_reset(world)
    await world.reconcile()
    assert OLD not in world.connect.connectors
    assert world.status["offsetsOnCreate"]["state"] == "Applied"


async def test_deleting_the_old_object_hands_the_connector_over() -> None:
    world = make_world()
    world.connect.seed(OLD, {"connector.class": FILE_SOURCE, "topic": "orders", "name": OLD})
    world.apply({"clusterRef": {"name": CLUSTER}, "class": FILE_SOURCE, "config": {"topic": "orders"}}, name=OLD)
    heir = {
        "metadata": {"name": NEW, "namespace": NAMESPACE, "uid": "uid-new", "annotations": {}},
        "spec": spec(),
    }
    world.kube.objects[(NAMESPACE, "connectors", NEW)] = heir
    await world.delete()
    assert OLD in world.connect.connectors  # left for the rename
    assert heir["metadata"]["annotations"] == {HANDED_OVER: OLD}
    assert ("Normal", "HandedOver") in world.event_reasons()

    # without an heir (or one whose rename is over), deleting deletes
    heir["status"] = {"offsetsOnCreate": {"state": "Applied"}}
    await world.delete()
    assert OLD not in world.connect.connectors


async def test_deleting_the_new_object_mid_rename_says_the_old_connector_is_left_stopped() -> None:
    world = world_with_old()
    await world.reconcile()  # the old connector is stopped
    await world.delete()
    assert world.connect.connectors[OLD].target == "STOPPED"
    assert world.connect.connectors[OLD].offsets
    abandoned = [e for e in world.events if e.reason == "RenameAbandoned"]
    assert abandoned
    assert abandoned[0].type == "Warning"
    assert "orders-v1 is left STOPPED" in abandoned[0].message


async def test_a_failed_reset_is_reported_again_at_every_reconcile() -> None:
    world = world_with_old()
    await world.reconcile()
    await world.reconcile()
    finish_reset(world, "Failed")
    await world.reconcile()
    await world.reconcile()  # from the stored Failed marker: the reset's failure is still what it says
    assert world.status["offsetsOnCreate"]["state"] == "Failed"
    assert world.reasons()["OffsetsOnCreate"] == ("False", "ResetFailed")
    assert world.connect.connectors[OLD].target == "STOPPED"
