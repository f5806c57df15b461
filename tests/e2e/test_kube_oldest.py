"""The oldest supported Kubernetes release (the chart's ``kubeVersion: >=1.30.0-0``) on a real
kube-apiserver of that release: every CRD installs by server-side apply and is Established, the
CEL rules refuse bad objects at create with their messages and let valid ones through, and an
object stored before a rule that it breaks can still lose its finalizer and be deleted
(validation ratcheting, on by default from 1.30). The cases are test_admission_cel.py's, which
runs them on the session's newest release; the one difference at 1.30 is that a status write
to such an object is refused (the status subresource ratchets only from 1.33).

The 1.30 binary is built from tests/env/kube/apiserver-1.30 by tests/env/kube/build.sh on first
use, not by provision.sh: a session that runs no test of this file pays nothing, and later ones
find it in the provisioning cache. It runs with the session's etcd (the one provision.sh builds).
"""

from __future__ import annotations

import copy
import fcntl
import functools
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.e2e import test_admission_cel as cel
from tests.e2e.conftest import ROOT, VERSION, wait_for
from tests.env.servers import KUBE_MODULES, KubeAPI, MissingTestEnvError, ServerStartError, kube_apiserver_path

#: The newest 1.30 patch release the Go module proxy serves; kept equal to what
#: tests/env/kube/apiserver-1.30/go.mod requires (checked below).
OLDEST: Final = "v1.30.14"
MODULE: Final = KUBE_MODULES / "apiserver-1.30"
#: A cold build compiles the whole apiserver: measured on 2 busy cores (docs/versions.md).
BUILD_TIMEOUT_SECONDS: Final = 2400.0
MANAGER: Final = "connectops-test"

# the cold build runs inside the first test's setup
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(BUILD_TIMEOUT_SECONDS + 300)]


