"""kopf's diff base, kept as digests instead of a copy of the object.

kopf remembers the last handled "essence" of each object (spec, labels, annotations) to tell a
real change from noise. Its stock storage copies that essence into an annotation; a Connector
with a large config (or large annotations of its own) then carries it twice, the annotations
exceed the API server's 256 KiB limit, every patch fails, and the finalizer can never be removed.
The handlers only need to know *that* spec, labels or annotations changed (they always reconcile
from the live body, never from kopf's diff), so a digest per stanza is enough: same stanzas give
the same digests, and a changed stanza changes its digest under the same path, which is what
kopf's ``field="spec"`` filters look at.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, cast

import kopf


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class DigestDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """An annotation holding ``{"spec": {"sha256": ...}, "metadata": {...: {"sha256": ...}}}``."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        essence: dict[str, Any] = dict(super().build(body=body, extra_fields=extra_fields))
        digested: dict[str, Any] = {}
        for key, value in essence.items():
            if key == "metadata" and isinstance(value, dict):
                digested[key] = {k: {"sha256": _digest(v)} for k, v in value.items()}
            else:
                digested[key] = {"sha256": _digest(value)}
        return cast(kopf.BodyEssence, digested)
