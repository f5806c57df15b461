"""Render the Helm chart with real Helm (the Helm 4 Go SDK through ``helm-python-sdk``) and apply it.

Shared by tests/helm/test_chart.py and by RBAC experiments (render with ``rbac.omitRules`` to drop
one rule or one verb, apply, run the operator under the chart's ServiceAccount)::

    objects = render({"rbac": {"omitRules": ["secrets"]}}, namespace="ops")
    apply(api_client, objects)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import yaml
from kubernetes import client, dynamic
from kubernetes.dynamic.exceptions import ResourceNotFoundError

REPO: Final = Path(__file__).resolve().parents[2]
CHART_DIR: Final = REPO / "helm" / "connectops"
REPO_CRDS: Final = REPO / "crds"
FIELD_MANAGER: Final = "connectops-chart-tests"

Obj = dict[str, Any]


def render(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "connectops",
    namespace: str = "connectops",
) -> list[Obj]:
    """Every object the chart's templates render (hooks included, NOTES.txt excluded), in order."""
    with helm.Chart.load(CHART_DIR) as chart:
        manifests = chart.render(dict(values or {}), name=release, namespace=namespace, is_install=True)
    objects: list[Obj] = []
    for path in sorted(manifests):
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(manifests[path]) if doc)
    return objects


def chart_crds() -> list[Obj]:
    """The CRDs in the chart's crds/ directory (installed by Helm before the templates)."""
    with helm.Chart.load(CHART_DIR) as chart:
        return [yaml.safe_load(crd["data"]) for crd in chart.crds]


def by_kind(objects: Iterable[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: Iterable[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in by_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def aggregated(obj: Obj) -> bool:
    """A user-facing ClusterRole the chart adds to Kubernetes' view, edit or admin (aggregation
    labels), not one of the operator's own."""
    labels = obj["metadata"].get("labels") or {}
    return any(key.startswith("rbac.authorization.k8s.io/aggregate-to-") for key in labels)


def operator_roles(objects: Iterable[Obj], kind: str) -> list[Obj]:
    """The Roles or ClusterRoles of the chart's own identities (the operator's, the check's)."""
    return [o for o in by_kind(objects, kind) if not aggregated(o)]


def policy_rules(objects: Iterable[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(Role or ClusterRole, rule) pairs."""
    for obj in objects:
        if obj["kind"] in ("Role", "ClusterRole"):
            for rule in obj.get("rules") or ():
                yield obj, rule


def _resource(dyn: dynamic.DynamicClient, obj: Obj) -> Any:
    try:
        return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    except ResourceNotFoundError:
        dyn.resources.invalidate_cache()  # a CRD established since the last discovery
        return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])


def apply(api_client: client.ApiClient, objects: Iterable[Obj], *, dry_run: bool = False) -> list[Obj]:
    """Server-side apply each object (``dryRun=All`` when ``dry_run``); returns the server's answers.

    Server-side apply, not create: the server validates and defaults the object exactly as for a
    real ``kubectl apply --server-side``, and re-running is idempotent.
    """
    dyn = dynamic.DynamicClient(api_client)  # type: ignore[no-untyped-call]
    answers: list[Obj] = []
    for obj in objects:
        resource = _resource(dyn, obj)
        kwargs: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force_conflicts": True}
        if dry_run:
            kwargs["dry_run"] = "All"
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        answer = resource.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=namespace, **kwargs)
        answers.append(answer.to_dict())
    return answers
