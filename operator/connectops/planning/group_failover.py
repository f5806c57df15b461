"""A consumer group's failover through MirrorMaker 2's checkpoints: pure planning, no I/O.

Translation follows connect-mirror-client 4.3.1: ``MirrorClient.remoteConsumerOffsets(group,
sourceAlias, timeout)`` (what ``RemoteClusterUtils.translateOffsets`` calls) reads partition 0 of
``<sourceAlias>.checkpoints.internal`` on the target from the beginning to its end, decodes every
record with ``Checkpoint.deserializeRecord`` and keeps, per remote topic-partition of the group,
the LAST checkpoint's downstream offset (a later record replaces an earlier one; nothing is
compared). :func:`latest_checkpoints` does the same.

What MirrorClient does not do and a failover must (each refuses before anything is written):

- a partition the group committed on the source with no checkpoint: the group would start there
  at ``auto.offset.reset`` (all or nothing read again);
- a checkpoint AHEAD of the committed offset (the group was rewound on the source after it): the
  translated offset would skip the records between, a silent loss;
- a checkpoint BEHIND the committed offset and older than the user's limit: MM2 has not
  checkpointed the group's progress (stopped, lagging, or the group is outside its ``groups``).
  A checkpoint AT the committed offset is exact however old: MM2 writes one only when the
  translated offset moves (``MirrorCheckpointTask.checkpointIsMoreRecent``), so an idle group's
  checkpoint ages while staying right.

Records read again: ``OffsetSyncStore.translateDownstream`` translates an upstream offset with
the latest sync at or before it, to its downstream offset when equal and to one past it
otherwise (it cannot know how many of the records between were replicated). The checkpoint's
downstream offset so names the sync it came from; with it, the records between that sync and the
checkpointed offset are read again: ``upstream - sync.upstream - 1`` at most (fewer when the
source has gaps there: transaction markers, compacted records). Plus what the group committed on
the source after the checkpoint (``committed - checkpoint.upstream``), again at most.

Failback (:func:`plan_failback`) reads the same flow's offset syncs in reverse (see
:func:`plan_failback`): a ``b -> a`` flow has no checkpoints of the group's ``a.<topic>``
positions (its MirrorSourceConnector skips a topic whose source is its target, ``isCycle``, so
OffsetSyncStore has no sync to translate them and MirrorCheckpointTask emits none). One module
(~580 lines): the translation, the refusals, MM2's record
formats and config, and the backup format are one contract with connect-mirror, kept together so
that a change of MM2's semantics is made in one place.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from connectops.models.offset_reset import OffsetsTopicLocation

#: a (topic, partition) pair
TopicPartition = tuple[str, int]

#: MirrorCheckpointConfig's defaults (connect-mirror 4.3.1)
DEFAULT_GROUPS: Final = ".*"
DEFAULT_GROUPS_EXCLUDE: Final = "console-consumer-.*,connect-.*,__.*"
DEFAULT_POLICY: Final = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
CHECKPOINT_CLASS: Final = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
#: partitions named in a refusal's message (the rest are counted)
NAMED: Final = 20


class FailoverRefused(Exception):
    """The failover cannot be done safely; nothing was written. ``partitions`` names the cause."""

    def __init__(self, message: str, partitions: Iterable[TopicPartition] = ()) -> None:
        super().__init__(message)
        self.partitions = sorted(partitions)


@dataclass(frozen=True)
class Checkpoint:
    """One record of the checkpoints topic (``Checkpoint.recordKey/recordValue``) and its time."""

    group: str
    topic: str
    partition: int
    upstream: int
    downstream: int
    timestamp_ms: int


@dataclass(frozen=True)
class OffsetSync:
    """One record of the offset-syncs topic (``OffsetSync.recordKey/recordValue``)."""

    topic: str
    partition: int
    upstream: int
    downstream: int


@dataclass(frozen=True)
class PartitionMove:
    topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int
    checkpoint_upstream: int | None
    checkpoint_age_seconds: float | None
    reread: int | None


@dataclass(frozen=True)
class FailoverPlan:
    moves: list[PartitionMove]

    @property
    def target_offsets(self) -> dict[TopicPartition, int]:
        return {(m.target_topic, m.partition): m.target_offset for m in self.moves}

    @property
    def reread_total(self) -> int | None:
        counts = [m.reread for m in self.moves]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def named(partitions: Iterable[TopicPartition]) -> str:
    items = sorted(partitions)
    text = ", ".join(f"{t}[{p}]" for t, p in items[:NAMED])
    return text + (f" and {len(items) - NAMED} more" if len(items) > NAMED else "")


# -- who may move which group ------------------------------------------------------------------


def parse_allowlist(text: str | None) -> dict[str, tuple[str, ...]]:
    """``{namespace: [group or prefix*, ...]}`` from JSON (the chart's failover.groups). Empty or
    unset allows nothing. An entry ending in ``*`` is a prefix; any other entry is one group."""
    if not text or not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError("the failover allowlist is not JSON") from None
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(e, str) and e for e in v) for k, v in raw.items()
    ):
        raise ValueError('the failover allowlist must be {"namespace": ["group", "prefix*", ...]}')
    return {k: tuple(v) for k, v in raw.items()}


def group_allowed(allowlist: Mapping[str, tuple[str, ...]], namespace: str, group: str) -> bool:
    for entry in allowlist.get(namespace, ()):
        if entry.endswith("*") and group.startswith(entry[:-1]):
            return True
        if entry == group:
            return True
    return False


# -- MM2's config, as its checkpoint connector runs it --------------------------------------------


@dataclass(frozen=True)
class CheckpointFlow:
    """What the MirrorCheckpointConnector's config says about the flow."""

    source_alias: str
    target_alias: str
    separator: str
    internal_separator_enabled: bool
    offset_syncs_location: str
    syncs_groups: bool

    def remote_topic(self, topic: str) -> str:
        """``DefaultReplicationPolicy.formatRemoteTopic``: ``<sourceAlias><sep><topic>``."""
        return f"{self.source_alias}{self.separator}{topic}"

    def _internal_sep(self) -> str:
        return self.separator if self.internal_separator_enabled else "."

    @property
    def checkpoints_topic(self) -> str:
        sep = self._internal_sep()
        return f"{self.source_alias}{sep}checkpoints{sep}internal"

    @property
    def offset_syncs_topic(self) -> str:
        # the alias of the cluster that does NOT hold it (MirrorConnectorConfig.offsetSyncsTopic)
        sep = self._internal_sep()
        alias = self.target_alias if self.offset_syncs_location == OffsetsTopicLocation.SOURCE else self.source_alias
        return f"mm2-offset-syncs{sep}{alias}{sep}internal"


def _regexes(text: str) -> list[re.Pattern[str]]:
    out = []
    for item in (part.strip() for part in text.split(",")):
        if item:
            try:
                out.append(re.compile(item))
            except re.error:
                # a Java regex Python cannot read: match it as a glob rather than never
                out.append(re.compile(fnmatch.translate(item)))
    return out


def mm2_syncs_group(config: Mapping[str, str], group: str) -> bool:
    """Whether a MirrorCheckpointConnector with ``config`` writes ``group``'s offsets on the target
    itself (``sync.group.offsets.enabled`` and the group passes ``groups`` / ``groups.exclude``,
    DefaultGroupFilter: full matches)."""
    if config.get("sync.group.offsets.enabled", "false").strip().lower() != "true":
        return False
    included = any(p.fullmatch(group) for p in _regexes(config.get("groups", DEFAULT_GROUPS)))
    excluded = any(p.fullmatch(group) for p in _regexes(config.get("groups.exclude", DEFAULT_GROUPS_EXCLUDE)))
    return included and not excluded


def checkpoint_flow(name: str, config: Mapping[str, str], group: str) -> CheckpointFlow:
    """The flow a MirrorCheckpointConnector's config describes; refused when it is not one, or
    under a replication policy whose remote topic names this planner does not know."""
    if config.get("connector.class", "").rsplit(".", 1)[-1] != CHECKPOINT_CLASS.rsplit(".", 1)[-1]:
        raise FailoverRefused(f"connector {name} is not a MirrorCheckpointConnector")
    policy = config.get("replication.policy.class", DEFAULT_POLICY)
    if policy.rsplit(".", 1)[-1] != DEFAULT_POLICY.rsplit(".", 1)[-1]:
        raise FailoverRefused(
            f"connector {name} uses {policy}: only DefaultReplicationPolicy's remote topics (<alias>.<topic>) are known"
        )
    source, target = config.get("source.cluster.alias", ""), config.get("target.cluster.alias", "")
    if not source or not target:
        raise FailoverRefused(f"connector {name} names no source.cluster.alias or target.cluster.alias")
    return CheckpointFlow(
        source_alias=source,
        target_alias=target,
        separator=config.get("replication.policy.separator", "."),
        internal_separator_enabled=config.get("replication.policy.internal.topic.separator.enabled", "true").lower()
        != "false",
        offset_syncs_location=config.get("offset-syncs.topic.location", "source"),
        syncs_groups=mm2_syncs_group(config, group),
    )


# -- translation -----------------------------------------------------------------------------------


def latest_checkpoints(checkpoints: Iterable[Checkpoint], group: str) -> dict[TopicPartition, Checkpoint]:
    """``MirrorClient.remoteConsumerOffsets``: the group's last checkpoint per remote partition,
    in log order (``checkpoints`` as read from partition 0 of the checkpoints topic)."""
    out: dict[TopicPartition, Checkpoint] = {}
    for cp in checkpoints:
        if cp.group == group:
            out[(cp.topic, cp.partition)] = cp
    return out


def reread_at_checkpoint(cp: Checkpoint, syncs: Iterable[OffsetSync]) -> int | None:
    """Records between the checkpoint's translated offset and its upstream offset (see the module
    doc); None when no sync of the partition explains its downstream offset (compacted away)."""
    found: int | None = None
    for sync in syncs:
        if sync.upstream == cp.upstream and sync.downstream == cp.downstream:
            found = 0
        elif sync.downstream == cp.downstream - 1 and sync.upstream < cp.upstream:
            found = cp.upstream - sync.upstream - 1
    return found


def plan_failover(
    *,
    flow: CheckpointFlow,
    group: str,
    committed: Mapping[TopicPartition, int],
    checkpoints: Iterable[Checkpoint],
    syncs: Mapping[TopicPartition, list[OffsetSync]],
    topics: Iterable[str] = (),
    now_ms: int,
    max_age_seconds: float,
) -> FailoverPlan:
    """Per partition the group committed on the source (within ``topics`` when given): its
    translated target offset and the records read again; :class:`FailoverRefused` (with the
    partitions) when a checkpoint is missing, ahead, or behind and too old."""
    wanted = set(topics)
    chosen = {tp: o for tp, o in committed.items() if not wanted or tp[0] in wanted}
    if not chosen:
        scope = f" on topics {sorted(wanted)}" if wanted else ""
        raise FailoverRefused(f"group {group} has no committed offsets on the source cluster{scope}")
    latest = latest_checkpoints(checkpoints, group)
    missing, ahead, stale = [], [], []
    moves = []
    for (topic, partition), offset in sorted(chosen.items()):
        cp = latest.get((flow.remote_topic(topic), partition))
        if cp is None:
            missing.append((topic, partition))
            continue
        age = max(0.0, (now_ms - cp.timestamp_ms) / 1000)
        if cp.upstream > offset:
            ahead.append((topic, partition))
            continue
        if cp.upstream < offset and age > max_age_seconds:
            stale.append((topic, partition))
            continue
        at_checkpoint = reread_at_checkpoint(cp, syncs.get((topic, partition), []))
        moves.append(
            PartitionMove(
                topic=topic,
                partition=partition,
                source_offset=offset,
                target_topic=cp.topic,
                target_offset=cp.downstream,
                checkpoint_upstream=cp.upstream,
                checkpoint_age_seconds=round(age, 3),
                reread=None if at_checkpoint is None else at_checkpoint + offset - cp.upstream,
            )
        )
    where = f"{flow.checkpoints_topic} on the target"
    if missing:
        raise FailoverRefused(
            f"no checkpoint of group {group} in {where} for {named(missing)}: MM2 has not translated "
            "them (not mirrored, outside the connector's groups/topics, or not checkpointed yet); "
            "nothing was written",
            missing,
        )
    if ahead:
        raise FailoverRefused(
            f"the checkpoint of group {group} is ahead of its committed offset on the source for "
            f"{named(ahead)} (the group was moved back after MM2 checkpointed it): translating would "
            "skip records; wait for MM2's next checkpoint; nothing was written",
            ahead,
        )
    if stale:
        raise FailoverRefused(
            f"the checkpoint of group {group} trails its committed offset and is older than "
            f"{max_age_seconds:g} s for {named(stale)}: MM2 is not checkpointing the group; nothing was written",
            stale,
        )
    return FailoverPlan(moves)


# -- failback ------------------------------------------------------------------------------------


def _since_rewind(syncs: Iterable[OffsetSync]) -> list[OffsetSync]:
    """The syncs after the last rewind (a sync below the one before it: the flow was reset and
    replicates again), as OffsetSyncStore keeps them."""
    kept: list[OffsetSync] = []
    for sync in syncs:
        if kept and (sync.upstream < kept[-1].upstream or sync.downstream < kept[-1].downstream):
            kept = []
        kept.append(sync)
    return kept


def failback_sync(syncs: Iterable[OffsetSync], downstream: int) -> OffsetSync | None:
    """The sync a failback translates target offset ``downstream`` from (:func:`plan_failback`):
    the latest at or before it, after the last rewind; None when every sync is past it (the syncs
    before were compacted away: the topic keeps the latest per partition)."""
    before = [s for s in _since_rewind(syncs) if s.downstream <= downstream]
    return before[-1] if before else None


def failback_ranges(
    *,
    flow: CheckpointFlow,
    committed: Mapping[TopicPartition, int],
    syncs: Mapping[TopicPartition, list[OffsetSync]],
    topics: Iterable[str] = (),
) -> dict[TopicPartition, tuple[int, int]]:
    """The records of the target's remote topics a failback counts (see :func:`plan_failback`):
    per partition of ``<sourceAlias>.<topic>`` the group committed on (``<topic>`` within
    ``topics`` when given), past its sync, ``{(remote topic, partition): (sync's downstream
    offset, the group's offset)}``."""
    prefix = f"{flow.source_alias}{flow.separator}"
    wanted = set(topics)
    out: dict[TopicPartition, tuple[int, int]] = {}
    for (remote, partition), offset in committed.items():
        if not remote.startswith(prefix) or (wanted and remote[len(prefix) :] not in wanted):
            continue
        sync = failback_sync(syncs.get((remote[len(prefix) :], partition), []), offset)
        if sync is not None and sync.downstream < offset:
            out[(remote, partition)] = (sync.downstream, offset)
    return out


def plan_failback(
    *,
    flow: CheckpointFlow,
    group: str,
    committed: Mapping[TopicPartition, int],
    syncs: Mapping[TopicPartition, list[OffsetSync]],
    records: Mapping[TopicPartition, int],
    source_ends: Mapping[TopicPartition, tuple[int, int]],
    topics: Iterable[str] = (),
) -> FailoverPlan:
    """Move the group back from the target to the source: per partition of a remote topic
    (``<sourceAlias>.<topic>``) it committed on the target at ``D``, the source offset of that
    position from the a -> b flow's syncs read in reverse: ``sync.upstream + n``, with the latest
    sync at or before ``D`` (:func:`failback_sync`) and ``n`` the records the remote topic holds
    from the sync's downstream offset up to ``D``.

    Counted, not subtracted: MirrorSourceTask writes a sync whenever the UPSTREAM offsets skip
    one (OffsetSyncWriter.PartitionState.update, connect-mirror 4.3.1: ``skippedUpstreamRecord``),
    so between two syncs every source offset is one record, in order; the DOWNSTREAM offsets may
    skip without a sync (a transaction marker after each transaction when the MM2 worker runs
    exactly-once source support), and ``sync.upstream + (D - sync.downstream)`` would then land
    past records the group never read.

    ``records``: per range of :func:`failback_ranges` (by remote topic-partition), how many
    records the target holds there (transaction markers and aborted records are none; a range
    not counted counts none: the group reads those offsets again rather than skip one).
    ``source_ends``: the source topics' (log start, end offset) per partition. Refused (with the
    partitions) when no sync translates a position, or the source no longer (or not yet) holds
    the record there: retention ran past it, or the source lost records the group read.

    ``reread`` is the offsets of the range that held no record: 0 on a remote topic without gaps
    (exact); else at most that many records read again (a compacted-away record between is one;
    a transaction marker is none)."""
    prefix = f"{flow.source_alias}{flow.separator}"
    wanted = set(topics)
    chosen = {
        (t[len(prefix) :], p): o
        for (t, p), o in committed.items()
        if t.startswith(prefix) and (not wanted or t[len(prefix) :] in wanted)
    }
    if not chosen:
        raise FailoverRefused(f"group {group} has no committed offsets on the target cluster's {prefix}* topics")
    untranslated, outside = [], []
    moves = []
    for (topic, partition), offset in sorted(chosen.items()):
        remote = flow.remote_topic(topic)
        sync = failback_sync(syncs.get((topic, partition), []), offset)
        if sync is None:
            untranslated.append((topic, partition))
            continue
        distance = offset - sync.downstream
        held = min(distance, records.get((remote, partition), 0)) if distance else 0
        upstream = sync.upstream + held
        start, end = source_ends.get((topic, partition), (0, -1))
        if not start <= upstream <= end:
            outside.append((topic, partition))
            continue
        moves.append(
            PartitionMove(
                topic=remote,
                partition=partition,
                source_offset=offset,
                target_topic=topic,
                target_offset=upstream,
                checkpoint_upstream=None,
                checkpoint_age_seconds=None,
                reread=distance - held,
            )
        )
    if untranslated:
        raise FailoverRefused(
            f"no offset sync of the flow translates group {group}'s position back for {named(untranslated)} "
            f"(in {flow.offset_syncs_topic}: none at or before it); nothing was written",
            untranslated,
        )
    if outside:
        raise FailoverRefused(
            f"the source cluster does not hold the record at group {group}'s translated position for "
            f"{named(outside)} (retention passed it, or the source lost records the group read on the target); "
            "nothing was written",
            outside,
        )
    return FailoverPlan(moves)


# -- backups ---------------------------------------------------------------------------------------


def backup_name(name: str, uid: str) -> str:
    """The backup ConfigMap of GroupFailover ``name`` (uid: a re-created object of the same name
    gets its own)."""
    digest = hashlib.sha256(uid.encode()).hexdigest()[:8]
    return f"connectops-failover-{name[:200]}-{digest}"


def backup_document(
    *, group: str, bootstrap: str, offsets: Mapping[TopicPartition, int], failover: str, taken_at: str
) -> str:
    return json.dumps(
        {
            "kind": "GroupFailoverBackup",
            "group": group,
            "cluster": bootstrap,
            "failover": failover,
            "takenAt": taken_at,
            "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())],
        },
        sort_keys=True,
    )


def read_backup(text: str, group: str, clusters: Iterable[str]) -> tuple[str, dict[TopicPartition, int]]:
    """The cluster (one of ``clusters``' bootstrap servers) and offsets of a backup document;
    refused when it is not one, another group's, or taken on another cluster (anyone who may
    write ConfigMaps in the namespace could have written it)."""
    unreadable = FailoverRefused("the ConfigMap is not a readable GroupFailover backup; nothing was written")
    try:
        doc = json.loads(text)
    except ValueError:
        raise unreadable from None
    if (
        not isinstance(doc, dict)
        or doc.get("kind") != "GroupFailoverBackup"
        or not isinstance(doc.get("offsets"), list)
    ):
        raise unreadable
    if doc.get("group") != group:
        raise FailoverRefused(f"the backup holds group {doc.get('group')!r}, not {group!r}; nothing was written")
    bootstrap = doc.get("cluster")
    known = sorted(clusters)
    if not isinstance(bootstrap, str) or bootstrap not in known:
        raise FailoverRefused(
            f"the backup was taken on cluster {bootstrap!r}, not one of this flow's ({', '.join(known)}); "
            "nothing was written"
        )
    out: dict[TopicPartition, int] = {}
    for item in doc["offsets"]:
        try:
            topic, partition, offset = str(item["topic"]), int(item["partition"]), int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise unreadable from None
        if offset < 0:
            raise unreadable
        out[(topic, partition)] = offset
    return bootstrap, out


__all__ = [
    "Checkpoint",
    "CheckpointFlow",
    "FailoverPlan",
    "FailoverRefused",
    "OffsetSync",
    "PartitionMove",
    "backup_document",
    "backup_name",
    "checkpoint_flow",
    "decode_checkpoint",
    "decode_offset_sync",
    "failback_ranges",
    "failback_sync",
    "group_allowed",
    "latest_checkpoints",
    "mm2_syncs_group",
    "parse_allowlist",
    "plan_failback",
    "plan_failover",
    "read_backup",
]


# -- MM2's record formats ------------------------------------------------------------------------


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    start = at + 2
    return data[start : start + length].decode(), start + length


def decode_checkpoint(key: bytes | None, value: bytes | None, timestamp_ms: int) -> Checkpoint | None:
    """``Checkpoint.deserializeRecord``: key = group, topic (int16-length strings), partition
    (int32); value = version (int16), upstream, downstream (int64), metadata. None for a record
    that is not one (MirrorClient skips those too: SchemaException)."""
    if key is None or value is None:
        return None
    try:
        group, at = _string(key, 0)
        topic, at = _string(key, at)
        (partition,) = struct.unpack_from(">i", key, at)
        _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    except (struct.error, UnicodeDecodeError):
        return None
    return Checkpoint(group, topic, partition, upstream, downstream, timestamp_ms)


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync | None:
    """``OffsetSync.deserializeRecord``: key = topic (int16-length string), partition (int32);
    value = upstream, downstream (int64)."""
    if key is None or value is None:
        return None
    try:
        topic, at = _string(key, 0)
        (partition,) = struct.unpack_from(">i", key, at)
        upstream, downstream = struct.unpack_from(">qq", value, 0)
    except (struct.error, UnicodeDecodeError):
        return None
    return OffsetSync(topic, partition, upstream, downstream)
