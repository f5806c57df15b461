"""The real SparkApplication CRD on the test kube-apiserver, and FakeSparkOperator driving it.

Checks that the upstream CRD (tests/env/spark/sparkapplications-crd.yaml) is served by the 1.20
test server (only its ``default: ""`` keys stripped, see tests/env/spark/crd.py), that its schema
rejects malformed SparkApplications, and that the harness moves applications through the
upstream controller's states while running the real ``connectops_check`` job locally.
"""

from __future__ import annotations

import copy
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from connectops_check.synthetic import random_snapshot
from tests.env.servers import KubeAPI
from tests.env.spark.crd import (
    CRD_NAME,
    GROUP,
    KIND,
    PLURAL,
    SOURCE_CHARS,
    VERSION,
    AppliedCRD,
    apply_sparkapplication_crd,
    load_crd,
    strip_empty_string_defaults,
    upstream_text,
)
from tests.env.spark.harness import (
    COMPLETED,
    FAILED,
    FAILING,
    PENDING_RERUN,
    RUNNING,
    SUBMISSION_FAILED,
    SUBMITTED,
    SUCCEEDING,
    FakeSparkOperator,
)

SPARK_JOB_TIMEOUT = 300.0  # one local[2] Spark run takes about 15 s here


@pytest.fixture(scope="module")
def spark_crd(kube_client: Any) -> AppliedCRD:
    return apply_sparkapplication_crd(kube_client)


@pytest.fixture
def namespace(kube_client: Any, spark_crd: AppliedCRD) -> str:
    """A fresh namespace (no namespace controller runs, so it is left behind, harmlessly)."""
    name = f"spark-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))
    )
    return name


@pytest.fixture
def custom(kube_client: Any) -> Any:
    return kubernetes.client.CustomObjectsApi(kube_client)


@pytest.fixture
def operator_factory(kube: KubeAPI, kube_client: Any, tmp_path: Path) -> Iterator[Callable[..., FakeSparkOperator]]:
    started: list[FakeSparkOperator] = []

    def make(namespace: str, **options: Any) -> FakeSparkOperator:
        op = FakeSparkOperator(
            kube_client, namespace, kubeconfig_path=kube.kubeconfig_path, log_dir=tmp_path / "jobs", **options
        )
        started.append(op.start())
        return op

    yield make
    for op in started:
        op.stop()


