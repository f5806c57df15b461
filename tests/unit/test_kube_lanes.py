"""The Kubernetes client's calls hold a thread each; a resync's thousand Lease reads must not
hold the threads a user's change needs (issue 17: the apply benchmark's p99 at 1,000 Connectors
was 8.2 s while the resync's reads queued in one shared pool)."""

from __future__ import annotations

import asyncio
import threading

import kubernetes
import pytest

from connectops.adapters.kube import THREADS, KubeClient
from connectops.concurrency.lanes import background

pytestmark = pytest.mark.timeout(30)


async def test_a_change_never_waits_for_periodic_kube_calls() -> None:
    kube = KubeClient(kubernetes.client.ApiClient())
    release = threading.Event()
    busy = threading.Semaphore(0)

    def held() -> str:
        busy.release()
        release.wait(10)
        return "resync"

    with background():
        # tasks copy the context they are made in: these are periodic work
        queued = [asyncio.ensure_future(kube._call(held, what="Lease")) for _ in range(THREADS * 5)]
    try:
        for _ in range(THREADS):
            assert await asyncio.to_thread(busy.acquire, True, 5)  # every periodic thread is held
        assert await asyncio.wait_for(kube._call(lambda: "change", what="Secret"), 2) == "change"
        assert not any(task.done() for task in queued)
    finally:
        release.set()
    assert set(await asyncio.gather(*queued)) == {"resync"}
