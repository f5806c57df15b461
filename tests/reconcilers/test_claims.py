"""The recorded claims' decisions (connectops.reconcilers.claims) on the Kubernetes double: who
owns a connector when the Lease says one thing and the objects seen say another. End to end,
on a real API server and worker: tests/e2e/test_claims_recorded.py."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from connectops.adapters.kube import KubeClient, KubeError
from connectops.planning.ownership import Claim
from connectops.reconcilers.claims import ClaimRecords, holder_of
from tests.doubles.kube import FakeKube

NS = "connectops"
OLD = Claim("a", "old", "u-old", "2026-01-01T00:00:00Z", "main")
NEW = Claim("b", "new", "u-new", "2026-02-01T00:00:00Z", "theirs")


def _records(kube: FakeKube, namespace: str = NS) -> ClaimRecords:
    return ClaimRecords(cast(KubeClient, kube), namespace)  # FakeKube implements what claims call


def _exists(kube: FakeKube, claim: Claim) -> None:
    kube.objects[(claim.namespace, "connectors", claim.name)] = {
        "metadata": {"namespace": claim.namespace, "name": claim.name, "uid": claim.uid}
    }


def test_the_first_to_record_owns_it_whatever_its_age() -> None:
    kube = FakeKube()
    claims = _records(kube)
    _exists(kube, OLD)
    _exists(kube, NEW)

    async def run() -> None:
        # the younger one was reconciled first and saw nobody: it records the claim
        assert await claims.owner(NEW, "k1", "x", NEW, None, contested=False) is None
        # the older one, seen or not, meets the record and owns nothing
        assert await claims.owner(OLD, "k1", "x", OLD, None, contested=True) == Claim("b", "new", "u-new", "", "")
        # the holder, alone with its record, asks nobody
        before = len(kube.calls)
        assert await claims.owner(NEW, "k1", "x", NEW, claims.record("k1", "x"), contested=False) is None
        assert len(kube.calls) == before
        # contested, it reads the record and still owns it, though an older object is seen
        assert await claims.owner(NEW, "k1", "x", OLD, claims.record("k1", "x"), contested=True) is None
        # another Kafka cluster is another connector
        assert await claims.owner(OLD, "k2", "x", OLD, None, contested=True) is None

    asyncio.run(run())


def test_a_gone_holder_is_taken_over_and_an_unseen_record_defers_to_the_eldest() -> None:
    kube = FakeKube()
    claims = _records(kube)
    _exists(kube, NEW)

    async def run() -> None:
        assert await claims.owner(OLD, "k1", "x", OLD, None, contested=False) is None  # OLD records it
        # OLD's object is deleted with its finalizer stripped: its record is left behind
        assert await claims.owner(NEW, "k1", "x", NEW, None, contested=False) is None
        held = await kube.lock_holder(NS, "claim/kafka/k1", "x")
        assert held is not None
        assert held.holder == holder_of(NEW)
        # no record yet and an older object seen: that one records it at its own pass
        assert await claims.owner(NEW, "k1", "y", OLD, None, contested=True) == OLD
        await claims.release(NEW, claims.record("k1", "x"))
        assert await kube.lock_holder(NS, "claim/kafka/k1", "x") is None

    asyncio.run(run())


def test_a_record_held_by_something_else_is_refused_and_none_recorded_without_a_namespace() -> None:
    kube = FakeKube()

    async def run() -> None:
        await kube.acquire_lock(NS, "claim/kafka/k1", "x", "someone-else", None)
        with pytest.raises(KubeError):
            await _records(kube).owner(OLD, "k1", "x", OLD, None, contested=False)
        unrecorded = _records(kube, "")
        assert await unrecorded.owner(NEW, "k1", "x", OLD, None, contested=True) == OLD
        assert await unrecorded.owner(OLD, "k1", "x", OLD, None, contested=True) is None

    asyncio.run(run())
