"""The one Connector pass (connectops.reconcilers.connector_pass) for each of its triggers, over
``FakeKube`` and ``FakeConnect``: where its body comes from, who writes the status, which slot
bounds it, what it counts. The end-to-end proof is the whole e2e suite, every Connector of which
is reconciled through this pass (tests/e2e/test_verbs_pace.py times the verbs through it)."""

from __future__ import annotations

import asyncio
import copy
from collections import defaultdict
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY

from connectops.adapters.kube import KubeClient
from connectops.concurrency.queues import Later
from connectops.concurrency.slots import KeyedSlots
from connectops.object_metrics import OBJECTS
from connectops.reconcilers.common import EmitEvent
from connectops.reconcilers.connector_pass import ConnectorPass, Trigger
from connectops.runtime import connector_indexes
from tests.doubles.connect import FILE_SOURCE
from tests.reconcilers.world import CLUSTER, NAMESPACE, Event, World, make_world

pytestmark = pytest.mark.timeout(30)

SPEC = {"clusterRef": {"name": CLUSTER}, "class": FILE_SOURCE, "config": {"file": "/in.txt", "topic": "orders"}}


class Rig:
    def __init__(self, world: World, *, periodic_slots: int = 8) -> None:
        self.world = world
        self.kube = world.kube
        self.indexes = connector_indexes()
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.periodic_slots = asyncio.Semaphore(periodic_slots)
        self.events: list[Event] = []
        self.passes = ConnectorPass(
            cast(KubeClient, self.kube),
            world.reconciler,
            self.indexes,
            locks=self.locks,
            periodic_slots=self.periodic_slots,
            change_slots=KeyedSlots(4),
            emitter=self.emitter,
        )

    def emitter(self, body: Any) -> EmitEvent:
        def emit(type_: str, reason: str, message: str) -> None:
            self.events.append(Event(type_, reason, message))

        return emit

    def add(self, name: str = "orders") -> dict[str, Any]:
        """A Connector the API server stored and the watch delivered (the index holds it)."""
        body = self.kube.add_object(NAMESPACE, "connectors", "Connector", name, copy.deepcopy(SPEC))
        self.indexes.connector_event(copy.deepcopy(body), deleted=False)
        return body

    def stored_status(self, name: str = "orders") -> dict[str, Any]:
        status: dict[str, Any] = self.kube.objects[(NAMESPACE, "connectors", name)].get("status") or {}
        return status


def reconciles(label: str) -> float:
    value = REGISTRY.get_sample_value("connectops_reconciles_total", {"kind": "Connector", "trigger": label})
    return value or 0.0


@pytest.fixture
def rig() -> Rig:
    return Rig(make_world())


async def test_a_change_returns_its_status_to_the_handler(rig: Rig) -> None:
    body = rig.add()
    before = reconciles("change")
    published = await rig.passes.on_change(body)
    assert published.error is None
    assert published.changes["connectorState"] == "RUNNING"
    # the change handler writes it (handlers._write_status, through the status guard), so that
    # kopf's retry follows the pass's error, not the write: nothing written here
    assert rig.stored_status() == {}
    assert "orders" in rig.world.connect.connectors
    assert reconciles("change") == before + 1


@pytest.mark.parametrize(
    ("trigger", "label"),
    [(Trigger.RESYNC, "timer"), (Trigger.RESUME, "change")],
)
async def test_a_resync_and_a_resume_write_their_own_status(rig: Rig, trigger: Trigger, label: str) -> None:
    body = rig.add()
    before = reconciles(label)
    published = await rig.passes.by_uid(body["metadata"]["uid"], trigger)
    assert published is not None
    assert published.error is None
    assert rig.stored_status()["connectorState"] == "RUNNING"
    assert rig.stored_status() == {**rig.stored_status(), **published.changes}
    assert reconciles(label) == before + 1


@pytest.mark.parametrize(
    ("trigger", "label"),
    [(Trigger.RESET_FINISHED, "reset-finished"), (Trigger.SECRET_ROTATED, "secret-rotated")],
)
async def test_a_hand_back_and_a_rotation_read_the_object_and_write_its_status(
    rig: Rig, trigger: Trigger, label: str
) -> None:
    rig.add()
    before = reconciles(label)
    published = await rig.passes.by_name(NAMESPACE, "orders", trigger)
    assert published is not None
    assert published.error is None
    assert rig.stored_status()["connectorState"] == "RUNNING"
    assert reconciles(label) == before + 1
    assert await rig.passes.by_name(NAMESPACE, "missing", trigger) is None


