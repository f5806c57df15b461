"""Checks enabled where no SparkApplication kind is served: said once, as conditions and one
Event, and nothing written again while nothing changes; once the kind is served, every waiting
Connector asks its check again, once, in one batch, and its conditions follow that check (over
``FakeKube`` and ``FakeConnect``). The discovery probe behind it runs only while a check waits."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import shlex
import time
from typing import Any, cast

import pytest
from kubernetes import client

from connectops.adapters.kube import KubeClient, KubeObjectMissing, KubeUnavailable
from connectops.planning.checks import NOT_SERVED, SPARK_GROUP, SPARK_PLURAL, SPARK_VERSION
from connectops.reconcilers.check_kind import KindProbe
from connectops.reconcilers.checks import ASKS_AGAIN, CheckRunner, check_defaults
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.connector import ConnectorReconciler
from connectops_check.cli import parser
from tests.doubles.connect import FILE_SINK, FakeConnect, client_factory
from tests.doubles.kube import FakeKube
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, World, make_world, settings

pytestmark = pytest.mark.timeout(60)

SPARK = (SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL)
WINDOW = 0.05
#: the probe's first delay here (the operator's: check_kind.FIRST_SECONDS); the cap is the
#: resync period, 0 in these worlds, so every look is this far apart
FIRST = 0.05


def _spec(name: str) -> dict[str, Any]:
    return {"clusterRef": {"name": CLUSTER}, "class": FILE_SINK, "config": {"topics": name, "file": f"/out/{name}"}}


class Process:
    """One operator process over shared servers: its reconciler, and the uids it woke."""

    def __init__(self, kube: FakeKube, workers: dict[str, FakeConnect]) -> None:
        config = settings(checks_enabled=True, check_batch_window_seconds=WINDOW)
        real_kube = cast(KubeClient, kube)  # FakeKube implements what these call
        clusters = ClusterRegistry(real_kube, config, client_factory=client_factory(workers))
        self.checks = CheckRunner(real_kube, config, check_defaults(config), kind_first_seconds=FIRST)
        self.woken: list[str] = []
        self.checks.batches.wake = self.woken.append  # the operator's: a pass of that object now
        self.reconciler = ConnectorReconciler(real_kube, clusters, config, self.checks)

    def world(self, kube: FakeKube, workers: dict[str, FakeConnect], body: dict[str, Any] | None = None) -> World:
        return World(self.reconciler, kube, workers, body=body or {})


def _servers() -> tuple[FakeKube, dict[str, FakeConnect]]:
    kube = FakeKube()
    kube.add_connect_cluster(NAMESPACE, CLUSTER, {"restUrl": URL, "kafka": {"bootstrapServers": "kafka:9092"}})
    kube.not_served.add(SPARK)
    return kube, {URL: FakeConnect()}


def _creates(kube: FakeKube) -> int:
    return len([c for c in kube.calls if c[0] == "create_object" and c[1][1] == SPARK_PLURAL])


def _looks(kube: FakeKube) -> int:
    return len([c for c in kube.calls if c[0] == "serves"])


def _apps(kube: FakeKube) -> list[dict[str, Any]]:
    return [obj for (_, plural, _), obj in sorted(kube.objects.items()) if plural == SPARK_PLURAL]


def _checked(app: dict[str, Any]) -> list[str]:
    """The connectors the job checks, as its parser reads the application's arguments."""
    common = parser().parse_args(app["spec"]["arguments"])
    return sorted(parser().parse_args(shlex.split(each), namespace=copy.copy(common)).connector for each in common.each)


