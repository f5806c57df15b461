"""Documents larger than one ConfigMap, kept in several: a reset's full plan (its entries) and
its backup when they do not fit where they are named.

A document is gzipped and cut into pieces of :data:`CHUNK_BYTES`; the pieces after the first go
to ConfigMaps named after the head and the document's digest (two different documents under
one head never share a piece), created first; the head ConfigMap, created last, holds the
first piece and names the others, their count and the digest of the whole. So a head that
exists names a complete document, and a crash between the pieces and the head leaves pieces
that a retry writes again (create-only: found, kept) or that are garbage collected with their
owner. Every ConfigMap is created, never replaced: a document written once is the one read.

Reading treats the ConfigMaps as user input (anyone who may write ConfigMaps in the namespace
could have written them): the pieces must reassemble to the digest, and inflation is capped.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import zlib
from dataclasses import dataclass
from typing import Any, Final

from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.models import GROUP
from connectops.models.bounds import CONFIG_MAP_MAX_BYTES

#: compressed bytes per ConfigMap: base64 makes them 4/3 as many, under the 1 MiB a ConfigMap holds
CHUNK_BYTES: Final = (CONFIG_MAP_MAX_BYTES * 3 // 4) - 64 * 1024
#: the most ConfigMaps one document takes (~45 MiB compressed, some hundreds of MiB of offsets)
MAX_CHUNKS: Final = 64
#: the most a document may inflate to
INFLATED_LIMIT: Final = 512 << 20
PIECES = f"{GROUP}/chunks"
DIGEST = f"{GROUP}/chunks-digest"
KEY = "chunk.gz"


class ChunksInvalid(ValueError):
    """The ConfigMaps do not hold a readable document (missing piece, wrong digest, too large)."""


class TooLarge(ValueError):
    """The document needs more ConfigMaps than :data:`MAX_CHUNKS`."""


@dataclass(frozen=True)
class Written:
    names: list[str]
    """Every ConfigMap of the document, the head first."""
    created: bool
    """False: the head was there already (this document, or the one written first, is kept)."""
    compressed: int
    """Compressed bytes of the document written."""


def compress(document: bytes) -> bytes:
    # mtime=0: the same document compresses to the same bytes (the same digest) on a retry
    return gzip.compress(document, compresslevel=6, mtime=0)


def pieces_needed(compressed: int) -> int:
    return max(1, -(-compressed // CHUNK_BYTES))


async def write(
    kube: KubeClient,
    namespace: str,
    head: str,
    document: bytes,
    *,
    labels: dict[str, str],
    annotations: dict[str, str],
    owner: dict[str, Any] | None,
) -> Written:
    packed = compress(document)
    count = pieces_needed(len(packed))
    if count > MAX_CHUNKS:
        raise TooLarge(
            f"{len(document)} bytes ({len(packed)} compressed) need {count} ConfigMaps, more than {MAX_CHUNKS}"
        )
    digest = hashlib.sha256(packed).hexdigest()
    cut = [packed[i * CHUNK_BYTES : (i + 1) * CHUNK_BYTES] for i in range(count)]
    rest = [f"{head[:230]}-{digest[:10]}-{i}" for i in range(1, count)]
    for name, piece in zip(rest, cut[1:], strict=True):
        await kube.create_config_map(
            namespace,
            name,
            binary_data={KEY: base64.b64encode(piece).decode()},
            labels=labels,
            annotations={**annotations, DIGEST: digest},
            owner=owner,
        )
    created = await kube.create_config_map(
        namespace,
        head,
        binary_data={KEY: base64.b64encode(cut[0]).decode()},
        labels=labels,
        annotations={**annotations, DIGEST: digest, PIECES: ",".join(rest)},
        owner=owner,
    )
    return Written(names=[head, *rest], created=created, compressed=len(packed))


async def read(kube: KubeClient, namespace: str, head: str) -> bytes:
    """The document whose head ConfigMap is ``head`` (a KubeError other than a missing piece
    when one cannot be read now: retried)."""
    first = await kube.config_map(namespace, head)
    annotations = (first.metadata.annotations if first.metadata else None) or {}
    digest = annotations.get(DIGEST)
    if not digest:
        raise ChunksInvalid(f"ConfigMap {head} is not the head of a chunked document")
    names = [n for n in annotations.get(PIECES, "").split(",") if n]
    if len(names) + 1 > MAX_CHUNKS:
        raise ChunksInvalid(f"ConfigMap {head} names {len(names) + 1} pieces, more than {MAX_CHUNKS}")
    packed = _piece(first, head)
    for name in names:
        try:
            packed += _piece(await kube.config_map(namespace, name), name)
        except KubeObjectMissing as exc:
            raise ChunksInvalid(f"piece {name} of ConfigMap {head}: {exc}") from None
    if hashlib.sha256(packed).hexdigest() != digest:
        raise ChunksInvalid(f"the pieces of ConfigMap {head} do not add up to the document it names")
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        text = inflate.decompress(packed, INFLATED_LIMIT)
    except zlib.error:
        raise ChunksInvalid(f"ConfigMap {head}: not a gzip document") from None
    if inflate.unconsumed_tail:
        raise ChunksInvalid(f"ConfigMap {head}: the document is larger than {INFLATED_LIMIT >> 20} MiB inflated")
    return text


def _piece(cm: Any, name: str) -> bytes:
    data = cm.binary_data or {}
    if KEY not in data:
        raise ChunksInvalid(f"ConfigMap {name} holds no piece")
    try:
        return base64.b64decode(data[KEY])
    except ValueError:
        raise ChunksInvalid(f"ConfigMap {name}: its piece is not base64") from None


def is_chunked(cm: Any) -> bool:
    annotations = (cm.metadata.annotations if cm.metadata else None) or {}
    return bool(annotations.get(DIGEST)) and bool((cm.binary_data or {}).get(KEY))
