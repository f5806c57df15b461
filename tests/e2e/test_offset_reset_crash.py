"""Crash safety: the operator process dies at each step boundary of a reset (``os._exit`` at a
failpoint: no cleanup, no last status write) and a fresh process finishes the reset correctly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from connectops.failpoints import EXIT_CODE
from connectops.planning.offset_reset import Step
from tests.e2e.conftest import (
    ConnectREST,
    K8s,
    OperatorProcess,
    connect_cluster_spec,
    topic_record_count,
    wait_for,
)
from tests.env.servers import ConnectWorker, KubeAPI

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
LINES = ["one", "two", "three", "four"]
STEPS = [s for s in Step if s is not Step.OFFSET_SYNCS]


@pytest.fixture
def crash_env(kube: KubeAPI, kube_client: Any, crds: None, tmp_path: Path) -> Iterator[tuple[K8s, OperatorProcess]]:
    ns = f"crash-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    operator = OperatorProcess(kube, ns, tmp_path)
    yield K8s(kube_client, ns), operator
    operator.stop()


# every step, killed after it acted but before its completion was recorded (the step re-runs:
# idempotence); and, for the steps that leave the connector stopped or its offsets rewritten,
# after the completion was recorded (the next step starts from status: durability). A step's
# completion is written together with the next step's start, so a "done" boundary is the next
# step's start.
BOUNDARIES = [(s, "effects") for s in STEPS] + [(Step.STOP, "done"), (Step.BACKUP, "done"), (Step.RESET, "done")]
# Which step the API server shows Running at each crash: the last one whose start was written.
# The starts of inspect, backup, reset and verify are not written on their own (a lock this
# reset holds is taken again the same way, the backup is found again by name, each offsets call
# is written before it is sent, nothing to redo): they ride on the next write, so a crash in
# them shows the step before, which then runs again. The backup follows the stop: a crash
# anywhere from the stop to the first offsets call shows the stop, which runs again (the
# connector is stopped already) before the backup is found again by name. (A lock taken over
# is written at once: tests/helm/test_rbac_proof.py crashes after one.)
RECORDED = {
    (Step.LOCK, "effects"): Step.LOCK,
    (Step.INSPECT, "effects"): Step.LOCK,
    (Step.STOP, "effects"): Step.STOP,
    (Step.STOP, "done"): Step.STOP,
    (Step.BACKUP, "effects"): Step.STOP,
    (Step.BACKUP, "done"): Step.STOP,
    (Step.RESET, "effects"): Step.RESET,
    (Step.RESET, "done"): Step.RESUME,
    (Step.RESUME, "effects"): Step.RESUME,
    (Step.VERIFY, "effects"): Step.RESUME,
    (Step.UNLOCK, "effects"): Step.UNLOCK,
}


@pytest.mark.parametrize(("step", "when"), BOUNDARIES, ids=str)
def test_reset_survives_a_crash(
    crash_env: tuple[K8s, OperatorProcess], connect: ConnectWorker, tmp_path: Path, step: Step, when: str
) -> None:
    k8s, operator = crash_env
    rest = ConnectREST(connect)
    name = f"c-{uuid.uuid4().hex[:6]}"
    topic = f"crash-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "in.txt"
    src.write_text("".join(f"{line}\n" for line in LINES))

    operator.start(failpoint=f"{step}:{when}")
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": "main"}, "class": SOURCE, "config": {"file": str(src), "topic": topic}},
        "Connector",
    )
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=90)
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == len(LINES), 60, "copied")
    wait_for(lambda: rest.http.get(rest.path(name) + "/offsets").json()["offsets"], 60, "offsets")

    k8s.create("offsetresets", "r", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset")
    code = operator.wait_exit(120)
    assert code == EXIT_CODE, operator.log_tail()
    crashed = k8s.get("offsetresets", "r")["status"]
    assert crashed["phase"] == "Running"
    shown = RECORDED[(step, when)]
    assert crashed["currentStep"] == str(shown)
    recorded = {s["name"]: s["state"] for s in crashed["steps"]}
    assert recorded[str(shown)] == "Running"
    assert [s for s in STEPS if recorded[str(s)] == "Done"] == STEPS[: STEPS.index(shown)]

    operator.start()
    status = wait_for(
        lambda: (s := k8s.get("offsetresets", "r").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s,
        180,
        "reset to finish after restart",
    )
    assert status["phase"] == "Succeeded", status
    steps = {s["name"]: s for s in status["steps"]}
    assert all(steps[str(s)]["state"] == "Done" for s in STEPS)
    # the step recorded Running counts a second attempt, every other step one (an attempt
    # whose start was never written is not counted: it ran again as the first recorded one)
    assert {str(s): steps[str(s)]["attempts"] for s in STEPS} == {str(s): 2 if s is shown else 1 for s in STEPS}
    # the planned final state: offsets reset (the file re-read once), connector running, unlocked
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES), 60, "re-read once")
    assert rest.state(name) == "RUNNING"
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=60)
    leases = kubernetes.client.CoordinationV1Api(k8s.core.api_client).list_namespaced_lease(k8s.ns).items
    assert leases == []
