"""Secret rotation through the reconcilers' entry points, against ``FakeConnect`` and ``FakeKube``:
a Secret event as kopf delivers it (base64 ``data``, listed or watched) goes to
:meth:`SecretRotation.changed` and :meth:`SecretRotation.apply`, and the tests read what reached
the worker (writes, clients built) and what was published (Events). The end-to-end proof on a
real API server and Connect worker is tests/e2e/test_secret_rotation.py.
"""

from __future__ import annotations

import asyncio
import base64
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connectops.adapters.connect_rest import ConnectApi
from connectops.adapters.kube import KubeClient
from connectops.concurrency.slots import KeyedSlots
from connectops.planning.secrets import (
    CONNECT_CLUSTER,
    CONNECTOR,
    RotationBook,
    SecretUse,
    cluster_secret_keys,
    connector_secret_keys,
)
from connectops.reconcilers.checks import CheckRunner, check_defaults
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import EmitEvent
from connectops.reconcilers.connect_cluster import ConnectClusterReconciler
from connectops.reconcilers.connector import ConnectorReconciler
from connectops.reconcilers.connector_pass import ConnectorPass, Trigger
from connectops.reconcilers.secret_rotation import SecretRotation
from connectops.runtime import connector_indexes
from tests.doubles.connect import FILE_SOURCE, Call, FakeConnect
from tests.doubles.kube import FakeKube
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, Event, settings

pytestmark = pytest.mark.timeout(30)

SECRET = "db"
OLD, NEW = "hunter2-old", "hunter2-new"


def encoded(data: dict[str, str]) -> dict[str, str]:
    """A Secret's ``data`` as the watch delivers it."""
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


@dataclass
class Rig:
    """The Runtime's wiring (connectops.runtime) over the doubles."""

    kube: FakeKube
    connect: FakeConnect
    rotation: SecretRotation
    connectors: ConnectorReconciler
    clusters: ClusterRegistry
    #: every client the registry built: (auth it was given, the client)
    built: list[tuple[tuple[str, str] | None, FakeConnect]] = field(default_factory=list)
    events: dict[str, list[Event]] = field(default_factory=lambda: defaultdict(list))

    def emitter(self, body: Any) -> EmitEvent:
        def emit(type_: str, reason: str, message: str) -> None:
            self.events[body["metadata"]["name"]].append(Event(type_, reason, message))

        return emit

    def uses(self) -> list[SecretUse]:
        """What the Secret indexes (connectops.indexes) hold for Secret ``db``: from the objects' raw specs."""
        found = []
        for (_, plural, name), obj in self.kube.objects.items():
            if plural == "connectors" and SECRET in connector_secret_keys(obj["spec"]):
                found.append(SecretUse(CONNECTOR, name, connector_secret_keys(obj["spec"])[SECRET]))
        for (_, name), obj in self.kube.connect_clusters.items():
            if SECRET in cluster_secret_keys(obj["spec"]):
                found.append(SecretUse(CONNECT_CLUSTER, name, cluster_secret_keys(obj["spec"])[SECRET]))
        return found

    async def secret_event(self, data: dict[str, str], *, listed: bool = False) -> list[SecretUse]:
        """kopf's on.event for Secret ``db``, after the API server stored ``data``."""
        self.kube.add_secret(NAMESPACE, SECRET, data)
        uses = self.uses()
        keys = self.rotation.changed(NAMESPACE, SECRET, encoded(data), uses, listed=listed, deleted=False)
        if not keys:
            return []
        return await self.rotation.apply(NAMESPACE, SECRET, keys, uses, self.emitter)

    async def reconcile(self, name: str, *, periodic: bool) -> None:
        from connectops.reconcilers.connector import ConnectorObject

        body = await self.kube.custom_object(NAMESPACE, "connectors", name)
        obj = ConnectorObject.from_body(body)
        outcome = await self.connectors.reconcile(obj, self.emitter(body), periodic=periodic)
        # written back, as the handler does: the next reconcile reads what this one observed
        await self.kube.patch_status(NAMESPACE, "connectors", name, outcome.status)


