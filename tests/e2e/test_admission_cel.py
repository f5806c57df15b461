"""The CRDs' CEL rules (``x-kubernetes-validations``, generated from the models) on the real API
server: each refuses a bad object at create with its message, where the model's validator refuses
the same spec too (the reconcile-time check, kept for older servers); valid objects go through;
an OffsetReset's spec cannot change once created; and an object stored before a rule existed,
which breaks it, can still lose its finalizer and be deleted (validation ratcheting)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ValidationError

from connectops.models.connect_cluster import ConnectClusterSpec
from connectops.models.connector import ConnectorSpec
from connectops.models.offset_reset import OffsetResetSpec
from tests.e2e.conftest import GROUP, ROOT, VERSION, wait_for

REF = {"name": "c"}
ENTRY = {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}
VALID_RESET = {"connectorRef": REF, "action": "toEarliest"}
VALID_CONNECTOR = {"clusterRef": REF, "class": "org.example.Sink", "config": {"topics": "t"}}
KIND = {"offsetresets": "OffsetReset", "connectors": "Connector", "connectclusters": "ConnectCluster"}
MODEL: dict[str, type[BaseModel]] = {
    "offsetresets": OffsetResetSpec,
    "connectors": ConnectorSpec,
    "connectclusters": ConnectClusterSpec,
}


def _connector(**spec: Any) -> dict[str, Any]:
    return {**VALID_CONNECTOR, **spec}


# (plural, spec, the rule's message): one case per rule, each breaking only that rule
REFUSED = [
    ("offsetresets", {"action": "reset"}, "set exactly one of connectorRef, or connectorName/mirrorMaker2"),
    (
        "offsetresets",
        {"connectorRef": REF, "connectorName": "x", "clusterRef": REF},
        "set exactly one of connectorRef, or connectorName/mirrorMaker2",
    ),
    (
        "offsetresets",
        {
            "connectorRef": REF,
            "mirrorMaker2": {"sourceConnector": "s", "sourceAlias": "a", "targetAlias": "b"},
            "clusterRef": REF,
        },
        "set exactly one of connectorRef, or connectorName/mirrorMaker2",
    ),
    ("offsetresets", {"connectorName": "x"}, "connectorName and mirrorMaker2 need clusterRef"),
    ("offsetresets", {"connectorRef": REF, "action": "alter"}, "action alter needs a non-empty offsets list"),
    ("offsetresets", {"connectorRef": REF, "offsets": [ENTRY]}, "offsets are only used by action alter"),
    ("offsetresets", {"connectorRef": REF, "offsetsFrom": [{"name": "m"}]}, "offsetsFrom is only used by action alter"),
    ("offsetresets", {"connectorRef": REF, "action": "toTimestamp"}, "action toTimestamp needs timestamp"),
    ("offsetresets", {"connectorRef": REF, "action": "restore"}, "action restore needs restoreFrom"),
    (
        "offsetresets",
        {
            "mirrorMaker2": {"sourceConnector": "s", "sourceAlias": "a", "targetAlias": "b"},
            "clusterRef": REF,
            "action": "toLatest",
        },
        "apply to sink connectors, not MirrorMaker 2",
    ),
    (
        "offsetresets",
        {
            "connectorName": "x",
            "clusterRef": REF,
            "mirrorMaker2": {
                "sourceConnector": "s",
                "sourceAlias": "a",
                "targetAlias": "b",
                "sourceCluster": {
                    "bootstrapServers": "k:9092",
                    "config": {"a": "1"},
                    "configFrom": {"a": REF | {"key": "k"}},
                },
            },
        },
        "a Kafka setting is set in both config and configFrom",
    ),
    (
        "connectors",
        _connector(offsets={"onCreate": "set"}),
        "onCreate set needs exactly one of entries or setTo",
    ),
    (
        "connectors",
        _connector(offsets={"onCreate": "set", "entries": [ENTRY], "setTo": "earliest"}),
        "onCreate set needs exactly one of entries or setTo",
    ),
    (
        "connectors",
        _connector(offsets={"onCreate": "clear", "setTo": "latest"}),
        "entries, setTo, timestamp and topics apply to onCreate set only",
    ),
    (
        "connectors",
        _connector(offsets={"onCreate": "set", "setTo": "timestamp"}),
        "setTo timestamp needs timestamp, and timestamp needs setTo timestamp",
    ),
    (
        "connectors",
        _connector(offsets={"onCreate": "set", "setTo": "earliest", "timestamp": "0"}),
        "setTo timestamp needs timestamp, and timestamp needs setTo timestamp",
    ),
    (
        "connectors",
        _connector(offsets={"from": {"connector": "old"}, "onCreate": "clear"}),
        "from carries the old connector's offsets over",
    ),
    ("connectors", _connector(connectorName="a/b"), "connector name must not contain"),
    ("connectors", _connector(connectorName=".."), "connector name must not contain"),
    ("connectors", _connector(connectorName="a\x07b"), "connector name must not contain"),
    ("connectors", _connector(config={"tasks.max": "2"}), "config keys name, connector.class and tasks.max"),
    (
        "connectors",
        _connector(config={"connector.plugin.version": "1.0"}),
        "config keys *.plugin.version are set by spec.pluginVersion",
    ),
    (
        "connectors",
        _connector(config={"producer.override.linger.ms": "5"}),
        "belong in producerOverrides/consumerOverrides/adminOverrides",
    ),
    (
        "connectors",
        _connector(converterVersions={"value": "1.0"}),
        "converterVersions.value needs the converter class in config.value.converter",
    ),
    (
        "connectors",
        _connector(configFrom={"topics": {"secretKeyRef": {"name": "s", "key": "k"}}}),
        "a key is set in both config and configFrom",
    ),
    (
        "connectors",
        _connector(configFrom={"name": {"secretKeyRef": {"name": "s", "key": "k"}}}),
        "configFrom keys name, connector.class, tasks.max and *.plugin.version",
    ),
    (
        "connectclusters",
        {
            "restUrl": "http://connect:8083",
            "kafka": {
                "bootstrapServers": "k:9092",
                "config": {"a": "1"},
                "configFrom": {"a": {"name": "s", "key": "k"}},
            },
        },
        "a Kafka setting is set in both config and configFrom",
    ),
]

ACCEPTED = [
    ("offsetresets", VALID_RESET),
    ("offsetresets", {"connectorRef": REF, "action": "alter", "offsets": [ENTRY]}),
    ("offsetresets", {"connectorRef": REF, "action": "alter", "offsetsFrom": [{"name": "m", "key": "o.json.gz"}]}),
    ("offsetresets", {"connectorName": "x", "clusterRef": REF, "action": "toTimestamp", "timestamp": "0"}),
    ("offsetresets", {"connectorRef": REF, "action": "restore", "restoreFrom": "backup"}),
    (
        "offsetresets",
        {"mirrorMaker2": {"sourceConnector": "s", "sourceAlias": "a", "targetAlias": "b"}, "clusterRef": REF},
    ),
    # explicit nulls, as GitOps tools write them, count as unset
    ("offsetresets", {"connectorRef": REF, "connectorName": None, "timestamp": None, "mirrorMaker2": None}),
    ("connectors", VALID_CONNECTOR),
    ("connectors", _connector(connectorName="caf\u00e9.sink-1", offsets={"onCreate": "set", "entries": [ENTRY]})),
    ("connectors", _connector(offsets={"onCreate": "set", "setTo": "timestamp", "timestamp": "2026-01-31T12:00:00Z"})),
    ("connectors", _connector(offsets={"from": {"connector": "old"}})),
    (
        "connectors",
        _connector(offsets={"onCreate": "clear"}, converterVersions={"key": "1.0"}, config={"key.converter": "K"}),
    ),
    ("connectclusters", {"restUrl": "http://connect:8083", "kafka": {"bootstrapServers": "k:9092"}}),
]


@pytest.fixture(scope="module")
def api(kube_client: Any, crds: None) -> tuple[Any, str]:
    """(client, namespace) on the session's API server, the newest supported release."""
    # not t-*: the session's operator leaves these objects alone
    ns = f"adm-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    return kube_client, ns