async def test_a_pass_by_name_acts_on_the_latest_body_the_watch_delivered(rig: Rig) -> None:
    """The API server's answer can trail a change the watch has delivered since (the read is
    made before the object's lock is held): the pass reads the index's body under the lock."""
    body = rig.add()
    newer = copy.deepcopy(body)
    newer["spec"]["config"]["topic"] = "orders-v2"
    newer["metadata"]["generation"] = 2
    rig.indexes.connector_event(newer, deleted=False)
    await rig.passes.by_name(NAMESPACE, "orders", Trigger.RESET_FINISHED)
    assert rig.world.connect.connectors["orders"].config["topic"] == "orders-v2"


async def test_an_object_gone_or_being_deleted_is_not_reconciled(rig: Rig) -> None:
    body = rig.add()
    uid = body["metadata"]["uid"]
    deleting = copy.deepcopy(body)
    deleting["metadata"]["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    rig.indexes.connector_event(deleting, deleted=False)
    assert await rig.passes.by_uid(uid, Trigger.RESYNC) is None
    rig.indexes.connector_event(deleting, deleted=True)
    rig.locks.clear()
    assert await rig.passes.by_uid(uid, Trigger.RESYNC) is None
    assert uid not in rig.locks  # no lock made again for an object that is gone
    assert rig.world.connect.connectors == {}
    assert rig.stored_status() == {}


async def test_resyncs_wait_for_a_periodic_slot_and_changes_do_not() -> None:
    rig = Rig(make_world(), periodic_slots=1)
    first, second = rig.add("first"), rig.add("second")
    await rig.periodic_slots.acquire()  # every periodic slot taken
    resync = asyncio.ensure_future(rig.passes.by_uid(first["metadata"]["uid"], Trigger.RESYNC))
    await asyncio.sleep(0.05)
    assert not resync.done()
    published = await asyncio.wait_for(rig.passes.on_change(second), 5)
    assert published.error is None
    assert "second" in rig.world.connect.connectors
    assert "first" not in rig.world.connect.connectors
    rig.periodic_slots.release()
    assert (await asyncio.wait_for(resync, 5)) is not None
    assert "first" in rig.world.connect.connectors


async def test_a_resync_words_a_correction_as_drift_and_a_change_does_not(rig: Rig) -> None:
    body = rig.add()
    await rig.passes.on_change(body)
    rig.world.connect.connectors["orders"].config["topic"] = "elsewhere"  # edited behind its back
    rig.events.clear()
    await rig.passes.by_uid(body["metadata"]["uid"], Trigger.RESYNC)
    assert ("Warning", "DriftCorrected") in [(e.type, e.reason) for e in rig.events]
    rig.world.connect.connectors["orders"].config["topic"] = "elsewhere"
    rig.events.clear()
    await rig.passes.on_change(body)
    assert ("Normal", "ConfigUpdated") in [(e.type, e.reason) for e in rig.events]


@pytest.mark.timeout(180)
async def test_a_thousand_deleted_connectors_leave_nothing_behind() -> None:
    """Each Connector created, resynced and asked to look again later, then deleted as kopf does
    it (the delete handler, then the watch's DELETED event): every memo this process keeps per
    object is empty again, and Connect holds none of them."""
    rig = Rig(make_world())
    rig.passes.later = Later(lambda uid: _ran(rig.passes.by_uid(uid, Trigger.RESYNC)), spacing=0.5)
    bodies = [rig.add(f"c-{i:04d}") for i in range(1000)]
    for body in bodies:
        assert (await rig.passes.on_change(body)).error is None
        await rig.passes.by_uid(body["metadata"]["uid"], Trigger.RESYNC)
        rig.passes.later.at(body["metadata"]["uid"], 3600.0)
    assert len(rig.world.connect.connectors) == 1000
    assert len(rig.world.reconciler.memos) == 1000
    assert rig.passes.later.remembered == 1000
    assert len(OBJECTS.connectors) >= 1000

    for body in bodies:
        await rig.passes.delete(body)
        rig.indexes.connector_event(body, deleted=True)

    assert rig.world.connect.connectors == {}
    assert len(rig.world.reconciler.memos) == 0
    assert len(rig.locks) == 0
    assert rig.passes.later.remembered == 0
    assert rig.indexes.remembered == 0
    assert not any(len(claims) for claims in rig.indexes.claims.values())
    assert not [key for key in OBJECTS.connectors if key[1].startswith("c-")]
    await rig.passes.later.close()


async def _ran(run: Any) -> None:
    await run
