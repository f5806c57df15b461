"""An OffsetReset executor wired to the in-memory doubles, driven as kopf drives it.

:class:`ResetWorld` keeps OffsetReset (and Connector) objects in ``FakeKube`` as the API server
would, hands each handler call a fresh copy of the stored object (``run`` for kopf's create,
update and resume handlers, ``release`` for the deletion handler) and lets the executor write
its status itself, step by step, through ``FakeKube.patch_status`` (a JSON merge patch). A
retryable error escapes ``run`` after the executor recorded it, as kopf sees it; :meth:`drive`
calls ``run`` again, as kopf's retries would, until a call ends without one.

A crash is simulated with :meth:`crash_on_event`: the event a step emits right after it acted,
before its ``Done`` is stored, raises :class:`Crash` (a ``BaseException``, which nothing in the
executor catches), so the stored status keeps what a killed process leaves behind.

Tests read the outcome from the doubles (the worker's connectors, offsets and recorded calls,
the Leases, the ConfigMaps) and from the stored status and the Events; never from the
executor's internals.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connectops.adapters.kube import KubeClient, Lock, lock_name
from connectops.concurrency.backoff import Backoff
from connectops.planning.offset_reset import Step
from connectops.planning.ownership import Claim
from connectops.reconcilers import offset_reset, reset_changes
from connectops.reconcilers.checks import CheckRunner, check_defaults
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.offset_reset import OffsetResetExecutor, backup_name, lock_holder
from connectops.reconcilers.reset_backup import BackupStore
from tests.doubles.connect import FakeConnect, FakeConnector, client_factory
from tests.doubles.kafka import FakeKafka
from tests.doubles.kube import FakeKube
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, Event, settings

__all__ = ["CLUSTER", "NAMESPACE", "URL", "Crash", "ResetWorld", "fast_polls", "make_reset_world"]

#: the reset's lock scope: FakeConnect reports this Kafka cluster id
SCOPE = "kafka/fake-kafka-cluster"
RESET = "rewind"
BOOTSTRAP = "kafka.team-a:9092"
STEPS = ("lock", "inspect", "stop", "backup", "reset", "offsetSyncs", "resume", "verify", "unlock")


class Crash(BaseException):
    """The operator process dies here (nothing in the executor catches a BaseException)."""


def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's polls (stop, verify, read-back) wait with ``Backoff`` (50 ms, doubling to
    1 s; the stop and verify waits hold 50 ms for 15 s) and the read-back gives Connect 30 s:
    millisecond waits and a 50 ms read-back here."""
    monkeypatch.setattr(Backoff.__init__, "__defaults__", (0.001, 0.004))
    monkeypatch.setattr(offset_reset, "DOWNTIME_POLL", 0.001)  # the stop and verify waits
    monkeypatch.setattr(reset_changes, "READ_BACK_SECONDS", 0.05)


