"""Secret rotation on the real API server and the real Connect worker (issue 16, item 4).

A Secret is patched in the API server; what counts is what Connect then holds (``GET
/connectors/<name>/config``) and how many config records the worker wrote for the connector (its
config topic: a PUT, and with it a restart, leaves one). A ConnectCluster's rotated basic-auth
credentials are read off the wire: the proxy in front of the worker records a digest of each
request's Authorization header.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, count_config_writes, wait_for
from tests.env.faultproxy import FaultProxy
from tests.env.servers import ConnectWorker

pytestmark = pytest.mark.timeout(240)

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
#: the rotated value must be in Connect within this (the resync, 3 s here, is not what brings it:
#: the Event reason says which path did)
APPLIED_WITHIN = 10.0
#: how long the negative case watches for a write that must not come (more than two resyncs)
QUIET = 8.0


def patch_secret(k8s: K8s, name: str, data: dict[str, str]) -> None:
    k8s.core.patch_namespaced_secret(name, k8s.ns, {"stringData": data})


def reasons(k8s: K8s, name: str) -> list[str]:
    return [str(e.reason) for e in k8s.events(name)]


@pytest.fixture
def cluster(k8s: K8s, connect: ConnectWorker) -> str:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    return "main"


def test_a_rotated_key_reaches_connect_within_seconds_and_another_key_changes_nothing(
    k8s: K8s,
    cluster: str,
    connect: ConnectWorker,
    connect_rest: ConnectREST,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = f"rot-a-{uuid.uuid4().hex[:6]}", f"rot-b-{uuid.uuid4().hex[:6]}"
    canary = f"canary-{uuid.uuid4().hex}"
    k8s.create_secret("creds", {"topic": first, "unrelated": canary})
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\n")
    name = f"rot-{uuid.uuid4().hex[:6]}"
    spec = {
        "clusterRef": {"name": cluster},
        "class": SOURCE,
        "tasksMax": 1,
        "config": {"file": str(src)},
        "configFrom": {"topic": {"secretKeyRef": {"name": "creds", "key": "topic"}}},
    }
    k8s.create("connectors", name, spec, "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    assert connect_rest.config(name)["topic"] == first
    writes = count_config_writes(connect, name)
    assert writes == 1
    tasks_before = connect_rest.status(name)["tasks"]

    # another key of the same Secret: nothing is written to Connect, nothing restarts
    patch_secret(k8s, "creds", {"unrelated": f"{canary}-2"})
    time.sleep(QUIET)
    assert connect_rest.config(name)["topic"] == first
    assert count_config_writes(connect, name) == writes
    assert connect_rest.status(name)["tasks"] == tasks_before
    assert not {"SecretRotated", "ConfigUpdated", "DriftCorrected"} & set(reasons(k8s, name))

    # the key the Connector reads: in Connect within seconds, one write, reported as a rotation
    started = time.monotonic()
    patch_secret(k8s, "creds", {"topic": second})
    wait_for(lambda: connect_rest.config(name)["topic"] == second, APPLIED_WITHIN, "rotated topic in Connect", 0.1)
    seconds = time.monotonic() - started
    event = wait_for(
        lambda: next((e for e in k8s.events(name) if e.reason == "SecretRotated"), None), 10, "SecretRotated"
    )
    assert "creds key topic" in event.message
    assert first not in event.message
    assert second not in event.message
    assert "DriftCorrected" not in reasons(k8s, name)
    k8s.wait_condition("connectors", name, "Ready", "True")
    time.sleep(4)  # a resync later: still the one write
    assert count_config_writes(connect, name) == writes + 1
    sys_out = str(k8s.get("connectors", name)) + " ".join(str(e.message) for e in k8s.events(name))
    assert canary not in sys_out
    assert canary not in caplog.text  # the operator runs in this process: its whole log is here
    print(f"rotated key in Connect after {seconds:.2f} s")


@pytest.fixture
def proxy(connect: ConnectWorker) -> Iterator[FaultProxy]:
    with FaultProxy(connect.url) as p:
        yield p


def basic(user: str, password: str) -> str:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return hashlib.sha256(f"Basic {token}".encode()).hexdigest()


def test_rotated_cluster_credentials_are_used_by_new_calls(
    k8s: K8s, connect: ConnectWorker, proxy: FaultProxy, kube_client: Any
) -> None:
    old, new = f"old-{uuid.uuid4().hex[:8]}", f"new-{uuid.uuid4().hex[:8]}"
    k8s.create_secret("rest-auth", {"username": "ops", "password": old, "note": "a"})
    spec = {**connect_cluster_spec(connect), "restUrl": proxy.url, "basicAuth": {"secretName": "rest-auth"}}
    k8s.create("connectclusters", "auth", spec, "ConnectCluster")
    k8s.wait_condition("connectclusters", "auth", "Ready", "True")
    assert proxy.requests
    assert {r.auth_digest for r in proxy.requests} == {basic("ops", old)}

    # a key the cluster does not read: no new client, no Event
    patch_secret(k8s, "rest-auth", {"note": "b"})
    time.sleep(2)
    assert "SecretRotated" not in reasons(k8s, "auth")

    proxy.clear_requests()
    patch_secret(k8s, "rest-auth", {"password": new})
    wait_for(lambda: any(r.auth_digest == basic("ops", new) for r in proxy.requests), APPLIED_WITHIN, "new credentials")
    event = wait_for(
        lambda: next((e for e in k8s.events("auth") if e.reason == "SecretRotated"), None), 10, "SecretRotated"
    )
    assert "rest-auth key(s) password" in event.message
    assert old not in event.message
    assert new not in event.message
    # from the first call with the new credentials on, no call carries the old ones
    seen = [r.auth_digest for r in proxy.requests]
    after = seen[seen.index(basic("ops", new)) :]
    assert basic("ops", old) not in after
    assert kubernetes.client.CoreV1Api(kube_client).read_namespaced_secret("rest-auth", k8s.ns).data
