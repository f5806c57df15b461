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
import time
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
from tests.env.servers import (
    KUBE_MODULES,
    KubeAPI,
    MissingTestEnvError,
    ServerStartError,
    free_port,
    kube_apiserver_path,
)

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


#: the rule a legacy Connector breaks here, and where the API server says it is
LEGACY_RULE: Final = "onCreate set needs exactly one of entries or setTo"
#: how long the operator is watched with the legacy object: twenty resyncs at the suite's 3 s
WATCH_SECONDS: Final = 60.0


def _status_writes(client: Any, plural: str) -> dict[str, float]:
    """The API server's own count of PATCHes of ``plural``'s status subresource, by answer code
    (its /metrics, apiserver_request_total): what reached it, whoever sent it."""
    request = client.param_serialize(method="GET", resource_path="/metrics", auth_settings=["BearerToken"])
    response = client.call_api(*request)
    response.read()
    counts: dict[str, float] = {}
    for line in response.data.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        if (
            'verb="PATCH"' in labels
            and f'resource="{plural}"' in labels
            and 'subresource="status"' in labels
            and f'group="{cel.GROUP}"' in labels
        ):
            code = labels.split('code="', 1)[1].split('"', 1)[0]
            counts[code] = counts.get(code, 0.0) + float(value)
    return counts


def test_a_refused_status_is_told_once_and_written_once_the_spec_is_fixed(
    oldest: tuple[KubeAPI, Any], api: tuple[Any, str], tmp_path: Path
) -> None:
    """A Connector stored before the rule it breaks, with the operator running (`connectops run`,
    the suite's 3 s resync): on 1.30 each of its status writes is refused (422). The operator
    says so once, a Warning Event naming the rule and the field, makes no further status write
    for that spec and applies nothing; once the user fixes the spec, its status is written; and
    the object can be deleted (the finalizer goes). The double's 422
    (tests/doubles/kube.py ``invalid_answer``) is held to the real answer here."""
    from connectops.adapters.kube import refusal_causes
    from tests.doubles.kube import invalid_answer
    from tests.e2e.conftest import CLAIM_NAMESPACE, OperatorProcess

    kube, client = oldest
    ext: Any = kubernetes.client.ApiextensionsV1Api(client)
    core: Any = kubernetes.client.CoreV1Api(client)
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    ns = f"t-legacy-{uuid.uuid4().hex[:6]}"
    for name in (ns, CLAIM_NAMESPACE):
        try:
            core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": name}))
        except ApiException as exc:
            if exc.status != 409:
                raise
    crd = yaml.safe_load((ROOT / "crds" / "connectops.io_connectors.yaml").read_text())
    operator = OperatorProcess(kube, ns, tmp_path)
    try:
        # the Connector CRD as an older release had it, without its rules
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"],
            cel._strip_rules(copy.deepcopy(crd)),
            field_manager=MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        cluster = {"restUrl": f"http://127.0.0.1:{free_port()}", "kafka": {"bootstrapServers": "k:9092"}}
        custom.create_namespaced_custom_object(
            cel.GROUP,
            VERSION,
            ns,
            "connectclusters",
            {
                "apiVersion": f"{cel.GROUP}/{VERSION}",
                "kind": "ConnectCluster",
                "metadata": {"name": "c"},
                "spec": cluster,
            },
        )
        breaking = cel._connector(offsets={"onCreate": "set"})
        legacy = {"apiVersion": f"{cel.GROUP}/{VERSION}", "kind": "Connector", "metadata": {"name": "legacy"}}

        def stored() -> dict[str, Any] | None:
            try:
                created: dict[str, Any] = custom.create_namespaced_custom_object(
                    cel.GROUP, VERSION, ns, "connectors", {**legacy, "spec": breaking}
                )
            except ApiException as exc:
                if exc.status == 422:  # the rules are still in force
                    return None
                raise
            return created

        wait_for(stored, 30, "the legacy Connector stored without the rules", interval=0.2)
        # the upgrade installs the CRD with its rules
        _apply_crds(client)

        def rule_in_force() -> bool:
            try:
                cel._create(client, ns, "connectors", breaking)
            except ApiException as exc:
                return exc.status == 422 and LEGACY_RULE in str(exc.body)
            return False

        wait_for(rule_in_force, 30, "the rule refusing a new object")
        # contract: the real 422 of a status write reads as the double's does
        with pytest.raises(ApiException) as refused:
            custom.patch_namespaced_custom_object_status(
                cel.GROUP, VERSION, ns, "connectors", "legacy", {"status": {"observedGeneration": 1}}
            )
        real = refusal_causes(refused.value.status, refused.value.body)
        assert real is not None, refused.value.body
        assert real == refusal_causes(422, invalid_answer("Connector", "legacy", list(real)))
        assert [message for _, message in real] == [LEGACY_RULE], real
        field = real[0][0]
        assert field.startswith("spec"), real

        at_start = _status_writes(client, "connectors")
        operator.start()

        def told() -> list[Any]:
            events = core.list_namespaced_event(ns).items
            return [e for e in events if e.involved_object.name == "legacy" and e.reason == "StatusRefused"]

        wait_for(told, 60, "the StatusRefused Event", interval=1.0)
        before = _status_writes(client, "connectors")
        config_before = custom.get_namespaced_custom_object(cel.GROUP, VERSION, ns, "connectors", "legacy")
        time.sleep(WATCH_SECONDS)
        after = _status_writes(client, "connectors")
        events = told()
        writes = {code: after.get(code, 0.0) - before.get(code, 0.0) for code in set(before) | set(after)}
        log = operator.log()
        print(
            f"\nlegacy Connector on {OLDEST}, {WATCH_SECONDS:.0f} s at a 3 s resync: status PATCHes by code {writes} "
            f"(from the operator's start: {_since(at_start, after)}); "
            f"StatusRefused Events {len(events)} (count {sum(e.count or 1 for e in events)}); "
            f"log lines naming the rule {log.count(LEGACY_RULE)}; log lines {len(log.splitlines())}; all its Events "
            f"{_events_of(core, ns, 'legacy')}"
        )
        assert operator.proc.poll() is None, operator.log_tail()
        assert sum(writes.values()) == 0, writes
        assert _since(at_start, after) == {"422": 1.0}, _since(at_start, after)
        assert len(events) == 1, events
        assert (events[0].count or 1) == 1, events
        assert events[0].type == "Warning"
        assert LEGACY_RULE in events[0].message, events[0].message
        assert field in events[0].message, events[0].message
        assert log.count(LEGACY_RULE) == 1, operator.log_tail()
        unchanged = custom.get_namespaced_custom_object(cel.GROUP, VERSION, ns, "connectors", "legacy")
        assert "status" not in unchanged
        assert unchanged["metadata"]["generation"] == config_before["metadata"]["generation"]

        # the user fixes the spec: its status is written, for the new generation (naming a
        # ConnectCluster that does not exist, so that its deletion below needs no Connect)
        fixed = {"spec": {"offsets": None, "clusterRef": {"name": "absent"}}}
        custom.patch_namespaced_custom_object(cel.GROUP, VERSION, ns, "connectors", "legacy", fixed)

        def written() -> dict[str, Any] | None:
            obj = custom.get_namespaced_custom_object(cel.GROUP, VERSION, ns, "connectors", "legacy")
            status = obj.get("status") or {}
            return obj if status.get("observedGeneration") == obj["metadata"]["generation"] == 2 else None

        wait_for(written, 60, "the fixed Connector's status written", interval=0.5)
        assert len(told()) == 1

        # and it can be deleted: the operator takes its finalizer off
        custom.delete_namespaced_custom_object(cel.GROUP, VERSION, ns, "connectors", "legacy")

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object(cel.GROUP, VERSION, ns, "connectors", "legacy")
            except ApiException as exc:
                return bool(exc.status == 404)
            return False

        wait_for(gone, 60, "the fixed Connector deleted")
    finally:
        operator.stop()
        _apply_crds(client)


