"""Generate the CustomResourceDefinitions in ``crds/`` from the pydantic models.

Pydantic emits JSON Schema (``$ref``/``$defs``, ``anyOf`` for optionals, ``title``…), while the
API server wants a *structural* OpenAPI v3 schema: every level typed, no references, and
int-or-string spelled ``x-kubernetes-int-or-string``. This module is that translation, kept
small and strict: an unknown construct raises instead of being silently dropped, so a model
change that the API server could not express fails ``tests/unit/test_crds.py``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from connectops.models import GROUP, VERSION
from connectops.models.connect_cluster import ConnectClusterSpec, ConnectClusterStatus
from connectops.models.connector import ConnectorSpec, ConnectorStatus
from connectops.models.group_failover import GroupFailoverSpec, GroupFailoverStatus
from connectops.models.offset_reset import OffsetResetSpec, OffsetResetStatus

JSON = dict[str, Any]

_KEEP = {
    "x-kubernetes-validations",
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "format",
    "default",
}


class SchemaError(ValueError):
    """A model uses a JSON Schema construct that has no structural OpenAPI equivalent."""


def _resolve(schema: JSON, defs: JSON) -> JSON:
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        merged = {**copy.deepcopy(defs[name]), **{k: v for k, v in schema.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return schema


def _any_of(schema: JSON, defs: JSON) -> JSON:
    """``Optional[X]`` (X, nullable) and ``int | str`` (int-or-string): the two unions a
    structural schema can say."""
    variants = [_resolve(v, defs) for v in schema["anyOf"]]
    non_null = [v for v in variants if v.get("type") != "null"]
    types = sorted(v.get("type", "") for v in non_null)
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    if len(non_null) == 1:
        # Optional[X]: optionality is expressed by not being required; an explicit null is
        # accepted too, because Kubernetes clients and GitOps tools write them.
        node = to_structural({**non_null[0], **rest}, defs)
        if len(variants) > 1 and "x-kubernetes-int-or-string" not in node:
            node["nullable"] = True
        return node
    if types == ["integer", "string"]:
        int_or_string: JSON = {"x-kubernetes-int-or-string": True}
        if "description" in rest:
            int_or_string["description"] = rest["description"]
        # string bounds still apply to the string form (the API server checks them)
        for variant in non_null:
            if variant.get("type") == "string" and "maxLength" in variant:
                int_or_string["maxLength"] = variant["maxLength"]
        return int_or_string
    raise SchemaError(f"unsupported anyOf {types}")


def _maps(out: JSON, defs: JSON) -> None:
    """Maps: typed values are translated, free-form ones kept whole, ``false`` dropped."""
    if out.get("additionalProperties") is True or (
        out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out
    ):
        # free-form maps (KIP-875 partition/offset maps, plans): keep whatever is written
        out.pop("additionalProperties", None)
        out["x-kubernetes-preserve-unknown-fields"] = True
    elif isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = to_structural(out["additionalProperties"], defs)
    elif out.get("additionalProperties") is False:
        # structural schemas prune unknown fields already; ``false`` is not allowed there
        del out["additionalProperties"]


def to_structural(schema: JSON, defs: JSON) -> JSON:
    """Translate one pydantic JSON Schema node (recursively) into a structural schema node."""
    schema = _resolve(schema, defs)
    if "anyOf" in schema:
        return _any_of(schema, defs)
    if "const" in schema:
        schema = {**schema, "enum": [schema["const"]]}
    unknown = set(schema) - _KEEP - {"title", "const", "$defs"}
    if unknown:
        raise SchemaError(f"unsupported schema keywords {sorted(unknown)}")
    out: JSON = {k: v for k, v in schema.items() if k in _KEEP}
    # JSON Schema 2020-12 spells exclusive bounds as numbers; OpenAPI 3.0 as booleans
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if flag in out and not isinstance(out[flag], bool):
            out[bound] = out.pop(flag)
            out[flag] = True
    if "type" not in out:
        raise SchemaError(f"untyped schema node: {schema}")
    if "properties" in out:
        out["properties"] = {k: to_structural(v, defs) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = to_structural(out["items"], defs)
    _maps(out, defs)
    if out.get("default") is None:
        out.pop("default", None)
    if isinstance(out.get("default"), dict | list) and not out["default"]:
        # Defaulting empty objects/lists would make the API server write them into every spec
        # and into GitOps diffs; pydantic fills them in the operator instead.
        del out["default"]
    return out


def _strip_defaults(schema: JSON) -> JSON:
    """Status is written by the operator only; defaults there would just be noise."""
    out = {k: v for k, v in schema.items() if k != "default"}
    if "properties" in out:
        out["properties"] = {k: _strip_defaults(v) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _strip_defaults(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _strip_defaults(out["additionalProperties"])
    return out


def model_schema(model: type[BaseModel]) -> JSON:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return to_structural(raw, raw.get("$defs", {}))


@dataclass(frozen=True)
class Kind:
    """One CRD. Short names carry a ``cops`` prefix: Strimzi's (``kctr``, ``kc``, ``kmm2``...) and
    Confluent for Kubernetes' kinds (also a ``connectors`` plural) live in the same clusters, and
    a short name two CRDs share makes ``kubectl get`` pick one of them silently."""

    kind: str
    plural: str
    short_names: list[str]
    spec: type[BaseModel]
    status: type[BaseModel]
    columns: list[JSON] = field(default_factory=list)
    categories: list[str] = field(default_factory=lambda: ["connectops"])


def _condition_column(name: str, type_: str) -> JSON:
    return {
        "name": name,
        "type": "string",
        "jsonPath": f'.status.conditions[?(@.type=="{type_}")].status',
    }


AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

KINDS: list[Kind] = [
    Kind(
        kind="ConnectCluster",
        plural="connectclusters",
        short_names=["copscc"],
        spec=ConnectClusterSpec,
        status=ConnectClusterStatus,
        columns=[
            {"name": "URL", "type": "string", "jsonPath": ".spec.restUrl"},
            {"name": "Version", "type": "string", "jsonPath": ".status.workerVersion"},
            _condition_column("Ready", "Ready"),
            AGE,
        ],
    ),
    Kind(
        kind="Connector",
        plural="connectors",
        short_names=["copsctr"],
        spec=ConnectorSpec,
        status=ConnectorStatus,
        columns=[
            {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef.name"},
            {"name": "Desired", "type": "string", "jsonPath": ".spec.state"},
            {"name": "State", "type": "string", "jsonPath": ".status.connectorState"},
            {"name": "Tasks", "type": "string", "jsonPath": ".status.tasksRunning"},
            _condition_column("Ready", "Ready"),
            _condition_column("Valid", "Valid"),
            {"name": "Check", "type": "string", "jsonPath": ".status.lastCheck.verdict"},
            {"name": "Lag(s)", "type": "number", "jsonPath": ".status.lastCheck.headline.timeLagSeconds"},
            AGE,
            {
                "name": "Class",
                "type": "string",
                "jsonPath": ".spec.class",
                "priority": 1,
            },
            # what the worker runs (KIP-891), not what the spec pins
            {"name": "Version", "type": "string", "jsonPath": ".status.connectorVersion", "priority": 1},
            {"name": "Lag", "type": "integer", "jsonPath": ".status.lastCheck.headline.totalLag", "priority": 1},
            {"name": "ETA(s)", "type": "number", "jsonPath": ".status.lastCheck.headline.etaSeconds", "priority": 1},
        ],
    ),
    Kind(
        kind="OffsetReset",
        plural="offsetresets",
        short_names=["copsor"],
        spec=OffsetResetSpec,
        status=OffsetResetStatus,
        columns=[
            {"name": "Connector", "type": "string", "jsonPath": ".spec.connectorRef.name"},
            {"name": "Action", "type": "string", "jsonPath": ".spec.action"},
            {"name": "Strategy", "type": "string", "jsonPath": ".status.strategy"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Step", "type": "string", "jsonPath": ".status.currentStep"},
            AGE,
        ],
    ),
    Kind(
        kind="GroupFailover",
        plural="groupfailovers",
        short_names=["copsgf"],
        spec=GroupFailoverSpec,
        status=GroupFailoverStatus,
        columns=[
            {"name": "Group", "type": "string", "jsonPath": ".spec.group"},
            {"name": "Action", "type": "string", "jsonPath": ".spec.action"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Reread", "type": "integer", "jsonPath": ".status.plan.rereadTotal"},
            AGE,
        ],
    ),
]


def crd_for(kind: Kind) -> JSON:
    spec_schema = model_schema(kind.spec)
    status_schema = _strip_defaults(model_schema(kind.status))
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "shortNames": kind.short_names,
                "categories": kind.categories,
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": kind.columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": (kind.spec.__doc__ or kind.kind).strip().splitlines()[0],
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                # Status stays open: kopf and older/newer operator versions write
                                # fields this version does not know, and pruning them would
                                # break resumption.
                                "status": {**status_schema, "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


def render_all() -> dict[str, str]:
    """File name -> YAML text, for every kind."""
    out = {}
    for kind in KINDS:
        text = yaml.safe_dump(crd_for(kind), sort_keys=False, width=100)
        out[f"{GROUP}_{kind.plural}.yaml"] = "# Generated by `connectops crds`; do not edit.\n" + text
    return out


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_all().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
