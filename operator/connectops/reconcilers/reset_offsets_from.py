"""An alter's entries read from ConfigMaps (``spec.offsetsFrom``), for alters too large to write
inline.

Why ConfigMaps: an OffsetReset's spec is one object, and an inline list of 20,000 entries is
~1.7 MB, over etcd's request limit, and client-side ``kubectl apply`` keeps a copy of the whole
object in a 256 KiB annotation; a ConfigMap holds ~1 MiB, and a gzip value in ``binaryData``
several times that. Only the reset's own namespace is read (the references are names), each
value is inflated with a cap and parsed with the same model as an inline entry, and the count is
bounded, so nothing a user writes there can make the operator hold more than
:data:`~connectops.models.offset_reset.ALTER_FROM_MAX_ENTRIES` entries. They are read once, at
inspect, before anything is stopped: the plan published then (reconcilers.reset_plan_store) is
what the reset writes, so an edit of a ConfigMap afterwards changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from connectops.adapters.kube import KubeClient, KubeForbidden, KubeObjectMissing
from connectops.models.offset_reset import (
    ALTER_FROM_MAX_ENTRIES,
    ALTER_FROM_MAX_INFLATED_BYTES,
    OffsetEntry,
    OffsetsConfigMapRef,
)
from connectops.planning.offset_reset import PlanError

_ENTRIES: TypeAdapter[list[OffsetEntry]] = TypeAdapter(list[OffsetEntry])


@dataclass(frozen=True)
class Loaded:
    entries: list[OffsetEntry]
    #: what was read, for the inspect step's message: ``name/key (resourceVersion N, M entries)``
    read: list[str]


def _value(ref: OffsetsConfigMapRef, data: Mapping[str, str], binary: Mapping[str, str | bytes], where: str) -> bytes:
    if not ref.key.endswith(".gz"):
        if ref.key not in data:
            raise PlanError(f"{where} has no key {ref.key!r} in data; nothing was changed")
        text = data[ref.key].encode()
        if len(text) > ALTER_FROM_MAX_INFLATED_BYTES:  # a ConfigMap cannot be this large; an answer is not trusted
            raise PlanError(f"{where} is larger than {ALTER_FROM_MAX_INFLATED_BYTES >> 20} MiB; nothing was changed")
        return text
    if ref.key not in binary:
        raise PlanError(
            f"{where} has no key {ref.key!r} in binaryData (a .gz key is read from there); nothing was changed"
        )
    try:
        packed = base64.b64decode(binary[ref.key], validate=True)
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = inflate.decompress(packed, ALTER_FROM_MAX_INFLATED_BYTES)
    except (binascii.Error, zlib.error):
        raise PlanError(f"{where} is not gzip data; nothing was changed") from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise PlanError(
            f"{where} inflates to more than {ALTER_FROM_MAX_INFLATED_BYTES >> 20} MiB (or is cut short); "
            "nothing was changed"
        )
    return text


def _parse(text: bytes, where: str) -> list[OffsetEntry]:
    try:
        return _ENTRIES.validate_json(text)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise PlanError(
            f"{where} is not a JSON list of {{partition, offset}} entries: at {loc or 'the top'}: {first['msg']} "
            f"({exc.error_count()} problem(s)); nothing was changed"
        ) from None


async def load(kube: KubeClient, namespace: str, refs: Sequence[OffsetsConfigMapRef], inline: int) -> Loaded:
    """Every entry the ConfigMaps hold, in order, after ``inline`` entries written in the spec.
    A ConfigMap that is missing, unreadable to the operator, not valid or over the bound refuses
    the reset (:class:`PlanError`: nothing is stopped yet); the API server being unreachable is
    retried as any other read of the inspect step."""
    entries: list[OffsetEntry] = []
    read: list[str] = []
    for i, ref in enumerate(refs):
        where = f"offsetsFrom[{i}] (ConfigMap {ref.name}, key {ref.key})"
        try:
            cm = await kube.config_map(namespace, ref.name)
        except KubeObjectMissing:
            raise PlanError(f"{where}: no such ConfigMap in namespace {namespace}; nothing was changed") from None
        except KubeForbidden as exc:
            raise PlanError(f"{where}: {exc}; nothing was changed") from None
        got = _parse(_value(ref, cm.data or {}, cm.binary_data or {}, where), where)
        if inline + len(entries) + len(got) > ALTER_FROM_MAX_ENTRIES:
            raise PlanError(
                f"the alter names more than {ALTER_FROM_MAX_ENTRIES} entries (offsets and offsetsFrom together, "
                f"counted up to {where}); split it over several OffsetResets; nothing was changed"
            )
        entries.extend(got)
        version = cm.metadata.resource_version if cm.metadata else None
        read.append(f"{ref.name}/{ref.key} (resourceVersion {version}, {len(got)} entries)")
    return Loaded(entries=entries, read=read)
