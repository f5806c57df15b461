"""Checks enabled where no SparkApplication kind is served: said once, as conditions and one
Event, and nothing written again while nothing changes (over ``FakeKube`` and ``FakeConnect``)."""

from __future__ import annotations

import asyncio

import pytest

from connectops.adapters.kube import KubeObjectMissing
from tests.doubles.connect import FILE_SINK
from tests.reconcilers.world import CLUSTER, NAMESPACE, make_world

pytestmark = pytest.mark.timeout(60)


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
