"""A Connector reconciler wired to the in-memory doubles, driven as kopf drives it.

:class:`World` holds a Connector object's body as the API server would, calls the reconciler's
public entry points with it (``reconcile`` for kopf's change handlers and resync timer, ``delete``
for the deletion handler), and applies the status patch the handler publishes
(``common.status_patch``, merged the way a JSON merge patch is: ``None`` removes a field). Tests
read the results from the doubles' state and recorded calls, from the patches, the status and
the Events; never from the reconciler's internals.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from connectops.adapters.kube import KubeClient
from connectops.planning.ownership import Claim
from connectops.reconcilers.checks import CheckRunner, check_defaults
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import Outcome, status_patch
from connectops.reconcilers.connector import ConnectorObject, ConnectorReconciler, claimed_name
from connectops.runtime import connector_renames
from connectops.settings import Settings
from tests.doubles.connect import FakeConnect, client_factory
from tests.doubles.kube import FakeKube

NAMESPACE = "team-a"
CLUSTER = "main"
URL = "http://connect.team-a:8083"


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


@dataclass
class World:
    reconciler: ConnectorReconciler
    kube: FakeKube
    #: restUrl -> the worker group answering there
    workers: dict[str, FakeConnect]
    body: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    #: each status patch published, in order ({} when a reconcile changed nothing)
    patches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def connect(self) -> FakeConnect:
        return self.workers[URL]

    @property
    def status(self) -> dict[str, Any]:
        if not isinstance(self.body.get("status"), dict):
            self.body["status"] = {}
        status: dict[str, Any] = self.body["status"]
        return status

    def condition(self, type_: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = [c for c in self.status.get("conditions") or [] if c["type"] == type_]
        assert found, f"no {type_} condition in {self.status.get('conditions')}"
        return found[0]

    def reasons(self) -> dict[str, tuple[str, str]]:
        """condition type -> (status, reason)."""
        return {c["type"]: (c["status"], c["reason"]) for c in self.status.get("conditions") or []}

    def emit(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def event_reasons(self) -> list[tuple[str, str]]:
        return [(e.type, e.reason) for e in self.events]

    def apply(self, spec: dict[str, Any], *, name: str = "orders", annotations: dict[str, str] | None = None) -> None:
        """kubectl apply: a new object, or a new spec (the generation moves on)."""
        if not self.body:
            self.body = {
                "apiVersion": "connectops.io/v1alpha1",
                "kind": "Connector",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "uid": f"uid-{name}",
                    "generation": 1,
                    "creationTimestamp": "2024-05-01T10:00:00Z",
                    "annotations": dict(annotations or {}),
                },
                "spec": copy.deepcopy(spec),
            }
            return
        meta = self.body["metadata"]
        if spec != self.body["spec"]:
            meta["generation"] += 1
            self.body["spec"] = copy.deepcopy(spec)
        if annotations is not None:
            meta["annotations"] = dict(annotations)

    def annotate(self, annotations: dict[str, str]) -> None:
        self.body["metadata"]["annotations"] = dict(annotations)

    async def reconcile(
        self,
        *,
        periodic: bool = False,
        listed: Callable[[str], bool] | None = None,
        rivals: Sequence[Claim] = (),
        old_claims: Sequence[Claim] = (),
    ) -> Outcome:
        """One handler run: the reconcile on the current body, then its status patch applied. A
        resync observes through the shared listing, as the timer handler's does (``listed``
        defaults to keeping every connector for a resync, and None for a change)."""
        obj = ConnectorObject.from_body(copy.deepcopy(self.body))
        outcome = await self.reconciler.reconcile(
            obj,
            self.emit,
            periodic=periodic,
            listed=(lambda _: True) if periodic and listed is None else listed,
            rivals=rivals,
            old_claims=old_claims,
        )
        patch = status_patch(self.body.get("status") or {}, outcome.status)
        self.patches.append(patch)
        status = self.status
        for key, value in patch.items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = copy.deepcopy(value)
        return outcome

    async def delete(self, *, rivals: Sequence[Claim] = ()) -> None:
        """The delete handler, its heirs from the objects FakeKube holds by the index's own rule
        (connectops.runtime.connector_renames), as the watch would have indexed them."""
        connector = claimed_name(self.body["metadata"]["name"], self.body.get("spec") or {})
        heirs = [
            claim
            for (_, plural, _), other in self.kube.objects.items()
            if plural == "connectors"
            for old, claim in (connector_renames(other) or {}).items()
            if old == connector
        ]
        obj = ConnectorObject.from_body(copy.deepcopy(self.body))
        await self.reconciler.delete(obj, self.emit, rivals=rivals, heirs=heirs)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "checks_enabled": False,
        # the double applies a write at once: the first status read after it is the settled one
        "settle_seconds": 0.0,
        "cluster_cache_seconds": 0.0,
        # the shared listing is read afresh at every resync (kept for half of this); the tests
        # of its keeping set a period
        "resync_seconds": 0.0,
        "capabilities_ttl_seconds": 60.0,
        "allowed_rest_urls": (),
    }
    values.update(overrides)
    return Settings(**values)


def make_world(*workers: tuple[str, FakeConnect], **setting_overrides: Any) -> World:
    """A reconciler over a FakeKube holding ConnectCluster ``main`` (at :data:`URL`) and the given
    worker groups (default: one FakeConnect at :data:`URL`)."""
    fakes = dict(workers) or {URL: FakeConnect()}
    kube = FakeKube()
    kube.add_connect_cluster(NAMESPACE, CLUSTER, {"restUrl": URL})

    config = settings(**setting_overrides)
    real_kube = cast(KubeClient, kube)  # FakeKube implements ConnectorKubeApi, what these call
    clusters = ClusterRegistry(real_kube, config, client_factory=client_factory(fakes))
    checks = CheckRunner(real_kube, config, check_defaults(config))
    return World(ConnectorReconciler(real_kube, clusters, config, checks), kube, fakes)
