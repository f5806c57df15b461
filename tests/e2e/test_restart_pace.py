"""Automatic restarts at their backoff, with the operator at its production resync period.

The session's operator resyncs every 3 s, so a restart that waited for a resync would still
come within seconds there. This one runs ``connectops run`` on the production defaults (a
resync every 60 s) and reads the restart times from Connect itself: the task status records
Connect writes to its status topic when a task fails and when a restart request reaches it.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import kubernetes
import pytest

from connectops.settings import load
from tests.e2e.conftest import OPERATOR_ENV, ConnectREST, K8s, OperatorProcess, connect_cluster_spec, wait_for
from tests.env.records import records_up_to_now
from tests.env.servers import ConnectWorker, KubeAPI

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
#: what the test harness sets for speed, unset again: an empty value is the setting's default
PRODUCTION = {key: "" for key in OPERATOR_ENV if key != "CONNECTOPS_WATCH_NAMESPACES"}
INITIAL, MAXIMUM, RESTARTS = 2, 4, 3
#: each restart's delay after the one before (the first: after the failure): 2, 4, 4 s
DELAYS = [min(INITIAL * 2**n, MAXIMUM) for n in range(RESTARTS)]
#: how much later than its delay a restart may come: the operator sees the first failure at
#: its next poll of Connect's status (at most 1 s apart), and the look that makes a restart
#: reads the connector before it decides (measured: 0.05-0.25 s late here)
LATE = 2.0
#: how much earlier: the operator times a restart from its own clock after its request, Connect
#: writes its record when it handles that request
EARLY = 0.5


@pytest.fixture
def production(kube: KubeAPI, kube_client: Any, crds: None, tmp_path: Path) -> Iterator[tuple[K8s, OperatorProcess]]:
    ns = f"pace-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    operator = OperatorProcess(kube, ns, tmp_path)
    yield K8s(kube_client, ns), operator
    operator.stop()


def task_records(worker: ConnectWorker, connector: str, task: int = 0) -> list[tuple[float, str]]:
    """(time, state) of every status record Connect wrote for one task, in the order it wrote
    them (one key: one partition, read in offset order); the time is the record's own
    timestamp, set by the worker when it wrote it."""

    key = f"status-task-{connector}-{task}".encode()
    return [
        (msg.timestamp()[1] / 1000, str(json.loads(msg.value())["state"]))
        for msg in records_up_to_now(worker.bootstrap, worker.status_topic)
        if msg.key() == key and msg.value()
    ]


def test_restarts_come_at_their_backoff_with_the_production_resync(
    production: tuple[K8s, OperatorProcess], connect: ConnectWorker, tmp_path: Path
) -> None:
    k8s, operator = production
    with mock.patch.dict(os.environ, PRODUCTION):
        resync = load().resync_seconds
    assert resync == 60.0, "the operator under test must resync at the production default"
    operator.start(env=PRODUCTION)
    started = time.time()
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True", timeout=60)

    name = f"pace-{uuid.uuid4().hex[:6]}"
    # a sink writing to a directory: its task fails in start(), every time it is restarted
    spec = {
        "clusterRef": {"name": "main"},
        "class": SINK,
        "config": {"file": str(tmp_path), "topics": f"t-{uuid.uuid4().hex[:6]}"},
        "autoRestart": {"maxRestarts": RESTARTS, "backoff": {"initialSeconds": INITIAL, "maxSeconds": MAXIMUM}},
    }
    k8s.create("connectors", name, spec, "Connector")
    try:
        try:
            cond = k8s.wait_condition("connectors", name, "Ready", "False", reason="RestartLimitReached", timeout=45)
        except pytest.fail.Exception as exc:
            records = task_records(connect, name)
            shown = [(round(t - started, 2), state) for t, state in records]
            events = [(e.reason, e.message) for e in k8s.events(name)]
            pytest.fail(f"{exc}; Connect's records of task 0 since the start: {shown}; Events: {events}")
        limit_at = time.time()
        assert f"{RESTARTS} automatic restarts" in cond["message"]
        # every restart, and giving up, came before the operator's first resync pass (one
        # period after its start): none of it waited for one
        assert limit_at - started < resync, (limit_at - started, operator.log_tail())
        time.sleep(2 * MAXIMUM)  # bounded: no restart after the limit

        records = task_records(connect, name)
        shown = [(round(t - records[0][0], 2), state) for t, state in records]
        failed = [t for t, state in records if state == "FAILED"]
        restarted = [t for t, state in records if state == "RESTARTING"]
        assert len(restarted) == RESTARTS, shown
        assert failed, shown
        assert failed[0] < restarted[0], shown
        # and each time it failed again
        assert [state for _, state in records if state in ("FAILED", "RESTARTING")][-1] == "FAILED", shown
        gaps = [b - a for a, b in itertools.pairwise([failed[0], *restarted])]
        # the process's own stdout: an in-process operator of the session (KopfRunner) may hold
        # sys.stdout; with -s the measured pace shows
        print(f"restart gaps (s): {[round(g, 2) for g in gaps]}; records: {shown}", file=sys.__stdout__)
        for gap, delay in zip(gaps, DELAYS, strict=True):
            assert delay - EARLY <= gap <= delay + LATE, (gaps, DELAYS, shown)
        # the limit is said once the last restart's task has failed again, at the same pace
        # (this test polls the condition every 0.5 s)
        assert limit_at - restarted[-1] <= MAXIMUM + LATE + 0.5, (limit_at - restarted[-1], shown)

        events = [e for e in k8s.events(name) if e.reason == "Restarted"]
        assert sum(e.count or 1 for e in events) == RESTARTS, [(e.reason, e.message) for e in k8s.events(name)]
        assert k8s.get("connectors", name)["status"]["autoRestart"]["count"] == RESTARTS
    finally:
        k8s.delete("connectors", name)
        wait_for(lambda: not k8s.exists("connectors", name), 60, f"{name} deleted")
        assert not ConnectREST(connect).exists(name)
