"""The operator's check path on the real API server: a SparkApplication (real spark-operator CRD)
is created after each change, a harness in the spark-operator controller's role runs the real
PySpark job locally, and the verdict lands on the Connector's status."""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from connectops_check.cli import parser
from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.env.servers import ConnectWorker, KubeAPI
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.env.spark.harness import FakeSparkOperator

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def parse_member(arguments: list[str], each: str) -> argparse.Namespace:
    """One ``--each`` member's arguments as the job parses them: over the common ones."""
    common = parser().parse_args(arguments)
    return parser().parse_args(shlex.split(each), namespace=copy.copy(common))


SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="session")
def spark_crd(kube_client: Any) -> None:
    apply_sparkapplication_crd(kube_client)


def test_check_runs_after_each_change_and_reports(
    k8s: K8s, spark_crd: None, kube: KubeAPI, kube_client: Any, connect: ConnectWorker, tmp_path: Path
) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    topic = f"chk-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line {i}\n" for i in range(20)))
    k8s.create(
        "connectors",
        "feed",
        {
            "clusterRef": {"name": "main"},
            "class": SOURCE,
            "config": {"file": str(src), "topic": topic},
            "check": {"enabled": False},
        },
        "Connector",
    )
    sink, other = "sink", "sink-b"
    check = {"samples": 2, "intervalSeconds": 1, "maxLag": 1000}
    # the first application runs; any later one fails to submit
    seen: list[str] = []

    def fail_later(app: dict[str, Any]) -> bool:
        name = app["metadata"]["name"]
        if name not in seen:
            seen.append(name)
        return name != seen[0]

    with FakeSparkOperator(
        kube_client,
        k8s.ns,
        kubeconfig_path=kube.kubeconfig_path,
        fail_submission=fail_later,
        log_dir=tmp_path / "spark",
    ) as harness:
        # two sinks of one Connect cluster changed within the batch window: one application.
        # A check is asked for once its change has settled. Two sinks created together settle
        # a rebalance or more apart, which on a loaded machine outlasted the window (CI32 at
        # 5 s; CI54 at 10 s, 11.3 s apart), so they are created paused, without checks, and the
        # change is resuming both at once: a resume settles without a rebalance.
        for name, out in ((sink, "out.txt"), (other, "out-b.txt")):
            k8s.create(
                "connectors",
                name,
                {
                    "clusterRef": {"name": "main"},
                    "class": SINK,
                    "config": {"file": str(tmp_path / out), "topics": topic},
                    "state": "paused",
                    "check": {"enabled": False},
                },
                "Connector",
            )
        for name in (sink, other):
            k8s.wait_condition("connectors", name, "Ready", "True")
        assert all(not k8s.get("connectors", name)["status"].get("lastCheck") for name in (sink, other))
        for name in (sink, other):
            checked = {**check, "enabled": True, "maxLag": 1000 if name == sink else 2000}
            k8s.patch_spec("connectors", name, {"state": "running", "check": checked})
        queued = {
            name: wait_for(
                lambda name=name: (k8s.get("connectors", name)["status"].get("lastCheck") or {}).get("application"),
                60,
                f"{name}'s check requested",
            )
            for name in (sink, other)
        }
        app = queued[sink]
        assert queued[other] == app
        harness.wait_for_state(app, "COMPLETED", timeout=240)
        states = harness.transitions(app)
        assert states[0] == "SUBMITTED"
        assert states.index("RUNNING") < states.index("COMPLETED")

        custom = kubernetes.client.CustomObjectsApi(kube_client)
        obj = custom.get_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", k8s.ns, "sparkapplications", app)
        assert obj["spec"]["type"] == "Python"
        assert sorted(o["name"] for o in obj["metadata"]["ownerReferences"]) == [sink, other]
        args = obj["spec"]["arguments"]
        members = [parse_member(args, each) for each in parser().parse_args(args).each]
        assert sorted(m.connector for m in members) == [sink, other]
        for member in members:
            assert member.max_lag == (1000 if member.connector == sink else 2000)
        assert sum(1 for name in seen if name == app) == 1  # one application for both changes

        # the next resync reads each connector's own verdict and publishes it
        for name in (sink, other):
            last = wait_for(
                lambda name=name: (
                    (k8s.get("connectors", name)["status"].get("lastCheck") or {}).get("verdict")
                    and k8s.get("connectors", name)["status"]["lastCheck"]
                ),
                60,
                f"verdict on {name}'s status",
            )
            cm = k8s.core.read_namespaced_config_map(last["verdictConfigMap"], k8s.ns)
            verdict = json.loads(cm.data["verdict.json"])
            assert verdict["connector"] == name
            assert verdict["settings"]["maxLag"] == (1000 if name == sink else 2000)
            assert last["application"] == app
            assert last["state"] == "COMPLETED"
            assert last["verdict"] == verdict["verdict"]
            assert last["headline"] == {k: v for k, v in verdict["headline"].items() if v is not None}
            lag = k8s.condition("connectors", name, "LagHealthy")
            balanced = k8s.condition("connectors", name, "PartitionsBalanced")
            assert lag is not None
            assert balanced is not None
            if verdict["verdict"] == "HEALTHY":
                assert lag["status"] == "True"
                assert balanced["status"] in ("True", "Unknown")

        # a second change gets an application of its own; this one fails to submit
        k8s.patch_spec("connectors", sink, {"consumerOverrides": {"max.poll.records": 50}})
        second = wait_for(
            lambda: (
                (k8s.get("connectors", sink)["status"].get("lastCheck") or {}).get("application") not in (None, app)
                and k8s.get("connectors", sink)["status"]["lastCheck"]["application"]
            ),
            60,
            "the second check requested",
        )
        harness.wait_for_state(second, "FAILED", timeout=60)
        k8s.wait_condition("connectors", sink, "LagHealthy", "Unknown", reason="CheckFailed")
        status = k8s.get("connectors", sink)["status"]
        assert status["lastCheck"]["application"] == second
        assert status["lastCheck"]["state"] == "FAILED"
        assert status["lastCheck"]["reasons"]
        # the other connector's verdict stands
        assert k8s.get("connectors", other)["status"]["lastCheck"]["state"] == "COMPLETED"
        # a failing check never undoes the change
        assert k8s.condition("connectors", sink, "Ready")["status"] == "True"  # type: ignore[index]