def spark_app(name: str, arguments: list[str], **spec: Any) -> dict[str, Any]:
    """A v1beta2 Python SparkApplication as the operator would write one."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": "ghcr.io/example/connectops-check:0.1.0",
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": "local:///opt/connectops/check.py",
            "sparkVersion": "3.5.1",
            "arguments": arguments,
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": 1, "memory": "1g", "serviceAccount": "connectops-check"},
            "executor": {"instances": 1, "cores": 1, "memory": "1g"},
            **spec,
        },
    }


def create(custom: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    return result


def read_status(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return dict(obj.get("status") or {})


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


# --- the CRD ----------------------------------------------------------------------------------


def test_crd_file_is_the_upstream_file() -> None:
    text = upstream_text()
    assert len(text) == SOURCE_CHARS
    crd = load_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == CRD_NAME
    [version] = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta2", True, True)
    assert version["subresources"] == {"status": {}}
    assert "x-kubernetes-validations" not in text  # no CEL, which 1.20 would not know


def test_crd_is_served_with_only_empty_string_defaults_stripped(spark_crd: AppliedCRD) -> None:
    expected = load_crd()
    stripped = strip_empty_string_defaults(expected)
    # The 1.20 test server (a go1.19 build, kubernetes/kubernetes#99804) rejects `default: ""`.
    assert set(spark_crd.stripped_defaults) <= set(stripped)
    # ``name`` of the *Ref / LocalObjectReference fields, ``service`` of the gRPC probes
    assert all(p.endswith((".name.default", ".grpc.properties.service.default")) for p in spark_crd.stripped_defaults)
    if spark_crd.stripped_defaults:
        assert len(spark_crd.stripped_defaults) == 47
    else:
        expected = load_crd()
    # Everything else is kept exactly: the server stored the schema, columns and subresource sent.
    assert spark_crd.stored["spec"]["versions"] == expected["spec"]["versions"]
    assert spark_crd.stored["spec"]["names"]["shortNames"] == ["sparkapp"]
    conditions = {c["type"]: c["status"] for c in spark_crd.stored["status"]["conditions"]}
    assert conditions["Established"] == "True"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("driver"), "spec.driver: Required value"),
        (lambda s: s.pop("executor"), "spec.executor: Required value"),
        (lambda s: s.pop("mainApplicationFile"), "spec.mainApplicationFile: Required value"),
        (lambda s: s.pop("sparkVersion"), "spec.sparkVersion: Required value"),
        (lambda s: s.pop("type"), "spec.type: Required value"),
        (lambda s: s.__setitem__("type", "PySpark"), 'spec.type: Unsupported value: "PySpark"'),
        (lambda s: s.__setitem__("mode", "local"), 'spec.mode: Unsupported value: "local"'),
        (lambda s: s.__setitem__("pythonVersion", "4"), 'spec.pythonVersion: Unsupported value: "4"'),
        (lambda s: s["restartPolicy"].__setitem__("type", "Sometimes"), "spec.restartPolicy.type: Unsupported"),
        (lambda s: s["driver"].__setitem__("cores", 0), "spec.driver.cores: Invalid value: 0"),
        (lambda s: s["executor"].__setitem__("instances", 0), "spec.executor.instances: Invalid value: 0"),
        # 1.37 names the item in the path (1.20 said only spec.arguments)
        (lambda s: s.__setitem__("arguments", ["--snapshot", 7]), "spec.arguments[1]: Invalid value"),
    ],
    ids=[
        "no-driver",
        "no-executor",
        "no-mainApplicationFile",
        "no-sparkVersion",
        "no-type",
        "bad-type",
        "bad-mode",
        "bad-pythonVersion",
        "bad-restartPolicy",
        "driver-cores-0",
        "executor-instances-0",
        "non-string-argument",
    ],
)
def test_schema_rejects_invalid_applications(
    custom: Any, namespace: str, mutate: Callable[[dict[str, Any]], object], message: str
) -> None:
    body = spark_app("bad", ["--snapshot", "/x"])
    mutate(body["spec"])
    with pytest.raises(ApiException) as raised:
        create(custom, namespace, body)
    assert raised.value.status == 422
    assert message in json.loads(raised.value.body or "{}")["message"]


def test_schema_prunes_unknown_fields_and_guards_status(custom: Any, namespace: str) -> None:
    body = spark_app("pruned", ["--snapshot", "/x"])
    body["spec"]["checkTimeoutSeconds"] = 60  # not a SparkApplication field
    created = create(custom, namespace, body)
    assert "checkTimeoutSeconds" not in created["spec"]
    assert "status" not in created
    # Status is a subresource: the main endpoint ignores it; status writes need driverInfo.
    created["status"] = {"applicationState": {"state": "COMPLETED"}, "driverInfo": {}}
    replaced = custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pruned", created)
    assert "status" not in replaced
    replaced["status"] = {"applicationState": {"state": "RUNNING"}}
    with pytest.raises(ApiException) as raised:
        custom.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "pruned", replaced)
    assert raised.value.status == 422
    assert "status.driverInfo: Required value" in json.loads(raised.value.body or "{}")["message"]


# --- the harness ------------------------------------------------------------------------------


def test_completed_run_writes_the_verdict_configmap(
    custom: Any, kube_client: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator], tmp_path: Path
) -> None:
    snapshot_path = tmp_path / "snapshot.json"
    random_snapshot(40, samples=8, seed=3).save(snapshot_path)
    app = spark_app("check-orders", ["--snapshot", str(snapshot_path), "--output-configmap", f"{namespace}/verdict"])
    create(custom, namespace, app)
    op = operator_factory(namespace)

    op.wait_for_state("check-orders", COMPLETED, timeout=SPARK_JOB_TIMEOUT)
    assert op.transitions("check-orders") == [SUBMITTED, RUNNING, SUCCEEDING, COMPLETED]
    status = read_status(custom, namespace, "check-orders")
    assert status["applicationState"] == {"state": COMPLETED}
    assert status["driverInfo"] == {"podName": "check-orders-driver"}
    assert re.fullmatch(r"spark-[0-9a-f]{32}", status["sparkApplicationId"])
    assert uuid.UUID(status["submissionID"])
    assert (status["submissionAttempts"], status["executionAttempts"]) == (1, 1)
    assert parse_time(status["lastSubmissionAttemptTime"]) <= parse_time(status["terminationTime"])
    assert "executorState" not in status
    # the SUBMITTED writes: first without, then (driver pod "pending") with the Spark app id
    submitted = [t.status for t in op.history("check-orders") if t.state == SUBMITTED]
    assert "sparkApplicationId" not in submitted[0]
    assert submitted[-1]["sparkApplicationId"] == status["sparkApplicationId"]
    assert submitted[0]["terminationTime"] is None  # metav1.Time zero value: null, kept (nullable)

    [job] = op.jobs("check-orders")
    assert job.returncode == 0
    assert job.argv[1:3] == ("-m", "connectops_check.cli")
    assert job.argv[-2:] == ("--master", "local[2]")
    configmap = kubernetes.client.CoreV1Api(kube_client).read_namespaced_config_map("verdict", namespace)
    assert configmap.data is not None
    verdict = json.loads(configmap.data["verdict.json"])
    assert verdict["schema"] == "connectops.check/v1"
    assert verdict["verdict"] == "UNHEALTHY"  # the generator always includes STOP/STALL/REWIND
    assert verdict["headline"]["partitions"] == 40
    assert json.loads(job.stdout) == verdict


def test_failing_job_ends_failed_with_stderr_tail(
    custom: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator], tmp_path: Path
) -> None:
    create(custom, namespace, spark_app("check-missing", ["--snapshot", str(tmp_path / "missing.json")]))
    op = operator_factory(namespace)

    final = op.wait_for_state("check-missing", FAILED, timeout=SPARK_JOB_TIMEOUT)
    assert op.transitions("check-missing") == [SUBMITTED, RUNNING, FAILING, FAILED]
    message = final.error_message or ""
    assert message.startswith("driver container failed with ExitCode: 1, Reason: Error\n")
    assert "FileNotFoundError" in message
    status = read_status(custom, namespace, "check-missing")
    assert status["applicationState"]["errorMessage"] == message
    assert status["terminationTime"] is not None


def test_the_driver_gets_the_connect_clusters_kafka_secret_as_the_operator_asks(
    custom: Any, kube_client: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator], tmp_path: Path
) -> None:
    """The operator's own manifest for a ConnectCluster with spec.kafka.configFrom: the driver's
    env names the Secret key, the job's arguments name only the variable, and the job runs with
    the value (without it, the same job refuses its arguments)."""
    from connectops.models.base import SecretKeyRef
    from connectops.models.checks import CheckSpec
    from connectops.planning.checks import BUILTIN_DEFAULTS, CheckTarget, spark_application
    from connectops_check.snapshot import ConnectorKind, Snapshot

    password = f"pw-{uuid.uuid4().hex}"
    kubernetes.client.CoreV1Api(kube_client).create_namespaced_secret(
        namespace,
        kubernetes.client.V1Secret(
            metadata=kubernetes.client.V1ObjectMeta(name="kafka-creds"), string_data={"pw": password}
        ),
    )
    target = CheckTarget(
        namespace=namespace,
        owner_kind="Connector",
        owner_name="src",
        owner_uid="u",
        owner_api_version="connectops.io/v1alpha1",
        connector="files",
        connect_url="http://connect:8083",
        bootstrap="kafka:9092",
        client_config={"sasl.mechanism": "PLAIN"},
        client_config_from={"sasl.password": SecretKeyRef(name="kafka-creds", key="pw")},
    )
    with_env = spark_application(target, CheckSpec(), BUILTIN_DEFAULTS, "check-creds", "test")
    with_env["metadata"].pop("ownerReferences")  # no owner object here
    without_env = json.loads(json.dumps(with_env))
    without_env["metadata"]["name"] = "check-no-env"
    del without_env["spec"]["driver"]["env"]
    snapshot_path = tmp_path / "source.json"
    Snapshot(connector="files", kind=ConnectorKind.SOURCE).save(snapshot_path)  # replayed: no Kafka needed
    create(custom, namespace, with_env)
    create(custom, namespace, without_env)
    op = operator_factory(namespace, extra_args=["--snapshot", str(snapshot_path)])

    done = op.wait_for_state("check-creds", (COMPLETED, FAILED), timeout=SPARK_JOB_TIMEOUT)
    assert done.state == COMPLETED, done.error_message
    failed = op.wait_for_state("check-no-env", FAILED, timeout=SPARK_JOB_TIMEOUT)
    assert [job.returncode for job in op.jobs("check-no-env")] == [2]
    assert "environment variable CONNECTOPS_KAFKA_SASL_PASSWORD is not set" in (failed.error_message or "")
    stored = [
        custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, n)
        for n in ("check-creds", "check-no-env")
    ]
    assert password not in json.dumps(stored)
    # the Secret reaches the driver by name only: the argument names the env var, never a value
    assert "--client-config-env=sasl.password=CONNECTOPS_KAFKA_SASL_PASSWORD" in stored[0]["spec"]["arguments"]


def test_failed_submission_without_retries_ends_failed(
    custom: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator]
) -> None:
    create(custom, namespace, spark_app("check-nosubmit", ["--snapshot", "/x"]))
    op = operator_factory(namespace, fail_submission={"check-nosubmit"})

    final = op.wait_for_state("check-nosubmit", FAILED, timeout=30)
    assert op.transitions("check-nosubmit") == [SUBMISSION_FAILED, FAILED]
    assert (final.error_message or "").startswith("failed to submit spark application: ")
    status = read_status(custom, namespace, "check-nosubmit")
    assert status["submissionAttempts"] == 1
    assert "executionAttempts" not in status  # never submitted: omitempty
    assert "sparkApplicationId" not in status
    assert status["terminationTime"] is not None
    assert status["driverInfo"] == {"podName": "check-nosubmit-driver"}
    assert op.jobs("check-nosubmit") == []


def test_failed_submission_is_retried_per_restart_policy(
    custom: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator]
) -> None:
    policy = {"type": "OnFailure", "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 1}
    create(custom, namespace, spark_app("check-retry", ["--snapshot", "/x"], restartPolicy=policy))
    op = operator_factory(namespace, fail_submission=True)

    op.wait_for_state("check-retry", FAILED, timeout=30)
    states = [t.state for t in op.history("check-retry")]
    assert states == [SUBMISSION_FAILED, SUBMISSION_FAILED, FAILED]
    ids = {t.status["submissionID"] for t in op.history("check-retry")}
    assert len(ids) == 2  # a fresh submission ID per attempt
    assert read_status(custom, namespace, "check-retry")["submissionAttempts"] == 2


def test_failed_run_is_rerun_per_restart_policy(
    custom: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator], tmp_path: Path
) -> None:
    policy = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    args = ["--snapshot", str(tmp_path / "missing.json")]
    create(custom, namespace, spark_app("check-rerun", args, restartPolicy=policy))
    op = operator_factory(namespace)

    op.wait_for_state("check-rerun", FAILED, timeout=SPARK_JOB_TIMEOUT)
    assert op.transitions("check-rerun") == [
        *(SUBMITTED, RUNNING, FAILING, PENDING_RERUN),
        *(SUBMITTED, RUNNING, FAILING, FAILED),
    ]
    status = read_status(custom, namespace, "check-rerun")
    assert (status["executionAttempts"], status["submissionAttempts"]) == (2, 1)
    assert len(op.jobs("check-rerun")) == 2


def test_hang_stays_running_until_deleted(
    custom: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator]
) -> None:
    create(custom, namespace, spark_app("check-hang", ["--snapshot", "/x"]))
    create(custom, namespace, spark_app("check-quick", ["--snapshot", "/x"]))
    op = operator_factory(namespace, hang={"check-hang"}, run_job=False)

    op.wait_for_state("check-hang", RUNNING, timeout=30)
    op.wait_for_state("check-quick", COMPLETED, timeout=30)  # not held up by the hanging one
    time.sleep(2)
    assert read_status(custom, namespace, "check-hang")["applicationState"] == {"state": RUNNING}
    assert op.transitions("check-hang") == [SUBMITTED, RUNNING]

    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "check-hang")
    time.sleep(1.5)
    assert op.transitions("check-hang") == [SUBMITTED, RUNNING]
    assert op.errors == []


def test_existing_status_is_left_alone(
    custom: Any, namespace: str, operator_factory: Callable[..., FakeSparkOperator]
) -> None:
    created = create(custom, namespace, spark_app("check-old", ["--snapshot", "/x"]))
    done = copy.deepcopy(created)
    done["status"] = {"applicationState": {"state": COMPLETED}, "driverInfo": {"podName": "check-old-driver"}}
    custom.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "check-old", done)
    create(custom, namespace, spark_app("check-new", ["--snapshot", "/x"]))
    op = operator_factory(namespace, run_job=False)

    op.wait_for_state("check-new", COMPLETED, timeout=30)
    assert op.history("check-old") == []
    assert read_status(custom, namespace, "check-old")["applicationState"] == {"state": COMPLETED}
