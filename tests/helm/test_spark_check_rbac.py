"""The Spark check's ServiceAccount cannot remove offset backups: proved on the real API server.

The check's driver runs in the watched namespace, where the operator keeps its offset backups
(ConfigMaps). Spark's driver would create its executors' ConfigMap and delete it by label at
shutdown, which needs ``list``/``delete``/``deletecollection`` on every ConfigMap there; the
operator's SparkApplications set ``spark.kubernetes.executor.disableConfigMap`` so that Spark
makes neither call, and the chart's Role grants only what the job itself uses (``get`` of its
baseline, ``create``/``patch`` of its verdict). ``patch`` cannot be limited to the verdicts (their
names are not known to a Role), so every backup is created immutable. Here the chart's Role is
applied for real, a TokenRequest token logs in as the ServiceAccount, and every way to remove or
rewrite a backup is tried.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pyspark
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from connectops.adapters.kube import KubeClient
from connectops.models.checks import CheckSpec
from connectops.planning.checks import BUILTIN_DEFAULTS, CheckTarget, spark_application
from connectops.reconcilers.reset_run import backup_name
from tests.env.servers import KubeAPI
from tests.env.spark.crd import apply_sparkapplication_crd
from tests.helm.chart import apply, by_kind, render

pytestmark = pytest.mark.timeout(120)

DISABLE_CONFIGMAP = "spark.kubernetes.executor.disableConfigMap"
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding")


def _sa_client(kube: KubeAPI, admin: client.ApiClient, namespace: str, name: str, path: Path) -> client.ApiClient:
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[KubeAPI.SA_ISSUER], expiration_seconds=3600)
    )
    status: Any = client.CoreV1Api(admin).create_namespaced_service_account_token(name, namespace, request).status
    user = f"system:serviceaccount:{namespace}:{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {
                    "server": kube.url,
                    "certificate-authority-data": base64.b64encode(kube.ca_path.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": status.token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "test", "user": user, "namespace": namespace}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    api: client.ApiClient = kubernetes.config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]
    return api


@pytest.fixture
def installed(kube: KubeAPI, kube_client: client.ApiClient, tmp_path: Path) -> Iterator[tuple[str, client.ApiClient]]:
    """The chart's Spark-check identity in a fresh watched namespace, and a client logged in as it."""
    ns = f"spark-rbac-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(kube_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    objects = render({"watch": {"namespaces": [ns]}}, release="sr", namespace=ns)
    identity = [o for o in objects if o["kind"] in RBAC_KINDS and o["metadata"]["name"].endswith("-spark-check")]
    assert {o["kind"] for o in identity} == set(RBAC_KINDS)
    apply(kube_client, identity)
    [sa] = by_kind(identity, "ServiceAccount")
    api = _sa_client(kube, kube_client, ns, sa["metadata"]["name"], tmp_path / "kubeconfig")
    try:
        yield ns, api
    finally:
        api.close()  # type: ignore[no-untyped-call]


def _status(call: Any) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_the_check_identity_cannot_delete_a_backup(
    kube_client: client.ApiClient, installed: tuple[str, client.ApiClient]
) -> None:
    ns, api = installed
    admin = client.CoreV1Api(kube_client)
    name = backup_name(ns, "r", str(uuid.uuid4()))
    # written as the operator writes every backup (and every piece of a chunked one)
    created = asyncio.run(
        KubeClient(kube_client).create_config_map(ns, name, data={"backup.json": '{"takenAt": "t0"}'})
    )
    assert created
    core = client.CoreV1Api(api)
    attempts = {
        "delete": lambda: core.delete_namespaced_config_map(name, ns),
        "deletecollection": lambda: core.delete_collection_namespaced_config_map(ns),
        "list": lambda: core.list_namespaced_config_map(ns),
        "update": lambda: core.replace_namespaced_config_map(
            name, ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"backup.json": "{}"})
        ),
        # what Spark's driver would send at shutdown without disableConfigMap
        "deletecollection by Spark's labels": lambda: core.delete_collection_namespaced_config_map(
            ns, label_selector="spark-role=executor"
        ),
    }
    answers = {what: _status(call) for what, call in attempts.items()}
    assert answers == dict.fromkeys(attempts, 403)
    # RBAC lets the identity patch any ConfigMap (its verdicts have names no rule can list), so
    # what stops it rewriting a backup is the backup being immutable: the API server refuses
    # the change (422), whoever asks
    rewrites = {
        "patch data": lambda: core.patch_namespaced_config_map(name, ns, {"data": {"backup.json": "{}"}}),
        "patch binaryData": lambda: core.patch_namespaced_config_map(name, ns, {"binaryData": {"x": "AA=="}}),
        "make it mutable": lambda: core.patch_namespaced_config_map(name, ns, {"immutable": False}),
    }
    assert {what: _status(call) for what, call in rewrites.items()} == dict.fromkeys(rewrites, 422)
    # the backup is still there, untouched
    kept: Any = admin.read_namespaced_config_map(name, ns)
    assert kept.data == {"backup.json": '{"takenAt": "t0"}'}
    assert kept.binary_data is None
    assert kept.immutable is True
    # what the job does need still works: its verdict created, patched on a rerun, read back
    verdict = f"chk-{uuid.uuid4().hex[:6]}-verdict"
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=verdict), data={"verdict.json": "{}"})
    core.create_namespaced_config_map(ns, body)
    core.patch_namespaced_config_map(verdict, ns, {"data": {"verdict.json": '{"verdict": "HEALTHY"}'}})
    read: Any = core.read_namespaced_config_map(verdict, ns)
    assert read.data == {"verdict.json": '{"verdict": "HEALTHY"}'}


def test_the_operators_spark_applications_need_no_executor_configmap(kube_client: client.ApiClient) -> None:
    """Every SparkApplication the operator builds disables the executors' ConfigMap, the real
    CRD accepts it, and the Spark the project runs knows the setting."""
    target = CheckTarget(
        namespace="default",
        owner_kind="Connector",
        owner_name="sink",
        owner_uid=str(uuid.uuid4()),
        owner_api_version="connectops.io/v1alpha1",
        connector="sink",
        connect_url="http://connect:8083",
        bootstrap="kafka:9092",
    )
    manifest = spark_application(target, CheckSpec(), BUILTIN_DEFAULTS, "chk-sink-1", "test")
    assert manifest["spec"]["sparkConf"][DISABLE_CONFIGMAP] == "true"
    apply_sparkapplication_crd(kube_client)
    answer: Any = client.CustomObjectsApi(kube_client).create_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", "default", "sparkapplications", manifest, dry_run="All"
    )
    assert answer["spec"]["sparkConf"] == {DISABLE_CONFIGMAP: "true"}
    # Spark's own config key, as compiled into the spark-kubernetes jar shipped with pyspark
    jars = Path(pyspark.__file__).parent / "jars"
    [jar] = jars.glob("spark-kubernetes_*.jar")
    with zipfile.ZipFile(jar) as archive:
        config = archive.read("org/apache/spark/deploy/k8s/Config$.class")
    assert DISABLE_CONFIGMAP.encode() in config