@dataclass
class ResetWorld:
    executor: OffsetResetExecutor
    kube: FakeKube
    connect: FakeConnect
    kafka: FakeKafka
    events: list[Event] = field(default_factory=list)
    #: raised by each handler call that ended in an error, in order (what kopf retried on)
    errors: list[BaseException] = field(default_factory=list)
    crash_reasons: set[str] = field(default_factory=set)

    # -- objects --------------------------------------------------------------------------------

    def create(self, spec: dict[str, Any], name: str = RESET) -> dict[str, Any]:
        """kubectl create of an OffsetReset."""
        return self.kube.add_object(NAMESPACE, "offsetresets", "OffsetReset", name, spec)

    def edit(self, spec: dict[str, Any], name: str = RESET) -> None:
        self.kube.replace_spec(NAMESPACE, "offsetresets", name, spec)

    def add_connector_object(self, name: str, spec: dict[str, Any], namespace: str = NAMESPACE) -> dict[str, Any]:
        return self.kube.add_object(namespace, "connectors", "Connector", name, spec)

    def body(self, name: str = RESET) -> dict[str, Any]:
        return copy.deepcopy(self.kube.objects[(NAMESPACE, "offsetresets", name)])

    def uid(self, name: str = RESET) -> str:
        return str(self.kube.objects[(NAMESPACE, "offsetresets", name)]["metadata"]["uid"])

    # -- the worker -----------------------------------------------------------------------------

    def seed(
        self, name: str, config: dict[str, str], offsets: Iterable[dict[str, Any]] = (), *, target: str = "STARTED"
    ) -> FakeConnector:
        connector = self.connect.seed(name, config, target=target)
        self.seed_offsets(name, offsets)
        return connector

    def seed_offsets(self, name: str, offsets: Iterable[dict[str, Any]]) -> None:
        """Offsets the connector committed (as if it ran), without a call: a sink's into its
        consumer group when a FakeKafka is attached."""
        connector = self.connect.connectors[name]
        group = self.connect.sink_group(connector)
        for entry in offsets:
            if group is not None:
                tp = (entry["partition"]["kafka_topic"], int(entry["partition"]["kafka_partition"]))
                self.kafka.groups.setdefault(group, {})[tp] = int(entry["offset"]["kafka_offset"])
            else:
                connector.offsets[json.dumps(entry["partition"], sort_keys=True)] = copy.deepcopy(entry)

    def offsets(self, connector: str) -> list[dict[str, Any]]:
        """The connector's offsets as the worker holds them (a sink's in Kafka, with a FakeKafka),
        in partition order."""
        held = self.connect.connectors[connector]
        group = self.connect.sink_group(held)
        if group is not None:
            return [
                {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(self.kafka.groups.get(group, {}).items())
            ]
        return [held.offsets[k] for k in sorted(held.offsets)]

    def state(self, connector: str) -> tuple[str, int]:
        """Connect's target state of the connector and its number of tasks."""
        held = self.connect.connectors[connector]
        return held.target, len(held.task_ids())

    def writes(self) -> list[str]:
        return [c.method for c in self.connect.writes()]

    # -- handler calls --------------------------------------------------------------------------

    def emit(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))
        if reason in self.crash_reasons:
            self.crash_reasons.discard(reason)
            raise Crash(reason)

    def crash_on_event(self, reason: str) -> None:
        """The process dies when the executor next emits ``reason`` (e.g. ``StepReset``: the step
        acted and its Done is not stored yet)."""
        self.crash_reasons.add(reason)

    async def run(self, name: str = RESET, claims: Mapping[str, Iterable[Claim]] | None = None) -> bool:
        """One call of the handler kopf runs on create, spec update and operator start."""
        return await self.executor.run(self.body(name), self.emit, claims)

    async def drive(
        self, name: str = RESET, claims: Mapping[str, Iterable[Claim]] | None = None, *, max_calls: int = 10
    ) -> bool:
        """``run`` until a call ends without an error, as kopf's retries would; the errors are in
        :attr:`errors`."""
        for _ in range(max_calls):
            try:
                return await self.run(name, claims)
            except Exception as exc:
                self.errors.append(exc)
        raise AssertionError(f"still failing after {max_calls} calls: {self.errors[-3:]}")

    async def release(self, name: str = RESET) -> None:
        """The deletion handler, then the object is gone."""
        body = self.body(name)
        await self.executor.release(body)
        del self.kube.objects[(NAMESPACE, "offsetresets", name)]

    # -- what was stored ------------------------------------------------------------------------

    def status(self, name: str = RESET) -> dict[str, Any]:
        status: dict[str, Any] = self.kube.objects[(NAMESPACE, "offsetresets", name)].get("status") or {}
        return status

    def steps(self, name: str = RESET) -> dict[str, str]:
        return {s["name"]: s["state"] for s in self.status(name).get("steps") or []}

    def step(self, step: str, name: str = RESET) -> dict[str, Any]:
        found: list[dict[str, Any]] = [s for s in self.status(name)["steps"] if s["name"] == step]
        return found[0]

    def condition(self, type_: str, name: str = RESET) -> dict[str, Any]:
        found: list[dict[str, Any]] = [c for c in self.status(name).get("conditions") or [] if c["type"] == type_]
        assert found, f"no {type_} condition in {self.status(name).get('conditions')}"
        return found[0]

    def event_reasons(self) -> list[tuple[str, str]]:
        return [(e.type, e.reason) for e in self.events]

    def lock(self, connector: str, scope: str = SCOPE, namespace: str = NAMESPACE) -> Lock | None:
        return self.kube.leases.get((namespace, lock_name(scope, connector)))

    def holder(self, name: str = RESET) -> str:
        return lock_holder(NAMESPACE, name, self.uid(name))

    def backup_name(self, name: str = RESET) -> str:
        return backup_name(NAMESPACE, name, self.uid(name))

    def backup(self, name: str = RESET) -> dict[str, Any]:
        """The backup ConfigMap's document."""
        cm = self.kube.config_maps[(NAMESPACE, self.backup_name(name))]
        assert cm.data is not None
        doc: dict[str, Any] = json.loads(cm.data["backup.json"])
        return doc

    async def backup_doc(self, name: str = RESET) -> dict[str, Any]:
        """The backup's document, in whichever form it was stored (inline, gzipped, in pieces)."""
        kube = cast(KubeClient, self.kube)
        return await BackupStore(kube, reset_changes.OffsetChanges(kube)).read(NAMESPACE, self.backup_name(name))

    def backup_annotations(self, name: str = RESET) -> dict[str, str]:
        cm = self.kube.config_maps[(NAMESPACE, self.backup_name(name))]
        assert cm.metadata is not None
        return dict(cm.metadata.annotations or {})


def make_reset_world(
    monkeypatch: pytest.MonkeyPatch,
    *,
    kafka: bool = False,
    version: str = "4.3.0",
    max_step_attempts: int = 3,
    checks: bool = False,
    step_deadlines: Mapping[Step, float] | None = None,
    **setting_overrides: Any,
) -> ResetWorld:
    """An executor over a FakeKube holding ConnectCluster ``main`` (at :data:`URL`) and a
    FakeConnect there. ``kafka``: the ConnectCluster has ``spec.kafka`` (the executor then
    reaches a FakeKafka, which also holds the sinks' consumer groups); without it the reset has
    no Kafka access (REST strategy only). ``checks``: a reset that succeeds launches its
    lag/balance check."""
    fast_polls(monkeypatch)
    broker = FakeKafka()
    fake = FakeConnect(version=version, kafka=broker if kafka else None)
    kube = FakeKube()
    cluster: dict[str, Any] = {"restUrl": URL}
    if kafka:
        cluster["kafka"] = {"bootstrapServers": BOOTSTRAP}
    kube.add_connect_cluster(NAMESPACE, CLUSTER, cluster)

    config = settings(**setting_overrides)
    real_kube = cast(KubeClient, kube)  # FakeKube implements ResetKubeApi, what these call
    clusters = ClusterRegistry(real_kube, config, client_factory=client_factory({URL: fake}))
    executor = OffsetResetExecutor(
        real_kube,
        clusters,
        config,
        checks=CheckRunner(real_kube, config, check_defaults(config)) if checks else None,
        max_step_attempts=max_step_attempts,
        stop_timeout=0.05,
        kafka_factory=broker.factory,
        **({"step_deadlines": step_deadlines} if step_deadlines is not None else {}),
    )
    return ResetWorld(executor, kube, fake, broker)