def _create(client: Any, ns: str, plural: str, spec: dict[str, Any], group: str = GROUP) -> dict[str, Any]:
    body = {
        "apiVersion": f"{group}/{VERSION}",
        "kind": KIND[plural],
        "metadata": {"generateName": "adm-", "namespace": ns},
        "spec": spec,
    }
    created: dict[str, Any] = kubernetes.client.CustomObjectsApi(client).create_namespaced_custom_object(
        group, VERSION, ns, plural, body
    )
    return created


def _refusal(call: Any) -> str:
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 422, refused.value.body
    return str(refused.value.body)


@pytest.mark.parametrize(("plural", "spec", "message"), REFUSED, ids=lambda v: v if isinstance(v, str) else None)
def test_rule_refuses_at_create_with_its_message(
    api: tuple[Any, str], plural: str, spec: dict[str, Any], message: str
) -> None:
    kube_client, namespace = api
    # the model refuses it too: the rule is one of its validators' checks, not a new one
    with pytest.raises(ValidationError):
        MODEL[plural].model_validate(spec)
    body = _refusal(lambda: _create(kube_client, namespace, plural, spec))
    assert message in body, body


@pytest.mark.parametrize(("plural", "spec"), ACCEPTED)
def test_valid_object_is_accepted(api: tuple[Any, str], plural: str, spec: dict[str, Any]) -> None:
    kube_client, namespace = api
    MODEL[plural].model_validate({k: v for k, v in spec.items() if v is not None})
    created = _create(kube_client, namespace, plural, spec)
    stored = kubernetes.client.CustomObjectsApi(kube_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, created["metadata"]["name"]
    )
    assert _holds(stored["spec"], spec), stored["spec"]


