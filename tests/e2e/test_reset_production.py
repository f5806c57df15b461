"""A reset's outcome under production timing: the operator at its default resync (60 s) and
retry pace, the worker at Connect's default ``offset.flush.interval.ms`` (60 s).

Two things that the session's fast settings hide, run side by side in one test to keep its
cost to one resync period (each on its own connector and ConnectCluster):

* ``resume: stopped`` on a Connector whose ``spec.state`` is ``running`` is held: Connect
  shows it STOPPED, sampled every 0.5 s from the reset's end until after a resync, and it does
  not copy its file again; once the Connector's spec changes, its spec wins and it runs again.
* a worker that trickles its status answers (a slow-loris response, one byte a second) after
  the stop: the stop step ends at its deadline (90 s), the connector is resumed, its offsets
  are as they were, and the reset says why.

Truth comes from the worker itself (its REST API directly, not through the proxy the operator
talks to, and the topic the source writes), never from the operator's status alone.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import kubernetes
import pytest

from connectops.models.base import epoch_of
from connectops.planning.offset_reset import Step
from connectops.planning.reset_deadlines import STEP_DEADLINE_SECONDS
from connectops.settings import load
from tests.e2e.conftest import OPERATOR_ENV, ConnectREST, K8s, OperatorProcess, connect_cluster_spec, wait_for
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.records import topic_record_count
from tests.env.servers import ConnectWorker, KubeAPI

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
#: what the test harness sets for speed, unset again: an empty value is the setting's default
PRODUCTION = {key: "" for key in OPERATOR_ENV if key != "CONNECTOPS_WATCH_NAMESPACES"}
FLUSH_DEFAULT = {"offset.flush.interval.ms": "60000"}
LINES = [f"line-{i}" for i in range(6)]
STOP_DEADLINE = STEP_DEADLINE_SECONDS[Step.STOP]


@pytest.fixture
def production(kube: KubeAPI, kube_client: Any, crds: None, tmp_path: Path) -> Iterator[tuple[K8s, OperatorProcess]]:
    ns = f"prod-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    operator = OperatorProcess(kube, ns, tmp_path)
    yield K8s(kube_client, ns), operator
    operator.stop()


@pytest.fixture
def worker(connect_factory: Any) -> Iterator[ConnectWorker]:
    started: ConnectWorker = connect_factory("prod-timing", extra_properties=FLUSH_DEFAULT)
    yield started
    started.stop()


def status_of(rest: ConnectREST, name: str) -> tuple[str, int]:
    body = rest.status(name)
    return str(body["connector"]["state"]), len(body["tasks"])


def sample(rest: ConnectREST, name: str, seconds: float) -> list[tuple[str, int]]:
    """Connect's status of ``name`` every 0.5 s for ``seconds``."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.append(status_of(rest, name))
        time.sleep(0.5)
    return seen


def step(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in status["steps"] if s["name"] == name)


