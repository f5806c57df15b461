#!/usr/bin/env python3
"""The CRD field reference (docs page ``reference/crds.md``), generated from the pydantic models.

An mkdocs hook (``hooks:`` in mkdocs.yml): every build adds the page, made from exactly what
``connectops crds`` writes (``connectops.crdgen.crd_for``, itself made from the models under
operator/connectops/models/), so the reference and the CRDs the API server enforces cannot
disagree and there is no committed copy to go stale. Run alone it prints the page:

    .venv/bin/python scripts/crd_reference.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from connectops import crdgen
from connectops.models import GROUP, VERSION

PAGE = "reference/crds.md"
JSON = dict[str, Any]

HEADER = f"""# CRD reference

Every field of the three custom resources of `{GROUP}/{VERSION}`, as the API server enforces
it: this page is generated at every docs build (`scripts/crd_reference.py`) from the same models
as the CRDs in `crds/` (`connectops crds`), so the two cannot disagree. The
type column says `?` for a field that may be `null`, `map[string]X` for a map with free keys, and
`any` for a free-form value kept as written. Constraints are checked at `kubectl apply`.
What the fields do, with examples: [Connectors](../connectors.md), [Offset resets](../resets.md),
[ConnectCluster](../connect-cluster.md).
"""


def _line(text: str) -> str:
    return text.replace("\n", " ").strip()


def _cell(text: str) -> str:
    """Prose in a table cell: a pipe would end the cell."""
    return _line(text).replace("|", "\\|")


def _code(text: str) -> str:
    """A code span, in a cell or not: Python-Markdown's tables never split inside one, and an
    escaped pipe there would show its backslash."""
    text = _line(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _type(node: JSON) -> str:
    if node.get("x-kubernetes-int-or-string"):
        kind = "int-or-string"
    elif node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        kind = "any" if node.get("type") != "object" else "object (free-form)"
    elif node.get("type") == "array":
        kind = f"{_type(node.get('items', {}))}[]"
    elif node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
        kind = f"map[string]{_type(node['additionalProperties'])}"
    else:
        kind = str(node.get("type", "any"))
    return kind + ("?" if node.get("nullable") else "")


_BOUNDS = (
    ("minimum", ">= {}"),
    ("maximum", "<= {}"),
    ("minLength", "length >= {}"),
    ("maxLength", "length <= {}"),
    ("minItems", "items >= {}"),
    ("maxItems", "items <= {}"),
    ("maxProperties", "keys <= {}"),
)
#: OpenAPI 3.0 spells an exclusive bound as a flag beside it
_STRICT = {"minimum": ("exclusiveMinimum", "> {}"), "maximum": ("exclusiveMaximum", "< {}")}


def _constraints(node: JSON, required: bool) -> str:
    said = ["**required**"] if required else []
    if "enum" in node:
        said.append("one of " + ", ".join(_code(json.dumps(v)) for v in node["enum"]))
    for key, form in _BOUNDS:
        if key in node:
            flag, strict = _STRICT.get(key, ("", form))
            said.append((strict if node.get(flag) is True else form).format(node[key]))
    if "pattern" in node:
        said.append(f"pattern {_code(node['pattern'])}")
    if "format" in node:
        said.append(f"format {_cell(node['format'])}")
    for rule in node.get("x-kubernetes-validations", []):
        said.append(
            f"rule {_code(rule.get('rule', ''))}" + (f": {_cell(rule['message'])}" if "message" in rule else "")
        )
    return "; ".join(said)


def _rows(node: JSON, path: str) -> Iterator[str]:
    required = set(node.get("required", []))
    for name, sub in node.get("properties", {}).items():
        here = f"{path}.{name}"
        default = _code(json.dumps(sub["default"])) if "default" in sub else ""
        yield (
            f"| `{here}` | {_cell(_type(sub))} | {default} | {_constraints(sub, name in required)} "
            f"| {_cell(sub.get('description', ''))} |"
        )
        yield from _children(sub, here)


def _children(node: JSON, path: str) -> Iterator[str]:
    if "properties" in node:
        yield from _rows(node, path)
    elif node.get("type") == "array" and isinstance(node.get("items"), dict):
        yield from _children(node["items"], f"{path}[]")
    elif isinstance(node.get("additionalProperties"), dict):
        yield from _children(node["additionalProperties"], f"{path}.<key>")


def _section(title: str, node: JSON, path: str) -> list[str]:
    rows = list(_rows(node, path))
    if not rows:
        return []
    rules = [
        f"- {_code(rule.get('rule', ''))}" + (f": {_line(rule['message'])}" if "message" in rule else "")
        for rule in node.get("x-kubernetes-validations", [])
    ]
    return [
        f"### {title}",
        "",
        "| field | type | default | constraints | description |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        *(["Rules the API server checks on the whole of it (CEL):", "", *rules, ""] if rules else []),
    ]


def render() -> str:
    lines = [HEADER]
    for kind in crdgen.KINDS:
        crd = crdgen.crd_for(kind)
        names = crd["spec"]["names"]
        version = crd["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        lines += [
            f"## {kind.kind}",
            "",
            _cell(schema.get("description", "")),
            "",
            f"`kubectl get {names['plural']}.{GROUP}`, short name "
            + ", ".join(f"`{s}`" for s in names["shortNames"])
            + ", categories "
            + ", ".join(f"`{c}`" for c in names["categories"])
            + f"; CRD `{crd['metadata']['name']}` (`crds/{GROUP}_{names['plural']}.yaml`).",
            "",
            "Columns of `kubectl get` (`-o wide` adds those of priority 1):",
            "",
            "| column | from | priority |",
            "| --- | --- | --- |",
            *(
                f"| {_cell(c['name'])} | {_code(c['jsonPath'])} | {c.get('priority', 0)} |"
                for c in version.get("additionalPrinterColumns", [])
            ),
            "",
            *_section(f"{kind.kind} spec", schema["properties"]["spec"], "spec"),
            *_section(f"{kind.kind} status", schema["properties"]["status"], "status"),
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """mkdocs hook: add the generated page before links are validated, so links to it are checked."""
    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    sys.stdout.write(render())
