"""The upstream SparkApplication CRD, applied to the test kube-apiserver.

``sparkapplications-crd.yaml`` is kubeflow/spark-operator's
``config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml`` at commit
d376e4d4fdec13ea2f233d98f79b9bc900ed5179 (controller-gen v0.17.1, ``apiextensions.k8s.io/v1``,
one version ``v1beta2``, served and stored, with the ``status`` subresource), verbatim apart from
a header comment. It has no ``x-kubernetes-validations`` (CEL) rules and no ``$ref``; every
keyword in it is known to kube-apiserver 1.20.

What the test kube-apiserver 1.20.2 does with it: it rejects the verbatim CRD with 422, 47 causes,
all of them the same: each ``default: ""`` (35 on the ``name`` of LocalObjectReference-style
``*Ref`` fields in env sources, volumes and projections, 12 on the probes' ``grpc.service``)
fails with ``Invalid value: "null": in body must be of type string: "null"``. That is
kubernetes/kubernetes#99804 ("Custom resource empty string / null validation broken with
go1.16"): the test environment builds 1.20.2 from source with go1.19 (tests/env/provision.sh),
and 1.20.2 (January 2021) predates that issue and its fix. A stock 1.20.2 (built with go1.15)
would accept the file. :func:`apply_sparkapplication_crd` therefore first submits the verbatim
CRD and, only if every rejection cause is such an empty-string default, strips exactly those
``default: ""`` keys (:func:`strip_empty_string_defaults`) and submits again. Nothing else is
changed (the test checks the server stored the rest as sent); the dropped defaults only fill in
"" for a reference name or a gRPC probe service a user leaves out, which nothing here uses.

The same bug applies to custom objects: on this server any string field holding ``""`` in a
SparkApplication (spec or status) is rejected with the same message. Upstream's Go types mark
those fields ``omitempty``, so the real controller never writes them; the harness omits them too.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from kubernetes.client.exceptions import ApiException

CRD_PATH = Path(__file__).with_name("sparkapplications-crd.yaml")
CRD_NAME = "sparkapplications.sparkoperator.k8s.io"
GROUP = "sparkoperator.k8s.io"
VERSION = "v1beta2"
PLURAL = "sparkapplications"
KIND = "SparkApplication"

#: Where the CRD came from (also in the YAML file's header comment).
SOURCE_REPO = "kubeflow/spark-operator"
SOURCE_PATH = "config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml"
SOURCE_COMMIT = "d376e4d4fdec13ea2f233d98f79b9bc900ed5179"
#: Length in characters of the upstream file (everything from its leading ``---`` line on).
SOURCE_CHARS = 797_708

_NULL_STRING_DEFAULT = 'Invalid value: "null"'


def load_crd() -> dict[str, Any]:
    """The CRD exactly as upstream ships it, parsed."""
    doc = yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise TypeError(f"{CRD_PATH} is not a YAML mapping")
    return doc


def upstream_text() -> str:
    """The upstream file's text: ours minus the header comment lines added above its ``---``."""
    text = CRD_PATH.read_text(encoding="utf-8")
    return text[text.index("---\n") :]


def _walk(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


def strip_empty_string_defaults(crd: dict[str, Any]) -> list[str]:
    """Remove, in place, every schema ``default: ""``; return the paths of the removed keys.

    Only schema objects (those with a ``type``) are touched, and only a ``default`` that is the
    empty string: exactly what kube-apiserver builds hit by kubernetes/kubernetes#99804 reject.
    """
    removed: list[str] = []
    for path, node in _walk(crd, "$"):
        if "type" in node and node.get("default") == "":
            del node["default"]
            removed.append(f"{path}.default")
    return removed


def _only_empty_string_defaults(error: ApiException) -> bool:
    if error.status != 422 or not error.body:
        return False
    body = json.loads(error.body)
    causes = ((body or {}).get("details") or {}).get("causes") or []
    return bool(causes) and all(
        str(c.get("field", "")).endswith(".default") and _NULL_STRING_DEFAULT in str(c.get("message", ""))
        for c in causes
    )


@dataclass(frozen=True)
class AppliedCRD:
    """What :func:`apply_sparkapplication_crd` submitted and what the server kept."""

    name: str
    #: ``default: ""`` keys removed because the server rejected them (empty: applied verbatim).
    stripped_defaults: tuple[str, ...]
    #: The CRD as submitted (after any stripping).
    submitted: dict[str, Any]
    #: The CRD as the server stores it, read back as JSON.
    stored: dict[str, Any]
    #: False when the CRD already existed and was left as it was.
    created: bool


def _read_raw(api_client: Any, name: str) -> dict[str, Any]:
    """The stored CRD as the server's JSON (the generated model would re-shape the schema)."""
    # Any: the generated client types these calls for models; raw JSON dicts are sent and read.
    ext: Any = kubernetes.client.ApiextensionsV1Api(api_client)
    resp = ext.read_custom_resource_definition(name, _preload_content=False)
    doc = json.loads(resp.data)
    if not isinstance(doc, dict):
        raise TypeError(f"unexpected CRD read-back for {name}")
    return doc


def _established(stored: dict[str, Any]) -> bool:
    conditions = (stored.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def apply_sparkapplication_crd(api_client: Any, *, timeout: float = 60.0) -> AppliedCRD:
    """Create the SparkApplication CRD (if absent) and wait until it is Established and served.

    ``api_client``: a ``kubernetes.client.ApiClient``. The CRD (about 800 kB) is created, never
    client-side applied: its ``last-applied-configuration`` annotation would exceed the 256 kB
    annotation limit.
    """
    ext: Any = kubernetes.client.ApiextensionsV1Api(api_client)
    crd = load_crd()
    stripped: list[str] = []
    created = True
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as error:
        if error.status == 409:
            created = False
        elif _only_empty_string_defaults(error):
            stripped = strip_empty_string_defaults(crd)
            try:
                ext.create_custom_resource_definition(crd)
            except ApiException as again:
                if again.status != 409:
                    raise
                created = False
        else:
            raise
    if not created:
        # Someone (an earlier test in this session) created it: report what the server holds.
        stored = _read_raw(api_client, CRD_NAME)
        if stored["spec"]["versions"] != crd["spec"]["versions"]:
            stripped = strip_empty_string_defaults(crd)

    deadline = time.monotonic() + timeout
    stored = _read_raw(api_client, CRD_NAME)
    while not _established(stored):
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {CRD_NAME} not Established after {timeout}s: {stored.get('status')}")
        time.sleep(0.2)
        stored = _read_raw(api_client, CRD_NAME)
    _wait_served(api_client, deadline)
    return AppliedCRD(CRD_NAME, tuple(stripped), copy.deepcopy(crd), stored, created)


def _wait_served(api_client: Any, deadline: float) -> None:
    """Established can precede the resource's REST handler by a moment (404 until it is in)."""
    custom: Any = kubernetes.client.CustomObjectsApi(api_client)
    while True:
        try:
            custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=1)
        except ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        else:
            return
