"""What a change cost (issue 18, item 4), against the real API server and Connect worker.

A config change is measured from Connect's status topic (the REST status never showed this
restart: polled here every 10 ms it said RUNNING throughout, which the test pins); the test reads
that topic itself, independently of the operator, and the figure must equal the records' times.
A reset is measured by polling the REST status (a stopped connector has no tasks, which the REST
status does show); it is checked against when the stop call reached Connect (a pass-through proxy
stamps every request) and against this test's own 10 ms polls: the operator cannot see a task
back before Connect shows it, and its error bound must reach back to that moment.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from connectops.models.base import epoch_of
from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.env.faultproxy import FaultProxy, RecordedRequest
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
#: the operator's clock and the proxy's are the same machine's; what separates them is the
#: proxy forwarding the call and this test's own poll of the status
SLACK = 0.1
#: from the operator's call to the proxy receiving it: on 2 busy cores (CI: two test workers, the
#: API server, Connect's JVM) the operator's event loop was seen 0.19 s late (CI24)
CALL_TRANSIT = 1.0


class StatusPoller:
    """Connect's status for one connector every ``interval`` seconds, straight from the worker."""

    def __init__(self, url: str, connector: str, interval: float = 0.01) -> None:
        self._url = f"{url}/connectors/{connector}/status"
        self._interval = interval
        self.samples: list[tuple[float, list[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StatusPoller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        with httpx.Client(timeout=2) as client:
            while not self._stop.is_set():
                at = time.time()
                try:
                    body = client.get(self._url).json()
                    self.samples.append((at, [t["state"] for t in body.get("tasks", [])]))
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(self._interval)

    def back_after(self, start: float) -> tuple[float, float]:
        """(first sample after ``start`` showing a task not RUNNING, first one after that with
        a task RUNNING): the stop and the return, as Connect showed them."""
        stopped = next(at for at, tasks in self.samples if at >= start and (not tasks or "RUNNING" not in tasks))
        back = next(at for at, tasks in self.samples if at > stopped and "RUNNING" in tasks)
        return stopped, back


def _task_records(worker: ConnectWorker, connector: str, *, after: float) -> list[tuple[float, str]]:
    """(CreateTime, state) of task 0's records in the worker's status topic, oldest first."""
    consumer = Consumer({"bootstrap.servers": worker.bootstrap, "group.id": "t-status", "enable.auto.commit": False})
    found = []
    try:
        partitions = consumer.list_topics(worker.status_topic, timeout=10).topics[worker.status_topic].partitions
        consumer.assign([TopicPartition(worker.status_topic, p, 0) for p in partitions])
        while (msg := consumer.poll(2)) is not None:
            if msg.error() is None and msg.key() == f"status-task-{connector}-0".encode():
                at = msg.timestamp()[1] / 1000
                if at >= after:
                    found.append((at, json.loads(msg.value())["state"]))
    finally:
        consumer.close()
    return sorted(found)


def _calls(proxy: FaultProxy, method: str, path: str) -> list[RecordedRequest]:
    return [
        r
        for r in proxy.requests
        if r.method == method and r.path == path and r.upstream_status is not None and r.upstream_status < 300
    ]


def _check(cost: dict[str, Any], call_at: float, poller: StatusPoller) -> None:
    stopped, back = poller.back_after(call_at)
    first = epoch_of(cost["firstTaskRunningAt"])
    assert first is not None
    # the start is the operator's call, which reached Connect just after it was made
    assert epoch_of(cost["stoppedAt"]) <= call_at <= epoch_of(cost["stoppedAt"]) + CALL_TRANSIT
    # the operator saw a task back no earlier than Connect showed it, and within its error bound
    assert first >= back - SLACK, (first, back)
    assert first - cost["precisionSeconds"] <= back + SLACK, (first, cost["precisionSeconds"], back)
    assert cost["seconds"] >= back - call_at - SLACK
    assert stopped < back


def test_a_config_change_and_a_reset_cost_what_connect_showed(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    with FaultProxy(connect.url) as proxy:
        k8s.create(
            "connectclusters", "costly", {**connect_cluster_spec(connect), "restUrl": proxy.url}, "ConnectCluster"
        )
        name = f"cost-{uuid.uuid4().hex[:6]}"
        src = tmp_path / "in.txt"
        src.write_text("".join(f"line {i}\n" for i in range(20)))
        spec: dict[str, Any] = {
            "clusterRef": {"name": "costly"},
            "class": SOURCE,
            "tasksMax": 1,
            "config": {"file": str(src), "topic": f"cost-{uuid.uuid4().hex[:6]}"},
        }
        k8s.create("connectors", name, spec, "Connector")
        k8s.wait_condition("connectors", name, "Ready", "True")

        with StatusPoller(connect.url, name) as poller:
            # a config change: Connect hands the task a new config, which restarts it
            k8s.patch_spec("connectors", name, {**spec, "config": {**spec["config"], "batch.size": "100"}})
            cost = wait_for(
                lambda: (k8s.get("connectors", name).get("status") or {}).get("lastInterruption"), 60, "a cost"
            )
            put = _calls(proxy, "PUT", f"/connectors/{name}/config")[-1]
            assert (cost["cause"], cost["outcome"]) == ("ConfigUpdated", "Measured"), cost
            # Connect's own record of the restart, read here from its status topic
            records = _task_records(connect, name, after=put.received_at - SLACK)
            stop = next(at for at, state in records if state != "RUNNING")
            back = next(at for at, state in records if state == "RUNNING" and at > stop)
            assert epoch_of(cost["stoppedAt"]) == pytest.approx(stop, abs=0.0015)
            assert epoch_of(cost["firstTaskRunningAt"]) == pytest.approx(back, abs=0.0015)
            assert cost["seconds"] == pytest.approx(back - stop, abs=0.003)
            assert put.received_at - SLACK <= stop
            # ... which the REST status never showed: every 10 ms poll said RUNNING
            assert all(tasks == ["RUNNING"] for at, tasks in poller.samples if put.received_at <= at <= back)
            assert any(e.reason == "Interrupted" for e in k8s.events(name))

            # a reset: stop -> offsets deleted -> resume; the cost runs from the stop call
            k8s.create(
                "offsetresets", f"{name}-reset", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset"
            )
            k8s.wait_condition("offsetresets", f"{name}-reset", "Succeeded", "True", timeout=120)
            [reset_cost] = k8s.get("offsetresets", f"{name}-reset")["status"]["interruptions"]
            stop = _calls(proxy, "PUT", f"/connectors/{name}/stop")[0]
            assert (reset_cost["cause"], reset_cost["outcome"]) == ("OffsetReset", "Measured"), reset_cost
            _check(reset_cost, stop.received_at, poller)
        print(
            f"config change: {cost['seconds']}s (+-{cost['precisionSeconds']}s); "
            f"reset: {reset_cost['seconds']}s (+-{reset_cost['precisionSeconds']}s); {len(poller.samples)} samples"
        )
