"""The operator's check path on the real API server: a SparkApplication (real spark-operator CRD)
is created after each change, a harness in the spark-operator controller's role runs the real
PySpark job locally, and the verdict lands on the Connector's status."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.env.servers import ConnectWorker, KubeAPI
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.env.spark.harness import FakeSparkOperator

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
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
    sink = "sink"
    check = {"samples": 2, "intervalSeconds": 1, "maxLag": 1000}
    fail_second = lambda app: app["metadata"]["name"].endswith("-g2")  # noqa: E731
    with FakeSparkOperator(
        kube_client,
        k8s.ns,
        kubeconfig_path=kube.kubeconfig_path,
        fail_submission=fail_second,
        log_dir=tmp_path / "spark",
    ) as harness:
        k8s.create(
            "connectors",
            sink,
            {
                "clusterRef": {"name": "main"},
                "class": SINK,
                "config": {"file": str(tmp_path / "out.txt"), "topics": topic},
                "check": check,
            },
            "Connector",
        )
        k8s.wait_condition("connectors", sink, "Ready", "True")
        app = f"{sink}-check-g1"
        harness.wait_for_state(app, "COMPLETED", timeout=240)
        states = harness.transitions(app)
        assert states[0] == "SUBMITTED"
        assert states.index("RUNNING") < states.index("COMPLETED")

        custom = kubernetes.client.CustomObjectsApi(kube_client)
        obj = custom.get_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", k8s.ns, "sparkapplications", app)
        assert obj["spec"]["type"] == "Python"
        assert obj["metadata"]["ownerReferences"][0]["name"] == sink
        args = obj["spec"]["arguments"]
        assert args[args.index("--connector") + 1] == sink
        assert args[args.index("--max-lag") + 1] == "1000"

        # the next resync reads the verdict and publishes it
        last = wait_for(
            lambda: (
                (k8s.get("connectors", sink)["status"].get("lastCheck") or {}).get("verdict")
                and k8s.get("connectors", sink)["status"]["lastCheck"]
            ),
            60,
            "verdict on status",
        )
        cm = k8s.core.read_namespaced_config_map(f"{app}-verdict", k8s.ns)
        verdict = json.loads(cm.data["verdict.json"])
        assert last["application"] == app
        assert last["state"] == "COMPLETED"
        assert last["verdict"] == verdict["verdict"]
        assert last["headline"] == {k: v for k, v in verdict["headline"].items() if v is not None}
        lag = k8s.condition("connectors", sink, "LagHealthy")
        balanced = k8s.condition("connectors", sink, "PartitionsBalanced")
        assert lag is not None
        assert balanced is not None
        if verdict["verdict"] == "HEALTHY":
            assert lag["status"] == "True"
            assert balanced["status"] in ("True", "Unknown")

        # a second change gets its own application; this one fails to submit
        k8s.patch_spec("connectors", sink, {"consumerOverrides": {"max.poll.records": 50}})
        harness.wait_for_state(f"{sink}-check-g2", "FAILED", timeout=60)
        k8s.wait_condition("connectors", sink, "LagHealthy", "Unknown", reason="CheckFailed")
        status = k8s.get("connectors", sink)["status"]
        assert status["lastCheck"]["application"] == f"{sink}-check-g2"
        assert status["lastCheck"]["state"] == "FAILED"
        assert status["lastCheck"]["reasons"]
        # a failing check never undoes the change
        assert k8s.condition("connectors", sink, "Ready")["status"] == "True"  # type: ignore[index]
