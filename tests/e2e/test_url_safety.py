"""URLs that hold credentials, and URLs that lead where the operator must not go, against the
real API server and the real Connect worker.

- A URL with user-info is refused by the API server at create (the CRD's pattern); one stored
  before that pattern existed (Helm never upgrades a chart's CRDs) is refused by the operator, and
  its password appears in no status, Event, log line (at debug level) or SparkApplication.
- Credentials come from Secrets (``basicAuth`` of the REST API and of the worker metrics) and
  reach the check's job as env vars from those Secrets, never in its arguments.
- The allowlist matches hosts as hosts: a name that only looks like an allowed address is refused,
  a listed IPv6 address is admitted; without an allowlist, metadata and the API server's own
  address are refused, by address or by where a name resolves.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import GROUP, VERSION, ConnectREST, K8s, OperatorProcess, connect_cluster_spec, wait_for
from tests.e2e.test_connector_e2e import source_spec
from tests.env.faultproxy import FaultProxy
from tests.env.servers import ConnectWorker, KubeAPI
from tests.env.spark.crd import apply_sparkapplication_crd

CRD = f"connectclusters.{GROUP}"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")


def _namespace(kube_client: Any, prefix: str) -> K8s:
    ns = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    return K8s(kube_client, ns)


def _url_schemas(crd: Any) -> list[dict[str, Any]]:
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return [spec["restUrl"], spec["workerMetrics"]["properties"]["urls"]["items"]]


def _admits_userinfo(k8s: K8s) -> bool:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConnectCluster",
        "metadata": {"name": f"probe-{uuid.uuid4().hex[:6]}", "namespace": k8s.ns},
        "spec": {"restUrl": "http://probe:probe-pw@connect:8083"},
    }
    try:
        k8s.custom.create_namespaced_custom_object(GROUP, VERSION, k8s.ns, "connectclusters", body, dry_run="All")
    except ApiException as exc:
        if exc.status == 422:
            return False
        raise
    return True


@contextlib.contextmanager
def crd_without_url_patterns(kube_client: Any, k8s: K8s) -> Iterator[None]:
    """The ConnectCluster CRD as an older chart installed it (``^https?://`` only), for the
    duration of the block: what is created meanwhile is stored as such an API server stored it."""
    ext: Any = kubernetes.client.ApiextensionsV1Api(kube_client)

    def read() -> dict[str, Any]:
        crd: dict[str, Any] = kube_client.sanitize_for_serialization(ext.read_custom_resource_definition(CRD))
        return crd

    def replace(patterns: list[str]) -> None:
        crd = read()
        for schema, pattern in zip(_url_schemas(crd), patterns, strict=True):
            schema["pattern"] = pattern
        ext.replace_custom_resource_definition(CRD, crd)

    current = [schema["pattern"] for schema in _url_schemas(read())]
    replace(["^https?://"] * len(current))
    try:
        wait_for(lambda: _admits_userinfo(k8s), 30, "the older CRD in force")
        yield
    finally:
        replace(current)
        wait_for(lambda: not _admits_userinfo(k8s), 30, "the current CRD in force again")


def _applications(k8s: K8s) -> list[dict[str, Any]]:
    found: Any = k8s.custom.list_namespaced_custom_object(*SPARK[:2], k8s.ns, SPARK[2])
    items: list[dict[str, Any]] = found["items"]
    return items


def _said(k8s: K8s, objects: list[tuple[str, str]], operator: OperatorProcess) -> str:
    """Everything a reader of the namespace or of the operator's log is shown about these objects."""
    texts = [str(k8s.get(plural, name).get("status")) for plural, name in objects]
    texts += [f"{e.reason} {e.message}" for _, name in objects for e in k8s.events(name)]
    texts += [str(app) for app in _applications(k8s)]
    texts.append(operator.log())
    return "\n".join(texts)


def test_credentials_in_a_url_are_refused_at_admission(kube_client: Any, crds: None) -> None:
    k8s = _namespace(kube_client, "creds")
    for field, spec in (
        ("spec.restUrl", {"restUrl": "http://ops:hunter2@connect:8083"}),
        ("spec.restUrl", {"restUrl": "http://ops@connect:8083"}),
        (
            "spec.workerMetrics.urls",
            {"restUrl": "http://connect:8083", "workerMetrics": {"urls": ["http://scrape:hunter2@connect-0:9404/"]}},
        ),
    ):
        with pytest.raises(ApiException) as refused:
            k8s.create("connectclusters", f"cc-{uuid.uuid4().hex[:6]}", spec, "ConnectCluster")
        assert refused.value.status == 422, refused.value.body
        assert field in str(refused.value.body), refused.value.body
    # credentials from a Secret are what the schema asks for
    k8s.create(
        "connectclusters",
        "from-secrets",
        {
            "restUrl": "http://connect:8083",
            "basicAuth": {"secretName": "connect-creds"},
            "workerMetrics": {"urls": ["http://connect-0:9404/metrics"], "basicAuth": {"secretName": "metrics-creds"}},
        },
        "ConnectCluster",
    )


def test_a_url_with_credentials_that_got_past_admission_is_never_repeated(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> None:
    """The operator upgraded, its CRD not (Helm never upgrades a chart's CRDs): the API server
    admits user-info, the operator refuses it and repeats none of it. (With the new CRD in force,
    an API server without CRD validation ratcheting, as this 1.20 one, refuses every status write
    to such an object: its spec no longer validates.)"""
    apply_sparkapplication_crd(kube_client)
    k8s = _namespace(kube_client, "creds")
    secret = f"hunter2-{uuid.uuid4().hex}"
    worker = connect.url.split("://", 1)[1].rstrip("/")
    clusters = {
        # the allowlist names the worker: the credentials alone make it refused
        "cc-listed": f"http://ops:{secret}@{worker}",
        # and one the allowlist refuses as well (the refusal once repeated it whole)
        "cc-unlisted": f"http://ops:{secret}@127.0.0.1:1",
    }
    operator = OperatorProcess(kube, k8s.ns, tmp_path)
    with crd_without_url_patterns(kube_client, k8s):
        for name, url in clusters.items():
            spec = {
                **connect_cluster_spec(connect),
                "restUrl": url,
                "workerMetrics": {"urls": [f"http://scrape:{secret}@{worker}/metrics"]},
            }
            k8s.create("connectclusters", name, spec, "ConnectCluster")
        # debug: kopf then logs whole object bodies, spec included
        operator.start(env={"CONNECTOPS_ALLOWED_REST_URLS": f"http://{worker}"}, args=["--log-level", "debug"])
        try:
            objects = [("connectclusters", name) for name in clusters]
            for name in clusters:
                connector = f"via-{name}"
                objects.append(("connectors", connector))
                spec = source_spec(tmp_path, cluster=name, check={"enabled": True})
                k8s.create("connectors", connector, spec, "Connector")
            for name in clusters:
                ready = k8s.wait_condition("connectclusters", name, "Ready", "False", reason="InvalidSpec", timeout=90)
                assert "must not hold credentials" in ready["message"]
                valid = k8s.wait_condition(
                    "connectors", f"via-{name}", "Valid", "False", reason="InvalidSpec", timeout=90
                )
                assert "credentials" in valid["message"]

            def warnings() -> int:
                return sum(e.type == "Warning" for _, name in objects for e in k8s.events(name))

            wait_for(lambda: warnings() >= 4, 60, "Warning Events of both clusters and both Connectors")
            time.sleep(6)  # another resync (3 s) and retry (5 s at most) of each
            said = _said(k8s, objects, operator)
            assert "is in progress: {" in said  # kopf's debug lines, with the bodies, are in there
            assert "[redacted]@" in said
            assert secret not in said
            # and no request with them: the worker holds no connector of theirs
            for name in clusters:
                assert not ConnectREST(connect).exists(f"via-{name}")
        finally:
            operator.stop()


def test_credentials_reach_the_check_through_secrets_only(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> None:
    apply_sparkapplication_crd(kube_client)
    k8s = _namespace(kube_client, "creds")
    connect_pw, metrics_pw = f"connect-{uuid.uuid4().hex}", f"metrics-{uuid.uuid4().hex}"
    k8s.create_secret("connect-creds", {"username": "ops", "password": connect_pw})
    k8s.create_secret("metrics-creds", {"user": "scraper", "pw": metrics_pw})
    spec = {
        **connect_cluster_spec(connect),
        # the test worker asks for no login: it ignores the header, the operator still sends it
        "basicAuth": {"secretName": "connect-creds"},
        "workerMetrics": {
            "urls": [f"{connect.url}/metrics"],
            "basicAuth": {"secretName": "metrics-creds", "usernameKey": "user", "passwordKey": "pw"},
        },
    }
    k8s.create("connectclusters", "main", spec, "ConnectCluster")
    operator = OperatorProcess(kube, k8s.ns, tmp_path)
    operator.start(args=["--log-level", "debug"])
    try:
        k8s.wait_condition("connectclusters", "main", "Ready", "True", timeout=90)
        k8s.create("connectors", "feed", source_spec(tmp_path, check={"enabled": True}), "Connector")
        k8s.wait_condition("connectors", "feed", "Ready", "True", timeout=90)

        def application() -> dict[str, Any] | None:
            items = _applications(k8s)
            return items[0] if items else None

        app = wait_for(application, 90, "the check's SparkApplication")
        arguments = app["spec"]["arguments"]
        assert f"--connect-url={connect.url}" in arguments
        assert "--connect-auth-env=CONNECTOPS_CONNECT_USERNAME:CONNECTOPS_CONNECT_PASSWORD" in arguments
        assert "--metrics-auth-env=CONNECTOPS_METRICS_USERNAME:CONNECTOPS_METRICS_PASSWORD" in arguments
        env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in app["spec"]["driver"]["env"]}
        assert env["CONNECTOPS_CONNECT_PASSWORD"] == {"name": "connect-creds", "key": "password"}
        assert env["CONNECTOPS_METRICS_PASSWORD"] == {"name": "metrics-creds", "key": "pw"}
        assert "env" not in app["spec"]["executor"]
        said = _said(k8s, [("connectclusters", "main"), ("connectors", "feed")], operator)
        assert connect_pw not in said
        assert metrics_pw not in said
    finally:
        operator.stop()


def test_metadata_and_the_api_server_are_refused_by_default(k8s: K8s, kube: KubeAPI, connect: ConnectWorker) -> None:
    """The session's operator runs without an allowlist: these are refused, the worker on
    127.0.0.1 (another port of the API server's host) is not."""
    refused = {
        "metadata": ("http://169.254.169.254/latest", "link-local"),
        "metadata-v6": ("http://[fd00:ec2::254]/latest", "metadata"),
        "api-server": (kube.url, "API server"),
        # a name: refused where it resolves, as the connection would be made
        "api-server-by-name": (f"https://localhost:{kube.port}", "resolves to 127.0.0.1"),
        "api-service": ("https://kubernetes.default.svc", "API server"),
    }
    for name, (url, _) in refused.items():
        k8s.create("connectclusters", name, {**connect_cluster_spec(connect), "restUrl": url}, "ConnectCluster")
    k8s.create("connectclusters", "worker", connect_cluster_spec(connect), "ConnectCluster")
    for name, (_, why) in refused.items():
        condition = k8s.wait_condition("connectclusters", name, "Ready", "False", reason="URLNotAllowed", timeout=90)
        assert why in condition["message"], condition
        assert "settings.allowedRestUrls" in condition["message"]
    k8s.wait_condition("connectclusters", "worker", "Ready", "True", timeout=90)


def test_the_allowlist_matches_hosts_as_hosts(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> None:
    k8s = _namespace(kube_client, "hosts")
    port = connect.url.rsplit(":", 1)[1].rstrip("/")
    with FaultProxy(connect.url, host="::1") as v6:
        allowlist = f"http://127.0.0.*:{port},http://[::1]:{v6.port}"
        operator = OperatorProcess(kube, k8s.ns, tmp_path)
        operator.start(env={"CONNECTOPS_ALLOWED_REST_URLS": allowlist})
        try:
            clusters = {
                "v6": f"http://[::1]:{v6.port}",
                # what the old glob admitted, and the operator then resolved and called
                "lookalike": f"http://127.0.0.1.attacker.example:{port}",
                # the glob is no entry of the grammar: it admits nothing, not even this
                "glob": f"http://127.0.0.1:{port}",
            }
            for name, url in clusters.items():
                k8s.create("connectclusters", name, {**connect_cluster_spec(connect), "restUrl": url}, "ConnectCluster")
            k8s.wait_condition("connectclusters", "v6", "Ready", "True", timeout=90)
            assert v6.requests, "the IPv6 worker address was called"
            for name in ("lookalike", "glob"):
                condition = k8s.wait_condition(
                    "connectclusters", name, "Ready", "False", reason="URLNotAllowed", timeout=90
                )
                assert "is not among the URLs" in condition["message"]
                assert "ignored: 'http://127.0.0.*" in condition["message"]
            assert "admits nothing" in operator.log()
        finally:
            operator.stop()
