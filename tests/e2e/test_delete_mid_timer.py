"""Deleting an object whose periodic timer is mid-run.

kopf keeps an object's finalizer until its timers have stopped, and a timer caught in the middle
of a run stops only when that run ends. kopf then looks again after
``settings.background.cancellation_polling``, 60 s by default: a ConnectCluster or OffsetReset
deleted while its resync waited on a slow worker stayed for a minute more (CI59: an OffsetReset
still there 60 s after its delete). The operator re-checks every second, and a timer still in its
jitter wait when the object is deleted does not start its run.

The run is made slow on purpose: the fault proxy holds the cluster resync's ``GET /health`` for
8 s, and the ConnectCluster is deleted while that request is held.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.servers import ConnectWorker

pytestmark = pytest.mark.e2e

HELD = 8.0


@pytest.fixture
def proxy(connect: ConnectWorker) -> Iterator[FaultProxy]:
    with FaultProxy(connect.url) as p:
        yield p


def test_a_cluster_deleted_mid_resync_goes_once_the_run_ends(
    k8s: K8s, connect: ConnectWorker, proxy: FaultProxy
) -> None:
    k8s.create("connectclusters", "main", {**connect_cluster_spec(connect), "restUrl": proxy.url}, "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True", timeout=60)
    held = proxy.add_rule(FaultRule("delay", method="GET", path=r"^/health$", seconds=HELD))
    # a resync (every 3 s in these tests) has reached GET /health: its run is held for 8 s
    wait_for(lambda: held.fired >= 1, 30, "a resync's GET /health held")
    deleted_at = time.monotonic()
    k8s.delete("connectclusters", "main")
    wait_for(lambda: not k8s.exists("connectclusters", "main"), 90, "cluster deleted")
    took = time.monotonic() - deleted_at
    # the held run ends within 8 s of the delete; a re-check each second follows it. kopf's
    # default re-check would come 60 s after the delete
    assert took < HELD + 10, f"the ConnectCluster went {took:.1f} s after its delete"
    assert held.fired >= 1