def test_on_the_newest_release_a_legacy_status_is_written_as_before(k8s: Any, kube_client: Any) -> None:
    """The same legacy Connector on the session's API server (the newest release, whose status
    subresource ratchets): its status is written at once, Valid=False with the model's reason,
    with no refusal and no StatusRefused Event. The session's Connector CRD loses its rules only
    while the object is stored (nothing else of this worker runs meanwhile)."""
    ext: Any = kubernetes.client.ApiextensionsV1Api(kube_client)
    name = "connectors.connectops.io"
    with_rules = ext.read_custom_resource_definition(name, _preload_content=False)
    original = json.loads(with_rules.data)
    without = cel._strip_rules(copy.deepcopy(original))
    ext.replace_custom_resource_definition(name, without)
    before = _status_writes(kube_client, "connectors")
    try:
        wait_for(
            lambda: _stored(k8s, cel._connector(offsets={"onCreate": "set"})),
            30,
            "the legacy Connector stored without the rules",
            interval=0.2,
        )
    finally:
        current = ext.read_custom_resource_definition(name).metadata.resource_version
        ext.replace_custom_resource_definition(
            name, {**original, "metadata": {**original["metadata"], "resourceVersion": current}}
        )
    cond = k8s.wait_condition("connectors", "legacy", "Valid", "False", "InvalidSpec", timeout=60)
    assert LEGACY_RULE in cond["message"], cond
    assert k8s.get("connectors", "legacy")["status"]["observedGeneration"] == 1
    assert not [e for e in k8s.events("legacy") if e.reason == "StatusRefused"]
    assert _status_writes(kube_client, "connectors").get("422", 0.0) == before.get("422", 0.0)
    k8s.delete("connectors", "legacy")
    wait_for(lambda: not k8s.exists("connectors", "legacy"), 60, "the legacy Connector deleted")


def _events_of(core: Any, namespace: str, name: str) -> list[tuple[str, str, int]]:
    """(type, reason, count) of every Event of the object."""
    events = core.list_namespaced_event(namespace).items
    return sorted((e.type, e.reason, e.count or 1) for e in events if e.involved_object.name == name)


def _since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {code: after[code] - before.get(code, 0.0) for code in after if after[code] != before.get(code, 0.0)}


def _stored(k8s: Any, spec: dict[str, Any]) -> bool:
    try:
        k8s.create("connectors", "legacy", spec, "Connector")
    except ApiException as exc:
        if exc.status == 422:  # the rules are still in force
            return False
        raise
    return True