def test_resume_stopped_is_held_and_a_trickling_stop_ends_at_its_deadline(
    production: tuple[K8s, OperatorProcess], worker: ConnectWorker, tmp_path: Path
) -> None:
    k8s, operator = production
    with mock.patch.dict(os.environ, PRODUCTION):
        assert load().resync_seconds == 60.0, "the operator under test must resync at the production default"
    operator.start(env=PRODUCTION)
    rest = ConnectREST(worker)
    with FaultProxy(worker.url) as proxy:
        k8s.create("connectclusters", "direct", connect_cluster_spec(worker), "ConnectCluster")
        k8s.create("connectclusters", "loris", {**connect_cluster_spec(worker), "restUrl": proxy.url}, "ConnectCluster")
        k8s.wait_condition("connectclusters", "direct", "Ready", "True", timeout=90)
        k8s.wait_condition("connectclusters", "loris", "Ready", "True", timeout=90)

        # -- the slow-loris reset, started first: it takes its stop deadline ------------------
        loris, loris_topic = f"loris-{uuid.uuid4().hex[:6]}", f"loris-{uuid.uuid4().hex[:6]}"
        loris_file = tmp_path / f"{loris}.txt"
        loris_file.write_text("".join(f"{line}\n" for line in LINES))
        config = {"connector.class": SOURCE, "file": str(loris_file), "topic": loris_topic, "tasks.max": "1"}
        rest.http.put(rest.path(loris) + "/config", json=config).raise_for_status()
        wait_for(lambda: status_of(rest, loris) == ("RUNNING", 1), 60, f"{loris} running")
        wait_for(lambda: topic_record_count(worker.bootstrap, loris_topic) == len(LINES), 60, "lines copied")
        # the stop's answer is held a little, so that the trickle is in place for its first poll
        proxy.add_rule(
            FaultRule(
                "delay", seconds=3.0, method="PUT", path=rf"^/connectors/{loris}/stop$", times=1, after_upstream=True
            )
        )
        k8s.create(
            "offsetresets",
            "loris-reset",
            {"connectorName": loris, "clusterRef": {"name": "loris"}, "action": "reset"},
            "OffsetReset",
        )

        def stopping() -> dict[str, Any] | None:
            status = k8s.get("offsetresets", "loris-reset").get("status") or {}
            return status if status.get("steps") and step(status, "stop")["state"] == "Running" else None

        wait_for(stopping, 60, "loris-reset's stop step")
        trickle = proxy.add_rule(FaultRule.trickle(1.0, method="GET", path=rf"^/connectors/{loris}/status$"))
        loris_before = rest.http.get(rest.path(loris) + "/offsets").json()["offsets"]

        # -- resume: stopped on a Connector that says running --------------------------------
        held, topic = f"held-{uuid.uuid4().hex[:6]}", f"held-{uuid.uuid4().hex[:6]}"
        path = tmp_path / f"{held}.txt"
        path.write_text("".join(f"{line}\n" for line in LINES))
        connector_spec = {
            "clusterRef": {"name": "direct"},
            "class": SOURCE,
            "config": {"file": str(path), "topic": topic},
        }
        k8s.create("connectors", held, connector_spec, "Connector")
        k8s.wait_condition("connectors", held, "Ready", "True", timeout=90)
        wait_for(lambda: topic_record_count(worker.bootstrap, topic) == len(LINES), 60, "lines copied")
        k8s.create(
            "offsetresets",
            "hold",
            {"connectorRef": {"name": held}, "action": "reset", "resume": "stopped"},
            "OffsetReset",
        )
        done = k8s.wait_condition("offsetresets", "hold", "Succeeded", "True", timeout=120)
        ended = time.monotonic()
        # what the reset reports is what the connector does: stopped, and held
        assert "held: Connector" in done["message"]
        assert "keeps it stopped until its spec changes" in done["message"]
        resumed = step(k8s.get("offsetresets", "hold")["status"], "resume")
        assert resumed["state"] == "Done"
        assert "-> stopped (held:" in resumed["message"]

        first = sample(rest, held, 8.0)
        assert first, first
        assert set(first) == {("STOPPED", 0)}, first
        cond = k8s.condition("connectors", held, "ResumeHeld")
        assert cond is not None
        assert cond["status"] == "True", cond
        # on through the operator's next resync (60 s after its last look, at most)
        later = sample(rest, held, 60.0 + 5.0 - (time.monotonic() - ended))
        assert set(later) == {("STOPPED", 0)}, later
        # the reset deleted the offsets: a connector running again would copy the file again
        assert topic_record_count(worker.bootstrap, topic) == len(LINES)

        # -- the slow-loris reset's outcome --------------------------------------------------
        failed = k8s.wait_condition("offsetresets", "loris-reset", "Succeeded", "False", timeout=STOP_DEADLINE + 90)
        assert failed["reason"] == "StopFailed"
        assert f"the stop could not be confirmed within the step's deadline of {STOP_DEADLINE:g} s" in failed["message"]
        assert "Offsets were not changed" in failed["message"]
        assert "the connector(s) were resumed" in failed["message"]
        status = k8s.get("offsetresets", "loris-reset")["status"]
        stop = step(status, "stop")
        took = _epoch(stop["finishedAt"]) - _epoch(stop["firstStartedAt"])
        # the deadline, plus at most the kopf retry that finds it passed (10 s, doubled once)
        assert STOP_DEADLINE - 1 <= took <= STOP_DEADLINE + 25, took
        assert step(status, "reset")["state"] == "Pending"
        assert trickle.fired >= 1
        proxy.clear_rules()
        wait_for(lambda: status_of(rest, loris) == ("RUNNING", 1), 60, f"{loris} resumed")
        assert rest.http.get(rest.path(loris) + "/offsets").json()["offsets"] == loris_before
        assert status.get("changes", []) == []

        # -- the Connector's spec changes: its spec wins, the connector runs again -----------
        k8s.patch_spec("connectors", held, {"config": {"file": str(path), "topic": topic, "batch.size": "100"}})
        wait_for(lambda: status_of(rest, held) == ("RUNNING", 1), 60, f"{held} running after its spec changed")
        k8s.wait_condition("connectors", held, "ResumeHeld", "False", "SpecChanged", timeout=30)


def _epoch(text: str) -> float:
    value = epoch_of(text)
    assert value is not None, text
    return value