def oldest_apiserver() -> Path:
    """The 1.30 kube-apiserver, built first when it is not in the cache (one build at a time)."""
    binary = kube_apiserver_path(OLDEST)
    binary.parent.mkdir(parents=True, exist_ok=True)
    with binary.with_name(f"{binary.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        done = subprocess.run(
            ["bash", str(KUBE_MODULES / "build.sh"), str(MODULE)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0 or not binary.is_file():
            raise MissingTestEnvError(f"building kube-apiserver {OLDEST} failed:\n{done.stderr[-4000:]}")
        return binary


@pytest.fixture(scope="module")
def oldest(testenv_root: Path) -> Iterator[tuple[KubeAPI, Any]]:
    """An API server of its own at ``OLDEST``, and an admin client of it."""
    try:
        oldest_apiserver()
        api = KubeAPI(testenv_root, name=f"kube-oldest-{uuid.uuid4().hex[:6]}", version=OLDEST).start()
    except (MissingTestEnvError, ServerStartError) as exc:
        pytest.fail(f"kube-apiserver {OLDEST}: {exc}", pytrace=False)
    # Any: this loader and ApiClient.close() are not annotated in the kubernetes package.
    client: Any = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(api.kubeconfig_path)
    )
    try:
        yield api, client
    finally:
        client.close()
        api.stop()


@pytest.fixture(scope="module")
def api(oldest: tuple[KubeAPI, Any]) -> tuple[Any, str]:
    """(client, namespace) with every CRD installed, as test_admission_cel.py's fixture."""
    _, client = oldest
    _apply_crds(client)
    ns = f"adm-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    return client, ns


def _apply_crds(client: Any) -> None:
    ext: Any = kubernetes.client.ApiextensionsV1Api(client)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        name = body["metadata"]["name"]
        # server-side apply, as `kubectl apply --server-side` and GitOps tools install CRDs
        ext.patch_custom_resource_definition(
            name, body, field_manager=MANAGER, force=True, _content_type="application/apply-patch+yaml"
        )
        wait_for(functools.partial(_established, ext, name), 30, f"CRD {name} Established", interval=0.2)


def test_it_is_the_oldest_supported_release(oldest: tuple[KubeAPI, Any]) -> None:
    """The server runs ``OLDEST``, which go.mod pins, at the chart's lower bound."""
    kube, client = oldest
    assert f"\tk8s.io/kubernetes {OLDEST} " in (MODULE / "go.mod").read_text()
    assert kubernetes.client.VersionApi(client).get_code().git_version == OLDEST == kube.version
    chart = yaml.safe_load((ROOT / "helm" / "connectops" / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.30.0-0"


def test_every_crd_installs_and_is_served(api: tuple[Any, str]) -> None:
    client, _ = api
    ext: Any = kubernetes.client.ApiextensionsV1Api(client)
    paths = sorted((ROOT / "crds").glob("*.yaml"))
    assert paths
    for path in paths:
        body = yaml.safe_load(path.read_text())
        served = ext.read_custom_resource_definition(body["metadata"]["name"])
        conditions = {c.type: c.status for c in served.status.conditions or []}
        assert conditions.get("Established") == "True", conditions
        assert conditions.get("NamesAccepted") == "True", conditions
        # no rule dropped: the server keeps every rule the file has
        raw = json.loads(ext.read_custom_resource_definition(body["metadata"]["name"], _preload_content=False).data)
        assert list(_rules(raw["spec"]["versions"])) == list(_rules(body["spec"]["versions"])), path.name
        # and the API serves the kind
        group, plural = body["spec"]["group"], body["spec"]["names"]["plural"]
        version = body["spec"]["versions"][0]["name"]
        listed: Any = kubernetes.client.CustomObjectsApi(client).list_cluster_custom_object(group, version, plural)
        assert listed["kind"] == f"{body['spec']['names']['kind']}List"


def _rules(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "x-kubernetes-validations":
                yield from value
            else:
                yield from _rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rules(value)


@pytest.mark.parametrize(("plural", "spec", "message"), cel.REFUSED, ids=lambda v: v if isinstance(v, str) else None)
def test_rule_refuses_at_create_with_its_message(
    api: tuple[Any, str], plural: str, spec: dict[str, Any], message: str
) -> None:
    cel.test_rule_refuses_at_create_with_its_message(api, plural, spec, message)


@pytest.mark.parametrize(("plural", "spec"), cel.ACCEPTED)
def test_valid_object_is_accepted(api: tuple[Any, str], plural: str, spec: dict[str, Any]) -> None:
    cel.test_valid_object_is_accepted(api, plural, spec)


def test_offset_reset_spec_is_immutable(api: tuple[Any, str]) -> None:
    cel.test_offset_reset_spec_is_immutable(api)


def test_object_stored_before_a_rule_can_lose_its_finalizer_and_be_deleted(api: tuple[Any, str]) -> None:
    """test_admission_cel.py's case on 1.30, with the one difference 1.30 has: the status
    subresource does not ratchet CEL rules (its strategy validates without the ratcheting option
    up to apiextensions-apiserver v0.32; v0.33 added it), so a status write to an object that
    breaks a spec rule is refused there. Metadata writes ratchet: labels, the finalizer's
    removal, and so the deletion, go through."""
    client, namespace = api
    ext: Any = kubernetes.client.ApiextensionsV1Api(client)
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    group = f"ratchet-{uuid.uuid4().hex[:6]}.connectops.io"
    with_rules = yaml.safe_load((ROOT / "crds" / "connectops.io_connectors.yaml").read_text())
    crd_name = with_rules["metadata"]["name"] = f"connectors.{group}"
    with_rules["spec"]["group"] = group
    with_rules["spec"]["names"]["shortNames"] = []
    ext.create_custom_resource_definition(cel._strip_rules(copy.deepcopy(with_rules)))
    try:
        wait_for(lambda: _established(ext, crd_name), 30, "ratchet CRD Established", interval=0.2)
        breaking = cel._connector(config={"tasks.max": "2"}, offsets={"onCreate": "set"})
        stored = wait_for(lambda: cel._try_create(client, namespace, breaking, group), 30, "stored without rules")
        name = stored["metadata"]["name"]
        custom.patch_namespaced_custom_object(
            group, VERSION, namespace, "connectors", name, {"metadata": {"finalizers": ["connectops.io/test"]}}
        )
        with_rules["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(
            crd_name
        ).metadata.resource_version
        ext.replace_custom_resource_definition(crd_name, with_rules)

        def rule_in_force() -> bool:
            try:
                cel._create(client, namespace, "connectors", breaking, group)
            except ApiException as exc:
                return exc.status == 422 and "onCreate set needs exactly one of entries or setTo" in str(exc.body)
            return False

        wait_for(rule_in_force, 30, "the rule refusing a new object")
        # 1.30: the status subresource validates the stored spec's rules without ratcheting
        body = cel._refusal(
            lambda: custom.patch_namespaced_custom_object_status(
                group, VERSION, namespace, "connectors", name, {"status": {"observedGeneration": 1}}
            )
        )
        assert "onCreate set needs exactly one of entries or setTo" in body, body
        assert "status" not in custom.get_namespaced_custom_object(group, VERSION, namespace, "connectors", name)
        # metadata writes ratchet: the unchanged, rule-breaking spec is spared
        custom.patch_namespaced_custom_object(
            group, VERSION, namespace, "connectors", name, {"metadata": {"labels": {"seen": "yes"}}}
        )
        body = cel._refusal(
            lambda: custom.patch_namespaced_custom_object(
                group, VERSION, namespace, "connectors", name, {"spec": {"config": {"tasks.max": "3"}}}
            )
        )
        assert "config keys name, connector.class and tasks.max" in body, body
        custom.delete_namespaced_custom_object(group, VERSION, namespace, "connectors", name)
        deleting = custom.get_namespaced_custom_object(group, VERSION, namespace, "connectors", name)
        assert deleting["metadata"]["deletionTimestamp"]
        assert deleting["metadata"]["labels"] == {"seen": "yes"}
        custom.patch_namespaced_custom_object(
            group, VERSION, namespace, "connectors", name, {"metadata": {"finalizers": None}}
        )

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object(group, VERSION, namespace, "connectors", name)
            except ApiException as exc:
                return bool(exc.status == 404)
            return False

        wait_for(gone, 30, "the object deleted")
    finally:
        ext.delete_custom_resource_definition(crd_name)


def _established(ext: Any, name: str) -> bool:
    crd = ext.read_custom_resource_definition(name)
    return bool(any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])))
