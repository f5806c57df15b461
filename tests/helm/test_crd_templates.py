"""The CRDs as templates (chart value ``crds.enabled``): the chart's crds/ files, unchanged but for
their labels and Helm's keep annotation, accepted by the real API server by server-side apply.

The upgrade through them, and through ``helm show crds``, from the previous chart version:
tests/helm/test_upgrade.py.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import crds
from tests.helm.chart import CHART_DIR, REPO_CRDS, Obj, apply, by_kind, render

__all__ = ["crds"]  # the session fixture from tests/e2e/conftest.py: the connectops CRDs applied

pytestmark = pytest.mark.timeout(300)

TEMPLATE = "connectops/templates/crds.yaml"
KEEP = {"helm.sh/resource-policy": "keep"}


def _raw(values: dict[str, Any]) -> list[str]:
    """The template's output, document by document, as Helm rendered it (text, not parsed)."""
    with helm.Chart.load(CHART_DIR) as chart:
        text = chart.render(values, name="connectops", namespace="connectops", is_install=True)[TEMPLATE]
    return [doc for doc in text.split("\n---\n") if doc.strip()]


def _without_chart_metadata(doc: str) -> str:
    """The document with the lines the template adds under ``metadata:`` taken out again."""
    lines = doc.strip("\n").split("\n")  # Helm's separators and line breaks around each file
    start = lines.index("metadata:") + 1
    end = start
    while not lines[end].startswith("  name: "):
        end += 1
    return "\n".join(lines[:start] + lines[end:]) + "\n"


def test_crd_templates_are_the_crds_files_byte_for_byte() -> None:
    files = {p.read_bytes() for p in sorted(REPO_CRDS.glob("*.yaml"))}
    docs = _raw({"crds": {"enabled": True}})
    assert len(docs) == len(files)
    assert {_without_chart_metadata(doc).encode() for doc in docs} == files
    # and parsed: the same objects, metadata aside
    rendered = by_kind(render({"crds": {"enabled": True}}), "CustomResourceDefinition")
    from_files = {yaml.safe_load(b)["metadata"]["name"]: yaml.safe_load(b) for b in files}
    for crd in rendered:
        meta = crd["metadata"]
        source = from_files[meta["name"]]
        assert {k: v for k, v in crd.items() if k != "metadata"} == {k: v for k, v in source.items() if k != "metadata"}
        assert meta["annotations"] == KEEP
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_crd_templates_are_off_by_default_and_keep_is_optional() -> None:
    assert not by_kind(render({}), "CustomResourceDefinition")
    assert not _raw({})
    unkept = by_kind(render({"crds": {"enabled": True, "keep": False}}), "CustomResourceDefinition")
    assert len(unkept) == len(list(REPO_CRDS.glob("*.yaml")))
    assert all("annotations" not in crd["metadata"] for crd in unkept)
    # commonLabels reach them too, and a value that is not a boolean is refused
    labelled = by_kind(
        render({"crds": {"enabled": True}, "commonLabels": {"team": "data"}}), "CustomResourceDefinition"
    )
    assert all(crd["metadata"]["labels"]["team"] == "data" for crd in labelled)
    with pytest.raises(helm.HelmValuesError):
        render({"crds": {"enabled": "yes"}})


def test_crd_templates_apply_server_side(kube_client: client.ApiClient, crds: None) -> None:
    """Over the suite's CRDs (created from crds/): a dry run (the session's CRDs stay as they
    are), fully validated by the server as an update of the same definitions."""
    rendered: list[Obj] = by_kind(render({"crds": {"enabled": True}}), "CustomResourceDefinition")
    answers = apply(kube_client, rendered, dry_run=True)
    assert sorted(a["metadata"]["name"] for a in answers) == sorted(c["metadata"]["name"] for c in rendered)
    for answer in answers:
        assert answer["metadata"]["annotations"] == KEEP


def test_artifact_hub_lists_the_chart_crds() -> None:
    with helm.Chart.load(CHART_DIR) as chart:
        listed = yaml.safe_load(chart.metadata["annotations"]["artifacthub.io/crds"])
    files = [yaml.safe_load(p.read_text()) for p in sorted(REPO_CRDS.glob("*.yaml"))]
    assert sorted((c["kind"], c["version"], c["name"]) for c in listed) == sorted(
        (f["spec"]["names"]["kind"], f["spec"]["versions"][0]["name"], f["metadata"]["name"]) for f in files
    )


@pytest.mark.parametrize("keep", [True, False])
def test_helm_lint_clean_with_crd_templates(keep: bool) -> None:
    report = helm.lint(CHART_DIR, {"crds": {"enabled": True, "keep": keep}}, strict=True, kube_version="v1.30.0")
    assert not [m for m in report["messages"] if m["severity"] >= 2], report["messages"]
    assert not report["errors"]