async def _until(what: str, done: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _resync(worlds: list[World]) -> None:
    for world in worlds:
        await world.reconcile(periodic=True)


async def test_a_check_that_cannot_be_submitted_is_said_once() -> None:
    world = make_world(checks_enabled=True, check_batch_window_seconds=0.05)
    world.kube.connect_clusters[(NAMESPACE, CLUSTER)]["spec"]["kafka"] = {"bootstrapServers": "kafka:9092"}
    not_served = KubeObjectMissing("sparkapplications.sparkoperator.k8s.io is not served")
    world.kube.fail_next("create_object", not_served, times=100)
    world.apply({"clusterRef": {"name": CLUSTER}, "class": FILE_SINK, "config": {"topics": "orders", "file": "/out"}})
    await world.reconcile()
    for _ in range(13):
        await asyncio.sleep(0.1)  # past the batch window: the batch is refused by the first look
        await world.reconcile(periodic=True)

    assert world.reasons()["LagHealthy"] == ("Unknown", "CheckNotSubmitted")
    assert world.reasons()["PartitionsBalanced"] == ("Unknown", "CheckNotSubmitted")
    assert world.status["lastCheck"]["state"] == "NOT_SUBMITTED"
    # one try at the kind, one Event for it, and the status written when it was refused only
    assert len([c for c in world.kube.calls if c[0] == "create_object"]) == 1
    assert [reason for _, reason in world.event_reasons()].count("CheckNotSubmitted") == 1
    written = [sorted(patch) for patch in world.patches[1:] if patch]
    assert written == [["conditions", "lastCheck"]]
    await world.reconciler._checks.batches.close()


async def test_the_kind_appearing_asks_each_waiting_check_once_in_one_batch() -> None:
    kube, workers = _servers()
    process = Process(kube, workers)
    worlds = [process.world(kube, workers) for _ in range(3)]
    for i, world in enumerate(worlds):
        world.apply(_spec(f"sink{i}"), name=f"sink{i}")
        await world.reconcile()
    uids = sorted(w.body["metadata"]["uid"] for w in worlds)
    assert _looks(kube) == 0  # nothing waits on the kind yet: nothing is probed
    # the window closes, the batch is refused, and its members are woken to say so now
    await _until("the refusal", lambda: sorted(process.woken) == uids)
    assert _creates(kube) == 1

    for _ in range(3):  # resyncs while the kind stays absent: said once, probed, not asked again
        await _resync(worlds)
        await asyncio.sleep(2 * FIRST)
    for world in worlds:
        assert world.status["lastCheck"]["state"] == "NOT_SUBMITTED"
        assert world.status["lastCheck"]["reasons"] == [NOT_SERVED]
        lag = world.condition("LagHealthy")
        assert (lag["status"], lag["reason"]) == ("Unknown", "CheckNotSubmitted")
        assert lag["message"].endswith(ASKS_AGAIN)
        assert [reason for _, reason in world.event_reasons()].count("CheckNotSubmitted") == 1
        assert [sorted(p) for p in world.patches[1:] if p] == [["conditions", "lastCheck"]]
    assert _creates(kube) == 1
    looks_absent = _looks(kube)
    assert looks_absent >= 2

    kube.not_served.clear()  # the spark-operator is installed
    await _until("the probe to wake every waiting Connector", lambda: len(process.woken) == 2 * len(uids))
    assert sorted(process.woken[len(uids) :]) == uids
    await _resync(worlds)  # the woken passes
    assert {w.status["lastCheck"]["state"] for w in worlds} == {"QUEUED"}
    await _until("the batch launched", lambda: _creates(kube) == 2)
    (app,) = _apps(kube)
    assert _checked(app) == ["sink0", "sink1", "sink2"]  # one SparkApplication for the cluster's checks
    assert {w.status["lastCheck"]["application"] for w in worlds} == {app["metadata"]["name"]}

    looks_after = _looks(kube)
    for _ in range(3):  # nothing waits any more: no probe, and no second request
        await asyncio.sleep(2 * FIRST)
        await _resync(worlds)
    assert _looks(kube) == looks_after
    assert _creates(kube) == 2
    assert {w.status["lastCheck"]["state"] for w in worlds} == {"PENDING"}

    # the spark-operator runs it: the conditions follow this check's verdict
    kube.objects[(NAMESPACE, SPARK_PLURAL, app["metadata"]["name"])]["status"] = {
        "applicationState": {"state": "COMPLETED"}
    }
    for world in worlds:
        verdict = {"verdict": "HEALTHY", "lag": {"total": 3}, "balance": None, "headline": {"totalLag": 3}}
        kube.config_maps[(NAMESPACE, world.status["lastCheck"]["verdictConfigMap"])] = client.V1ConfigMap(
            data={"verdict.json": json.dumps({**verdict, "reasons": []})}
        )
    await _resync(worlds)
    for world in worlds:
        assert world.status["lastCheck"]["state"] == "COMPLETED"
        assert world.reasons()["LagHealthy"] == ("True", "LagOK")
        assert world.reasons()["PartitionsBalanced"] == ("Unknown", "NotApplicable")
    await process.checks.batches.close()


async def _refused_sink(process: Process, kube: FakeKube, workers: dict[str, FakeConnect]) -> World:
    """A sink Connector whose check was refused as not served, and says so in its status."""
    world = process.world(kube, workers)
    world.apply(_spec("sink"), name="sink")
    await world.reconcile()
    await _until("the refusal", lambda: bool(process.woken))
    await world.reconcile(periodic=True)
    assert world.status["lastCheck"]["state"] == "NOT_SUBMITTED"
    return world


async def test_a_new_process_resumes_the_wait_from_the_status() -> None:
    kube, workers = _servers()
    first = Process(kube, workers)
    before = await _refused_sink(first, kube, workers)
    await first.checks.batches.close()  # the process stops; the kind appears while none runs

    kube.not_served.clear()
    looks = _looks(kube)
    second = Process(kube, workers)
    after = second.world(kube, workers, body=copy.deepcopy(before.body))
    await after.reconcile(periodic=True)  # its start-up pass: the status says it waits
    assert _creates(kube) == 1
    await _until("the probe to wake it", lambda: second.woken == [after.body["metadata"]["uid"]])
    assert _looks(kube) == looks + 1
    await after.reconcile(periodic=True)
    await _until("the batch launched", lambda: _creates(kube) == 2)
    for _ in range(3):
        await asyncio.sleep(2 * FIRST)
        await after.reconcile(periodic=True)
    assert _creates(kube) == 2
    assert _looks(kube) == looks + 1
    assert after.status["lastCheck"]["state"] == "PENDING"
    await second.checks.batches.close()


async def test_a_waiting_connector_deleted_or_changed_stops_the_probe() -> None:
    kube, workers = _servers()
    process = Process(kube, workers)
    gone, changed = process.world(kube, workers), process.world(kube, workers)
    gone.apply(_spec("gone"), name="gone")
    changed.apply(_spec("changed"), name="changed")
    await gone.reconcile()
    await changed.reconcile()
    await _until("the refusal", lambda: len(process.woken) == 2)
    await _until("a probe", lambda: _looks(kube) >= 1)
    await gone.delete()
    changed.apply({**_spec("changed"), "state": "paused"})
    await changed.reconcile()  # a new spec: its check is asked now (refused again: it waits again)
    await _until("the second refusal", lambda: len(process.woken) == 3)
    await changed.delete()
    await asyncio.sleep(3 * FIRST)  # the probe's sleep in progress ends, finds no one waiting
    looks = _looks(kube)
    assert not process.checks.batches.kind.probing
    kube.not_served.clear()
    await asyncio.sleep(4 * FIRST)
    assert _looks(kube) == looks
    assert len(process.woken) == 3  # nobody left to wake
    await process.checks.batches.close()


async def test_the_probe_backs_off_to_its_cap_logs_a_failure_once_and_restarts_on_a_new_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    looked: list[float] = []
    answers: list[bool | Exception] = [*[KubeUnavailable("discovery: TimeoutError")] * 4, *[False] * 3, True]

    async def look(timeout: float) -> bool:
        assert timeout > 0  # every read has its deadline
        looked.append(time.monotonic())
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    woken: list[str] = []
    probe = KindProbe(look, woken.append, first_seconds=0.05, cap_seconds=0.2)
    start = time.monotonic()
    with caplog.at_level(logging.INFO, logger="connectops.reconcilers.check_kind"):
        probe.wait("a")
        await _until("five looks", lambda: len(looked) == 5)
        gaps = [b - a for a, b in zip([start, *looked], looked, strict=False)]
        # 0.05, 0.1, 0.2, then the cap (0.2): each at least its delay
        for gap, delay in zip(gaps, (0.05, 0.1, 0.2, 0.2, 0.2), strict=True):
            assert gap >= delay * 0.9, gaps
        assert gaps[0] < 0.15, gaps
        warned = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1, [r.getMessage() for r in warned]  # four failures, one warning
        assert "discovery answers again" in caplog.text
        probe.wait("b")  # a new refusal: the wait in progress ends, the first delay begins
        restarted = time.monotonic()
        await _until("the next look", lambda: len(looked) == 6)
        assert looked[-1] - restarted < 0.15
        await _until("the kind served", lambda: sorted(woken) == ["a", "b"])
    assert probe.take("a")
    assert not probe.take("a")
    await asyncio.sleep(0.3)
    assert len(looked) == 8  # nothing waits: no more looks
    assert not probe.probing
    await probe.close()


async def test_checks_turned_off_while_waiting_end_the_wait() -> None:
    kube, workers = _servers()
    process = Process(kube, workers)
    world = await _refused_sink(process, kube, workers)
    world.apply({**_spec("sink"), "check": {"enabled": False}})
    await world.reconcile()  # no change to Connect: nothing asks a check, and nothing waits any more
    await asyncio.sleep(3 * FIRST)
    looks = _looks(kube)
    kube.not_served.clear()
    for _ in range(3):
        await asyncio.sleep(2 * FIRST)
        await world.reconcile(periodic=True)
    assert _looks(kube) == looks
    assert process.woken == [world.body["metadata"]["uid"]]  # the refusal's only
    assert _creates(kube) == 1
    await process.checks.batches.close()
