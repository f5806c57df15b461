"""The adapter's wire format: what Connect, the Java producer and MirrorMaker 2 put on Kafka.

Pure functions and record types, no client: the Java producer's murmur2 partitioner (Connect's
worker writes offsets with it, so a reset must pick the same partition), MM2's topic naming, and
the ``[connectorName, partitionMap]`` JSON keys of Connect's offsets topics with the records read
from and written to them. Everything here is deterministic and testable without a broker.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol

JSONDict = dict[str, Any]

# --------------------------------------------------------------------------------------------------
# Java-compatible partitioning
# --------------------------------------------------------------------------------------------------

_M: Final = 0x5BD1E995
_SEED: Final = 0x9747B28C
_MASK32: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2, seed ``0x9747b28c``, as a signed Java int.

    Needed because Connect's worker writes offsets with the *Java* producer, whose default
    partitioner places a keyed record in ``toPositive(murmur2(key)) % numPartitions``.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    n_words = length // 4
    for (word,) in struct.iter_unpack("<I", data[: n_words * 4]):
        k = (word * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = data[n_words * 4 :]
    rest = len(tail)
    # Java's switch falls through: 3 -> 2 -> 1, then one multiply.
    if rest >= 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for a keyed record.

    ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``; ``toPositive`` masks the sign bit
    (it is not ``abs``).
    """
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# --------------------------------------------------------------------------------------------------
# MirrorMaker 2 naming
# --------------------------------------------------------------------------------------------------


def offset_syncs_topic_name(
    source_alias: str,
    target_alias: str,
    location: Literal["source", "target"] = "source",
    separator: str = ".",
    internal_separator_enabled: bool = True,
) -> str:
    """The name MM2 gives its offset-syncs topic.

    Mirrors ``DefaultReplicationPolicy.offsetSyncsTopic(alias)``: ``"mm2-offset-syncs" + sep +
    alias + sep + "internal"``, where ``sep`` is ``replication.policy.separator`` unless
    ``replication.policy.internal.topic.separator.enabled=false``, which makes internal topics use
    ``"."`` whatever the separator. ``MirrorSourceConfig``/``MirrorCheckpointConfig.offsetSyncsTopic()``
    pass the alias of the *other* cluster: the TARGET alias when the topic lives on the source
    cluster (``offset-syncs.topic.location=source``, the default), the SOURCE alias when it lives on
    the target.
    """
    if location == "source":
        alias = target_alias
    elif location == "target":
        alias = source_alias
    else:
        raise ValueError(f"location must be 'source' or 'target', not {location!r}")
    sep = separator if internal_separator_enabled else "."
    return f"mm2-offset-syncs{sep}{alias}{sep}internal"


def checkpoints_topic_name(source_alias: str, separator: str = ".", internal_separator_enabled: bool = True) -> str:
    """``DefaultReplicationPolicy.checkpointsTopic(sourceAlias)``: on the target cluster."""
    sep = separator if internal_separator_enabled else "."
    return f"{source_alias}{sep}checkpoints{sep}internal"


# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------


class RawRecord(Protocol):
    """What :meth:`KafkaOffsets.restore_records` needs: where to write which bytes."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def key(self) -> bytes: ...

    @property
    def value(self) -> bytes | None: ...


@dataclass(frozen=True)
class OffsetRecord:
    """One record of a Connect offsets topic (or one to write back to it).

    ``key`` and ``value`` are the exact bytes from the topic: Connect's offset store is keyed by
    the raw key bytes, so anything written to reset or restore an offset must reuse them verbatim
    (re-serialising the parsed key may reorder fields or change escaping, and would then be a
    different key that resets nothing). ``connector`` and ``partition_map`` are parsed from the
    key (``[connectorName, partitionMap]``, JsonConverter with schemas disabled) and are ``None``
    when it does not have that shape. ``value is None`` is a tombstone (no offset stored).
    """

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes | None
    connector: str | None = field(default=None, compare=False)
    partition_map: JSONDict | None = field(default=None, compare=False, hash=False)
    timestamp_ms: int | None = field(default=None, compare=False)

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    def rewritten(self, value: bytes | None) -> OffsetRecord:
        """The record to write for this key with ``value`` (None: a tombstone): the same topic,
        partition and key bytes, not yet at any offset."""
        return replace(self, offset=-1, value=value, timestamp_ms=None)

    def source_offset(self) -> JSONDict | None:
        """The offset map (the JSON value), ``None`` for a tombstone or a non-object value."""
        if self.value is None:
            return None
        try:
            parsed = json.loads(self.value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None


def parse_offset_key(key: bytes | None) -> tuple[str, JSONDict] | None:
    """``(connectorName, partitionMap)`` from a Connect offsets key, or ``None`` if not that shape."""
    if not key:
        return None
    try:
        parsed = json.loads(key)
    except ValueError:
        return None
    if isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str) and isinstance(parsed[1], dict):
        return parsed[0], parsed[1]
    return None


def _key_connector(key: bytes) -> str | None:
    """The connector name of an offsets key, cheaply: no full JSON parse for the common case.

    A key starts with ``["`` and the name's JSON string; when that string holds no backslash its
    bytes *are* the UTF-8 name, so slicing is exact. Names with escapes take the slow path.
    """
    if not key.startswith(b'["'):
        return None
    end = key.find(b'"', 2)
    if end < 0:
        return None
    raw = key[2:end]
    if b"\\" not in raw and key[end + 1 : end + 2] == b",":
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    parsed = parse_offset_key(key)
    return parsed[0] if parsed else None


@dataclass(frozen=True)
class WrittenRecord:
    """Where the broker stored a record this adapter produced."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes | None


def _show(data: bytes, limit: int = 120) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "JSONDict",
    "OffsetRecord",
    "RawRecord",
    "WrittenRecord",
    "checkpoints_topic_name",
    "java_partition",
    "murmur2",
    "offset_syncs_topic_name",
    "parse_offset_key",
]
