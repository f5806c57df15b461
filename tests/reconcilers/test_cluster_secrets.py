"""ClusterRegistry reads the Secrets a ConnectCluster names: each once, all at once, and a missing
one reported as the first of them in the spec's order (a reset reads its cluster afresh while
its connector still runs, so these reads are on its path to the stop)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from connectops.adapters.connect_rest import ConnectApi
from connectops.adapters.kube import KubeClient, SecretKeyMissing
from connectops.reconcilers.clusters import ClusterRegistry
from tests.doubles.connect import FakeConnect
from tests.doubles.kube import FakeKube
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, settings

pytestmark = pytest.mark.timeout(30)

SPEC = {
    "restUrl": URL,
    "basicAuth": {"secretName": "shared"},
    "kafka": {
        "bootstrapServers": "kafka:9092",
        "config": {"security.protocol": "SASL_SSL"},
        "configFrom": {
            "sasl.password": {"name": "shared", "key": "kafka"},
            "ssl.key.password": {"name": "keys", "key": "pw"},
        },
    },
}


def registry(kube: FakeKube, built: list[tuple[str, str] | None]) -> ClusterRegistry:
    def factory(base_url: str, *, auth: tuple[str, str] | None, **_: Any) -> ConnectApi:
        built.append(auth)
        return FakeConnect()

    return ClusterRegistry(cast(KubeClient, kube), settings(), client_factory=factory)


async def test_each_secret_is_read_once_and_the_reads_overlap() -> None:
    kube = FakeKube()
    kube.add_connect_cluster(NAMESPACE, CLUSTER, SPEC)
    kube.add_secret(NAMESPACE, "shared", {"username": "ops", "password": "pw-connect", "kafka": "pw-kafka"})
    kube.add_secret(NAMESPACE, "keys", {"pw": "pw-key"})
    in_flight, most = 0, 0
    original = kube.secret_values

    async def counted(namespace: str, name: str, keys: list[str]) -> dict[str, str]:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        try:
            return await original(namespace, name, keys)
        finally:
            in_flight -= 1

    kube.secret_values = counted  # type: ignore[method-assign]
    built: list[tuple[str, str] | None] = []
    handle = await registry(kube, built).resolve(NAMESPACE, CLUSTER, max_age=0)

    reads = [args for method, args in kube.calls if method == "secret_values"]
    assert reads == [
        (NAMESPACE, "shared", ("username", "password", "kafka")),
        (NAMESPACE, "keys", ("pw",)),
    ]
    assert most == 2  # at once, not one after the other
    assert built == [("ops", "pw-connect")]
    assert handle.kafka_config == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "pw-kafka",
        "ssl.key.password": "pw-key",
    }
    for value in ("pw-connect", "pw-kafka", "pw-key"):
        assert value not in handle.redactor(f"it was {value}")


async def test_a_missing_key_fails_as_the_first_missing_one_in_the_spec_order() -> None:
    kube = FakeKube()
    kube.add_connect_cluster(NAMESPACE, CLUSTER, SPEC)
    kube.add_secret(NAMESPACE, "shared", {"username": "ops", "password": "pw-connect"})  # no "kafka"
    kube.add_secret(NAMESPACE, "keys", {})  # no "pw" either
    with pytest.raises(SecretKeyMissing) as raised:
        await registry(kube, []).resolve(NAMESPACE, CLUSTER, max_age=0)
    assert str(raised.value) == f"Secret {NAMESPACE}/shared has no key 'kafka'"
    assert "pw-connect" not in str(raised.value)