def _holds(stored: Any, sent: Any) -> bool:
    """What was sent is stored (the API server adds defaults beside it, and keeps explicit nulls)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and _holds(stored[k], v) for k, v in sent.items())
    return bool(stored == sent)


def test_offset_reset_spec_is_immutable(api: tuple[Any, str]) -> None:
    kube_client, namespace = api
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    name = _create(kube_client, namespace, "offsetresets", VALID_RESET)["metadata"]["name"]
    body = _refusal(
        lambda: custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "offsetresets", name, {"spec": {"action": "toLatest"}}
        )
    )
    assert "its spec cannot change: create a new OffsetReset" in body, body
    # metadata and status still change (the operator's finalizer and status writes)
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "offsetresets", name, {"metadata": {"labels": {"a": "b"}, "finalizers": ["x/y"]}}
    )
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "offsetresets", name, {"status": {"phase": "Pending"}}
    )
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "offsetresets", name)
    assert stored["spec"]["action"] == "toEarliest"
    assert stored["status"]["phase"] == "Pending"
    assert stored["metadata"]["finalizers"] == ["x/y"]
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "offsetresets", name, {"metadata": {"finalizers": None}}
    )


def _strip_rules(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [_strip_rules(v) for v in node]
    return node


def test_object_stored_before_a_rule_can_lose_its_finalizer_and_be_deleted(api: tuple[Any, str]) -> None:
    """The Connector CRD under a group of its own (the session's CRDs stay as they are): first
    without its rules, then with them, as an operator upgrade that adds a rule installs it."""
    kube_client, namespace = api
    ext = kubernetes.client.ApiextensionsV1Api(kube_client)
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    group = f"ratchet-{uuid.uuid4().hex[:6]}.connectops.io"
    with_rules = yaml.safe_load((ROOT / "crds" / "connectops.io_connectors.yaml").read_text())
    with_rules["metadata"]["name"] = f"connectors.{group}"
    with_rules["spec"]["group"] = group
    with_rules["spec"]["names"]["shortNames"] = []
    without = _strip_rules(copy.deepcopy(with_rules))
    ext.create_custom_resource_definition(without)
    try:

        def established() -> bool:
            crd = ext.read_custom_resource_definition(without["metadata"]["name"])
            return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

        wait_for(established, 30, "ratchet CRD Established")
        breaking = _connector(config={"tasks.max": "2"}, offsets={"onCreate": "set"})
        stored = wait_for(lambda: _try_create(kube_client, namespace, breaking, group), 30, "stored without rules")
        name = stored["metadata"]["name"]
        custom.patch_namespaced_custom_object(
            group, VERSION, namespace, "connectors", name, {"metadata": {"finalizers": ["connectops.io/test"]}}
        )

        current = ext.read_custom_resource_definition(with_rules["metadata"]["name"])
        with_rules["metadata"]["resourceVersion"] = current.metadata.resource_version
        ext.replace_custom_resource_definition(with_rules["metadata"]["name"], with_rules)

        def rule_in_force() -> bool:
            try:
                _create(kube_client, namespace, "connectors", breaking, group)
            except ApiException as exc:
                return exc.status == 422 and "onCreate set needs exactly one of entries or setTo" in str(exc.body)
            return False

        wait_for(rule_in_force, 30, "the rule refusing a new object")
        # the stored object still breaks two rules; what the operator writes still goes through
        custom.patch_namespaced_custom_object_status(
            group, VERSION, namespace, "connectors", name, {"status": {"observedGeneration": 1}}
        )
        custom.patch_namespaced_custom_object(
            group, VERSION, namespace, "connectors", name, {"metadata": {"labels": {"seen": "yes"}}}
        )
        # a change that touches the broken field is refused: ratcheting only spares what is unchanged
        body = _refusal(
            lambda: custom.patch_namespaced_custom_object(
                group, VERSION, namespace, "connectors", name, {"spec": {"config": {"tasks.max": "3"}}}
            )
        )
        assert "config keys name, connector.class and tasks.max" in body, body
        custom.delete_namespaced_custom_object(group, VERSION, namespace, "connectors", name)
        assert custom.get_namespaced_custom_object(group, VERSION, namespace, "connectors", name)["metadata"][
            "deletionTimestamp"
        ]
        custom.patch_namespaced_custom_object(
            group, VERSION, namespace, "connectors", name, {"metadata": {"finalizers": None}}
        )

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object(group, VERSION, namespace, "connectors", name)
            except ApiException as exc:
                return exc.status == 404
            return False

        wait_for(gone, 30, "the object deleted")
    finally:
        ext.delete_custom_resource_definition(with_rules["metadata"]["name"])


def _try_create(client: Any, ns: str, spec: dict[str, Any], group: str) -> dict[str, Any] | None:
    try:
        return _create(client, ns, "connectors", spec, group)
    except ApiException as exc:
        if exc.status == 404:  # the new group is not served yet
            return None
        raise
