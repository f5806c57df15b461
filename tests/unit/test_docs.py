"""The README's links into docs/ resolve, anchors included; the generated CRD reference covers the CRDs.

Links between the pages under docs/ are checked by the strict mkdocs build in .ci/run; the
README is not part of the site, so its links are checked here, with the same heading ids mkdocs
gives (Python-Markdown's toc extension).
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import markdown
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def _anchors(page: Path) -> set[str]:
    md = markdown.Markdown(extensions=["toc", "tables", "fenced_code"])
    md.convert(page.read_text())
    ids: set[str] = set()

    def walk(tokens: list[dict[str, Any]]) -> None:
        for token in tokens:
            ids.add(token["id"])
            walk(token["children"])

    walk(md.toc_tokens)  # set by the toc extension
    return ids


def test_readme_links_into_the_docs() -> None:
    links = _relative_links(ROOT / "README.md")
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        target, _, anchor = link.partition("#")
        page = ROOT / target
        assert page.is_file(), f"README.md links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(page), f"README.md links to {link}: no such heading in {target}"


def test_readme_fits_two_screens_and_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    # .ci/run calls the second one verbatim
    assert "./scripts/setup.sh && .venv/bin/python scripts/demo.py\n" in readme
    assert "./scripts/setup.sh && .venv/bin/python -m pytest\n" in readme
    assert "./scripts/setup.sh && .venv/bin/python -m pytest\n" in (ROOT / ".ci" / "run").read_text()


def _crd_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crd_reference", ROOT / "scripts" / "crd_reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _field_paths(node: dict[str, Any], path: str) -> list[str]:
    out = []
    for name, sub in node.get("properties", {}).items():
        out.append(f"{path}.{name}")
        out.extend(_field_paths(sub, f"{path}.{name}"))
    if isinstance(node.get("items"), dict):
        out.extend(_field_paths(node["items"], f"{path}[]"))
    if isinstance(node.get("additionalProperties"), dict):
        out.extend(_field_paths(node["additionalProperties"], f"{path}.<key>"))
    return out


@pytest.mark.parametrize("crd", sorted(p.name for p in (ROOT / "crds").glob("*.yaml")))
def test_crd_reference_lists_every_field_the_api_server_gets(crd: str) -> None:
    """Read from the committed CRD files, not from the generator's own walk."""
    page = _crd_reference().render()
    definition = yaml.safe_load((ROOT / "crds" / crd).read_text())["spec"]
    schema = definition["versions"][0]["schema"]["openAPIV3Schema"]
    kind = definition["names"]["kind"]
    section = page.split(f"\n## {kind}\n", 1)[1].split("\n## ", 1)[0]
    for part in ("spec", "status"):
        for field in _field_paths(schema["properties"][part], part):
            assert f"| `{field}` |" in section, f"{kind}: {field} is missing from the CRD reference"


MANIFEST = re.compile(r"^ *```yaml\n(.*?)^ *```", re.DOTALL | re.MULTILINE)


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in MANIFEST.findall(page.read_text()):
            for doc in yaml.safe_load_all(textwrap.dedent(block)):
                if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("connectops.io/"):
                    found.append((f"{page.relative_to(ROOT)}: {doc['kind']} {doc['metadata']['name']}", doc))
    return found


def test_every_manifest_shown_is_one_the_models_accept() -> None:
    from connectops.models.connect_cluster import ConnectClusterSpec
    from connectops.models.connector import ConnectorSpec
    from connectops.models.group_failover import GroupFailoverSpec
    from connectops.models.offset_reset import OffsetResetSpec

    models: dict[str, Any] = {
        "ConnectCluster": ConnectClusterSpec,
        "Connector": ConnectorSpec,
        "OffsetReset": OffsetResetSpec,
        "GroupFailover": GroupFailoverSpec,
    }
    shown = _manifests()
    assert {doc["kind"] for _, doc in shown} == set(models)
    for where, doc in shown:
        try:
            models[doc["kind"]].model_validate(doc["spec"])
        except ValueError as error:
            pytest.fail(f"{where} is refused: {error}")
