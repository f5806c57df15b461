"""Names that never clash beside Strimzi and Confluent for Kubernetes (issue 16, item 1).

Copies of their CRDs' names (group, kind, plural, singular, short names and categories: public
facts of their published CRDs; the schemas are left open) are installed in the real API server,
next to ours. kubectl resolves a short name through the server's discovery documents; the test
reads those documents exactly as kubectl's RESTMapper does and checks that every short name of
ours resolves to us alone, and that the ``connectops`` category holds our three kinds and nothing
else. Confluent's ``connectors`` plural is the one real overlap: the README shows the fully
qualified form (``connectors.connectops.io``) for clusters that run CFK.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import ROOT, wait_for

#: (group, kind, plural, singular, short names, categories); Strimzi 0.4x's kafka.strimzi.io CRDs
STRIMZI = [
    ("Kafka", "kafkas", "kafka", ["k"]),
    ("KafkaConnect", "kafkaconnects", "kafkaconnect", ["kc"]),
    ("KafkaConnector", "kafkaconnectors", "kafkaconnector", ["kctr"]),
    ("KafkaMirrorMaker2", "kafkamirrormaker2s", "kafkamirrormaker2", ["kmm2"]),
    ("KafkaMirrorMaker", "kafkamirrormakers", "kafkamirrormaker", ["kmm"]),
    ("KafkaBridge", "kafkabridges", "kafkabridge", ["kb"]),
    ("KafkaTopic", "kafkatopics", "kafkatopic", ["kt"]),
    ("KafkaUser", "kafkausers", "kafkauser", ["ku"]),
    ("KafkaRebalance", "kafkarebalances", "kafkarebalance", ["kr"]),
    ("KafkaNodePool", "kafkanodepools", "kafkanodepool", ["knp"]),
]
#: Confluent for Kubernetes' platform.confluent.io kinds that concern Connect (plural, singular)
CFK = [("Connector", "connectors", "connector", []), ("Connect", "connects", "connect", [])]


def _crd(group: str, kind: str, plural: str, singular: str, short: list[str], category: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": short,
                "categories": [category],
            },
            "versions": [
                {
                    "name": "v1beta2" if group == "kafka.strimzi.io" else "v1beta1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


@pytest.fixture
def neighbours(kube_client: Any, crds: None) -> Iterator[None]:
    ext = kubernetes.client.ApiextensionsV1Api(kube_client)
    bodies = [_crd("kafka.strimzi.io", *entry, "strimzi") for entry in STRIMZI]
    bodies += [_crd("platform.confluent.io", *entry, "confluent") for entry in CFK]
    for body in bodies:
        with contextlib.suppress(ApiException):
            ext.create_custom_resource_definition(body)
    for body in bodies:
        name = body["metadata"]["name"]
        wait_for(
            lambda n=name: any(
                c.type == "Established" and c.status == "True"
                for c in (ext.read_custom_resource_definition(n).status.conditions or [])
            ),
            30,
            f"{name} Established",
        )
    yield
    for body in bodies:
        with contextlib.suppress(ApiException):
            ext.delete_custom_resource_definition(body["metadata"]["name"])


def _discovery(kube_client: Any) -> list[tuple[str, dict[str, Any]]]:
    """(group, resource) for every resource the server advertises, as kubectl's discovery reads."""
    out = []
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    for group in kubernetes.client.ApisApi(kube_client).get_api_versions().groups:
        listing = custom.get_api_resources(group.name, group.preferred_version.version)
        for r in listing.resources:
            if "/" not in r.name:
                out.append(
                    (
                        group.name,
                        {
                            "name": r.name,
                            "shortNames": r.short_names,
                            "categories": r.categories,
                            "singularName": r.singular_name,
                        },
                    )
                )
    return out


def test_short_names_resolve_to_us_beside_strimzi_and_cfk(kube_client: Any, neighbours: None) -> None:
    resources = _discovery(kube_client)
    by_short: dict[str, set[str]] = defaultdict(set)
    by_category: dict[str, set[str]] = defaultdict(set)
    by_singular: dict[str, set[str]] = defaultdict(set)
    for group, r in resources:
        for short in r.get("shortNames") or []:
            by_short[short].add(f"{r['name']}.{group}")
        for category in r.get("categories") or []:
            by_category[category].add(f"{r['name']}.{group}")
        by_singular[r.get("singularName") or ""].add(f"{r['name']}.{group}")
    ours = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        names = yaml.safe_load(path.read_text())["spec"]["names"]
        ours[f"{names['plural']}.connectops.io"] = names["shortNames"]
    # the neighbours are really there, with their own short names
    assert by_short["kctr"] == {"kafkaconnectors.kafka.strimzi.io"}
    assert "connectors.platform.confluent.io" in by_singular["connector"]
    for resource, shorts in ours.items():
        assert shorts
        for short in shorts:
            assert by_short[short] == {resource}, (short, by_short[short])
    assert by_category["connectops"] == set(ours)
    # the real overlap: the plural and singular "connector(s)" are CFK's too
    assert by_singular["connector"] == {"connectors.connectops.io", "connectors.platform.confluent.io"}
    readme = (ROOT / "docs" / "connectors.md").read_text()
    assert "kubectl get connectors.connectops.io" in readme
    for short in ("copscc", "copsctr", "copsor"):
        assert short in readme