def rig(cluster_spec: dict[str, Any] | None = None) -> Rig:
    kube = FakeKube()
    kube.add_connect_cluster(NAMESPACE, CLUSTER, cluster_spec or {"restUrl": URL})
    connect = FakeConnect()
    built: list[tuple[tuple[str, str] | None, FakeConnect]] = []

    def factory(base_url: str, *, auth: tuple[str, str] | None, **_: Any) -> ConnectApi:
        # one client per build, all answering from the same worker state, so a rebuilt client
        # is told apart from the one it replaced
        client = FakeConnect()
        client.connectors = connect.connectors
        client.calls = connect.calls
        built.append((auth, client))
        return client

    config = settings()
    real_kube = cast(KubeClient, kube)
    book = RotationBook(ttl=60.0)
    clusters = ClusterRegistry(real_kube, config, client_factory=factory)
    connectors = ConnectorReconciler(
        real_kube, clusters, config, CheckRunner(real_kube, config, check_defaults(config)), book
    )
    cluster_reconciler = ConnectClusterReconciler(clusters, config, book)
    locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
    r = Rig(kube, connect, cast(SecretRotation, None), connectors, clusters, built)
    # the Runtime's own pass (connectops.runtime): the rotation reconciles a Connector through it
    indexes = connector_indexes()
    passes = ConnectorPass(
        real_kube,
        connectors,
        indexes,
        locks=locks,
        periodic_slots=asyncio.Semaphore(8),
        change_slots=KeyedSlots(32),
        emitter=r.emitter,
    )

    async def connector_pass(namespace: str, name: str) -> None:
        await passes.by_name(namespace, name, Trigger.SECRET_ROTATED)

    r.rotation = SecretRotation(real_kube, clusters, connector_pass, cluster_reconciler, locks, 4, book)
    return r


def connector_spec(**config_from: tuple[str, str]) -> dict[str, Any]:
    return {
        "clusterRef": {"name": CLUSTER},
        "class": FILE_SOURCE,
        "config": {"file": "/data/in.txt", "topic": "orders"},
        "configFrom": {k: {"secretKeyRef": {"name": s, "key": key}} for k, (s, key) in config_from.items()},
    }


async def applied(r: Rig, name: str = "orders") -> None:
    """A Connector reading ``db.password`` from Secret db key password, created in Connect."""
    r.kube.add_secret(NAMESPACE, SECRET, {"password": OLD, "comment": "a"})
    r.kube.add_object(
        NAMESPACE, "connectors", "Connector", name, connector_spec(**{"db.password": (SECRET, "password")})
    )
    # the listing at start-up: remembered, nothing done
    assert await r.secret_event({"password": OLD, "comment": "a"}, listed=True) == []
    await r.reconcile(name, periodic=False)
    assert r.connect.connectors[name].config["db.password"] == OLD
    r.connect.calls.clear()
    r.events.clear()


async def test_a_rotated_key_is_put_once_and_reported_without_its_value() -> None:
    r = rig()
    await applied(r)
    reconciled = await r.secret_event({"password": NEW, "comment": "a"})
    assert [u.name for u in reconciled] == ["orders"]
    assert [c for c in r.connect.writes() if c.method == "put_config"] == [
        Call("put_config", ("orders", {**r.connect.connectors["orders"].config}))
    ]
    assert r.connect.connectors["orders"].config["db.password"] == NEW
    [event] = r.events["orders"]
    assert (event.type, event.reason) == ("Normal", "SecretRotated")
    assert "db key password" in event.message
    assert "db.password" in event.message
    assert OLD not in event.message
    assert NEW not in event.message


async def test_another_key_of_the_same_secret_changes_nothing() -> None:
    r = rig()
    await applied(r)
    assert await r.secret_event({"password": OLD, "comment": "b"}) == []
    assert r.connect.calls == []  # not even read: nobody reads the key that changed
    assert r.events == {}


async def test_an_unchanged_secret_event_changes_nothing() -> None:
    r = rig()
    await applied(r)
    assert await r.secret_event({"password": OLD, "comment": "a"}) == []
    assert r.connect.calls == []


