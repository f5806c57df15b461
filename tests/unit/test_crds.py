"""crds/ is generated from the models; these tests fail when the two drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from connectops import crdgen
from connectops.crdgen import SchemaError, to_structural

ROOT = Path(__file__).resolve().parents[2]


def test_committed_crds_match_models() -> None:
    rendered = crdgen.render_all()
    on_disk = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    assert set(on_disk) == set(rendered), "crds/ holds files the models do not generate"
    for name, text in rendered.items():
        assert on_disk[name] == text, f"{name} is stale: run `connectops crds`"


def _walk(node: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    if isinstance(node, dict):
        out.append(node)
        for value in node.values():
            out.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_walk(value))
    return out


@pytest.mark.parametrize("kind", crdgen.KINDS, ids=lambda k: k.kind)
def test_schemas_are_structural(kind: crdgen.Kind) -> None:
    crd = crdgen.crd_for(kind)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for node in _walk(schema["properties"]["spec"]):
        assert "$ref" not in node
        assert "anyOf" not in node
        assert "title" not in node
    # every property node is typed (or int-or-string), as the API server requires
    for node in _walk(schema["properties"]["spec"]):
        for prop in (node.get("properties") or {}).values():  # type: ignore[attr-defined]
            assert "type" in prop or prop.get("x-kubernetes-int-or-string"), prop


def test_connector_schema_details() -> None:
    crd = yaml.safe_load(crdgen.render_all()["connectops.io_connectors.yaml"])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["clusterRef", "class"]
    assert spec["properties"]["state"]["enum"] == ["running", "paused", "stopped"]
    assert spec["properties"]["config"]["additionalProperties"] == {
        "x-kubernetes-int-or-string": True,
        "maxLength": 65536,
    }
    assert spec["properties"]["config"]["maxProperties"] == 1000
    producer = spec["properties"]["producerOverrides"]["properties"]
    assert producer["compressionType"]["pattern"].startswith("^(none")
    assert producer["batchSize"]["minimum"] == 0


def test_unsupported_constructs_fail_loudly() -> None:
    with pytest.raises(SchemaError):
        to_structural({"anyOf": [{"type": "string"}, {"type": "boolean"}]}, {})
    with pytest.raises(SchemaError):
        to_structural({"oneOf": [{"type": "string"}]}, {})


def test_admission_rules_are_carried_into_the_crds() -> None:
    """The models' CEL rules land on the node they guard, each with a message."""
    docs = {n: yaml.safe_load(t) for n, t in crdgen.render_all().items()}

    def rules(name: str, *path: str) -> list[dict[str, str]]:
        node = docs[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        for key in path:
            node = node["properties"][key]
        found: list[dict[str, str]] = node["x-kubernetes-validations"]
        return found

    reset = rules("connectops.io_offsetresets.yaml")
    assert reset[-1]["rule"] == "self == oldSelf"
    assert "set exactly one of connectorRef, or connectorName/mirrorMaker2 with clusterRef" in [
        r["message"] for r in reset
    ]
    for name, *path in (
        ("connectops.io_offsetresets.yaml", "mirrorMaker2", "sourceCluster"),
        ("connectops.io_connectors.yaml",),
        ("connectops.io_connectors.yaml", "offsets"),
        ("connectops.io_connectclusters.yaml", "kafka"),
    ):
        assert rules(name, *path), (name, path)
    for doc in docs.values():
        for node in _walk(doc):
            for rule in node.get("x-kubernetes-validations", []):  # type: ignore[attr-defined]
                assert set(rule) == {"rule", "message"}, rule
                assert rule["message"], rule