def test_check_pods_are_the_platform_teams_choice(
    k8s: K8s, spark_crd: None, kube_client: Any, connect: ConnectWorker, tmp_path: Path
) -> None:
    """Issue 13, finding 12: whoever may write a ConnectCluster asks for the check to run another
    image, an entry file fetched from a URL and a powerful service account; the operator (no
    allowlist set) refuses all three where the author looks, and creates no SparkApplication."""
    asked = {"image": "attacker.example/miner:latest", "serviceAccount": "cluster-admin-sa"}
    asked["mainApplicationFile"] = "https://attacker.example/x.py"
    k8s.create("connectclusters", "greedy", {**connect_cluster_spec(connect), "sparkCheck": asked}, "ConnectCluster")
    cond = k8s.wait_condition("connectclusters", "greedy", "ChecksAllowed", "False", reason="NotAllowed")
    for value in asked.values():
        assert value in cond["message"]
    wait_for(
        lambda: any(e.type == "Warning" and e.reason == "NotAllowed" for e in k8s.events("greedy")),
        30,
        "a Warning Event on the ConnectCluster",
    )
    src = tmp_path / "in.txt"
    src.write_text("one\n")
    k8s.create(
        "connectors",
        "watched",
        {
            "clusterRef": {"name": "greedy"},
            "class": SOURCE,
            "config": {"file": str(src), "topic": f"g-{uuid.uuid4().hex[:6]}"},
            "check": {"enabled": True, "samples": 1, "intervalSeconds": 1},
        },
        "Connector",
    )
    k8s.wait_condition("connectors", "watched", "Ready", "True")
    last = wait_for(lambda: (k8s.get("connectors", "watched").get("status") or {}).get("lastCheck"), 60, "lastCheck")
    assert last["state"] == "NOT_SUBMITTED"
    assert any("sparkCheck.image" in r for r in last["reasons"])
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    apps = custom.list_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", k8s.ns, "sparkapplications")
    assert apps["items"] == []
    # the operator's own defaults stay usable: the same object without the choices is allowed
    k8s.patch_spec("connectclusters", "greedy", {"sparkCheck": None})
    k8s.wait_condition("connectclusters", "greedy", "ChecksAllowed", "True", reason="Allowed")