async def test_a_secret_first_seen_through_a_watch_event_lets_connect_decide() -> None:
    """Referenced after its last listing: every referenced key may have changed; Connect's
    config says whether anything is written (here it already holds the value: nothing is)."""
    r = rig()
    r.kube.add_secret(NAMESPACE, SECRET, {"password": OLD})
    r.kube.add_object(
        NAMESPACE, "connectors", "Connector", "orders", connector_spec(**{"db.password": (SECRET, "password")})
    )
    await r.reconcile("orders", periodic=False)
    r.connect.calls.clear()
    reconciled = await r.secret_event({"password": OLD})
    assert [u.name for u in reconciled] == ["orders"]
    assert r.connect.writes() == []


async def test_a_resync_that_reads_the_rotated_value_first_reports_the_rotation() -> None:
    r = rig()
    await applied(r)
    r.kube.add_secret(NAMESPACE, SECRET, {"password": NEW, "comment": "a"})
    r.rotation.changed(
        NAMESPACE, SECRET, encoded({"password": NEW, "comment": "a"}), r.uses(), listed=False, deleted=False
    )
    await r.reconcile("orders", periodic=True)
    assert [(e.type, e.reason) for e in r.events["orders"]] == [("Normal", "SecretRotated")]
    # the rotation's own reconcile then finds Connect up to date: no second write
    r.connect.calls.clear()
    await r.rotation.apply(NAMESPACE, SECRET, frozenset({"password"}), r.uses(), r.emitter)
    assert r.connect.writes() == []


async def test_without_the_watch_a_rotated_value_is_drift() -> None:
    r = rig()
    await applied(r)
    r.kube.add_secret(NAMESPACE, SECRET, {"password": NEW, "comment": "a"})
    await r.reconcile("orders", periodic=True)
    assert [(e.type, e.reason) for e in r.events["orders"]] == [("Warning", "DriftCorrected")]


async def test_a_deleted_secret_is_reported_at_once() -> None:
    r = rig()
    await applied(r)
    del r.kube.secrets[(NAMESPACE, SECRET)]
    uses = r.uses()
    keys = r.rotation.changed(NAMESPACE, SECRET, {}, uses, listed=False, deleted=True)
    assert keys == {"password"}
    await r.rotation.apply(NAMESPACE, SECRET, keys, uses, r.emitter)
    assert ("Warning", "ReferenceNotFound") in [(e.type, e.reason) for e in r.events["orders"]]
    assert r.rotation.remembered == 0


async def test_a_secret_nobody_reads_is_not_remembered() -> None:
    r = rig()
    assert r.rotation.changed(NAMESPACE, "other", encoded({"x": "y"}), [], listed=True, deleted=False) == set()
    assert r.rotation.remembered == 0


async def test_rotated_cluster_credentials_make_a_new_client_and_keep_the_old_one_open() -> None:
    r = rig({"restUrl": URL, "basicAuth": {"secretName": SECRET}})
    r.kube.add_secret(NAMESPACE, SECRET, {"username": "ops", "password": OLD})
    assert await r.secret_event({"username": "ops", "password": OLD}, listed=True) == []
    first = await r.clusters.resolve(NAMESPACE, CLUSTER, max_age=0)
    assert r.built[-1][0] == ("ops", OLD)

    reconciled = await r.secret_event({"username": "ops", "password": NEW})
    assert [(u.kind, u.name) for u in reconciled] == [(CONNECT_CLUSTER, CLUSTER)]
    assert r.built[-1][0] == ("ops", NEW)
    current = await r.clusters.resolve(NAMESPACE, CLUSTER)
    assert current.client is r.built[-1][1]
    assert current.client is not first.client
    # a call already made through the old client is not cut off: it is closed later, not now
    assert cast(FakeConnect, first.client).closed is False
    [event] = [e for e in r.events[CLUSTER] if e.reason == "SecretRotated"]
    assert "db key(s) password" in event.message
    assert OLD not in event.message
    assert NEW not in event.message

    # the username key read too, and unchanged: a change of an unread key builds nothing
    builds = len(r.built)
    assert await r.secret_event({"username": "ops", "password": NEW, "unused": "x"}) == []
    assert len(r.built) == builds
