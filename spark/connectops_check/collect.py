"""The thin collection edge: Connect REST and Kafka admin calls -> a :class:`Snapshot`.

Why thin: everything that can be computed is computed later from the snapshot (on Spark,
replayable from a file); this module only asks questions and records answers. It runs on the
Spark driver, sampling ``samples`` times every ``interval_s`` seconds.

Per connector kind:
- sink: group ``consumer.override.group.id`` or ``connect-<name>`` (``connectops_rules.connect``,
  the operator's rule too); committed offsets by
  OffsetFetch, log-end and log-start by ListOffsets, members by DescribeGroups.
- MirrorMaker 2 source (class ending in ``MirrorSourceConnector``, or any source connector
  whose stored offsets all have MM2's shape, ``{cluster, topic, partition} -> {offset}``: MM2
  forks and wrappers keep the shape, not the name; ``connectops_rules.mm2``, which the operator
  applies too): MM2 reads without a consumer group, so its
  positions come from ``GET /connectors/<name>/offsets`` (KIP-875, Connect 3.5+), and log-end
  from the SOURCE cluster (``source.cluster.bootstrap.servers`` unless given). Each task's
  partitions come from its ``task.assigned.partitions`` config.
  Why GET /offsets and not the offsets topic itself: the worker answers it from a fresh read of
  the offsets topic to its end (``Worker.sourceConnectorOffsets`` starts a new offset store),
  merging a connector-specific offsets topic when one is configured and dropping tombstones.
  Reading the topic directly would repeat all of that, and would need the worker's
  ``offset.storage.topic`` (not visible over REST) and read access to an internal topic.
- MirrorMaker 2 checkpoint (class ending in ``MirrorCheckpointConnector``, or offsets all of
  shape ``{group, topic, partition} -> {offset: 0}``): its Connect offsets are always 0, so
  they say nothing; the checkpoints themselves are records in ``<source alias><sep>checkpoints
  <sep>internal`` on the TARGET cluster (``target.cluster.bootstrap.servers``, else
  ``bootstrap``): key ``(group, topic, partition)``, value ``(version, upstreamOffset,
  downstreamOffset, metadata)`` in Kafka's protocol encoding (``Checkpoint.java``), where topic
  is the group's upstream topic renamed as the target sees it. Checkpoint lag per (group,
  upstream topic, partition) = the group's committed offset on the SOURCE cluster - the
  ``upstreamOffset`` of its latest checkpoint: the records the group has consumed since the
  last checkpoint, which a consumer failing over to the target now would read again (a
  partition of a checkpointed topic with no checkpoint yet counts its whole committed offset:
  the target knows nothing of it). Why the upstream offset and not the downstream one: both
  sides of the subtraction are then offsets of the same source partition. MM2 emits
  a checkpoint only when its translated downstream offset advances (``MirrorCheckpointTask.
  checkpointIsMoreRecent``), so a group that moved within one offset-sync step keeps a small
  lag until the next sync: that lag is real (the failover would re-read it), not an artefact.
  A consumer failing over starts at the checkpoint's DOWNSTREAM offset, which MM2 rounds to one
  past the offset sync before it: so at the last sample the offset-syncs topic is read too
  (where ``offset-syncs.topic.location`` puts it), and the records that consumer would read
  again are counted per partition, rounding included (``offset_syncs``; the snapshot's
  ``failover``).
- any other source: nothing broker-side to compare its offsets with; the snapshot says why.
  With the workers' metrics URLs, its tasks are scraped at every sample instead (producer
  pressure, ``producer_check``).

Why one module of ~1000 lines: every call the job makes to the outside world is here, each with
its bounds and fallbacks, so reviewing what the job may reach is reading one file.

An admin API the broker does not support degrades one number, not the run: the snapshot's
``notes`` say which call failed and which fallback was used (and the verdict repeats them).
"""

from __future__ import annotations

import re
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException
from confluent_kafka import ConsumerGroupTopicPartitions as GroupPartitions
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

# confluent-kafka documents ``confluent_kafka.admin.OffsetSpec`` but neither re-exports it
# explicitly nor annotates its factory methods: the ignores below cover only that.
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # isort: skip
from connectops_check.offset_syncs import (
    LOCATION_SOURCE,
    SyncLog,
    decode_offset_sync,
    failover_reread,
    offset_syncs_location,
    offset_syncs_topic,
    protocol_string,
)
from connectops_check.snapshot import (
    PRODUCER_SETTINGS,
    ConnectorKind,
    Member,
    PartitionSample,
    Sample,
    Scrape,
    Snapshot,
    TaskInfo,
    TopicPartition,
    WindowStartOffset,
)
from connectops_check.urls import redact_userinfo, shown_url
from connectops_check.worker_metrics import ExpositionError, TaskFigures, parse_worker_metrics, read_exposition
from connectops_rules import connect
from connectops_rules.mm2 import Mm2Role, role_by_class, role_by_offsets

#: what the check measures of each MirrorMaker 2 connector (connectops_rules.mm2 recognises
#: them): the heartbeat connector has nothing broker-side to measure, like any other source
MIRROR_KINDS = {
    Mm2Role.SOURCE: ConnectorKind.MIRROR_SOURCE,
    Mm2Role.CHECKPOINT: ConnectorKind.MIRROR_CHECKPOINT,
    Mm2Role.HEARTBEAT: ConnectorKind.SOURCE,
}
#: collection notes kept (one per distinct failure), so a flapping endpoint cannot grow the verdict
MAX_NOTES = 50
REQUEST_TIMEOUT_S = 15.0
LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
EARLIEST: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]


class OffsetAnswer(NamedTuple):
    offset: int
    timestamp: int


class CollectionError(RuntimeError):
    """Collection cannot produce a snapshot at all (unknown connector, unreachable worker)."""


@dataclass(frozen=True, slots=True)
class ConnectorInfo:
    name: str
    type: str
    config: dict[str, str]
    state: str
    tasks: list[TaskInfo]

    @property
    def connector_class(self) -> str:
        return self.config.get("connector.class", "")

    @property
    def role(self) -> Mm2Role | None:
        """The MirrorMaker 2 role its class names (connectops_rules.mm2)."""
        return role_by_class(self.connector_class, self.type)

    @property
    def kind(self) -> ConnectorKind:
        """The kind by the class (the stored offsets may still say MM2: ``kind_from_offsets``)."""
        if self.type == "sink":
            return ConnectorKind.SINK
        role = self.role
        return ConnectorKind.SOURCE if role is None else MIRROR_KINDS[role]


class ConnectRest:
    """The few Connect REST calls a check needs; names are path-encoded (``/`` included)."""

    def __init__(
        self, url: str, timeout_s: float = 10.0, retries: int = 5, auth: tuple[str, str] | None = None
    ) -> None:
        self._http = httpx.Client(
            base_url=url.rstrip("/"), timeout=timeout_s, auth=httpx.BasicAuth(*auth) if auth else None
        )
        self._retries = retries

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str) -> httpx.Response:
        """GET, retrying 409: Connect answers 409 while its worker group rebalances."""
        for attempt in range(self._retries):
            response = self._http.get(path)
            if response.status_code != 409:
                return response
            time.sleep(0.5 * (attempt + 1))
        return response

    def _json(self, path: str) -> Any:
        response = self._get(path)
        if response.status_code == 404:
            raise CollectionError(f"Connect REST {path}: 404 {response.text.strip()}")
        response.raise_for_status()
        return response.json()

    def info(self, name: str) -> ConnectorInfo:
        base = f"/connectors/{quote(name, safe='')}"
        connector = self._json(base)
        status = self._json(f"{base}/status")
        return ConnectorInfo(
            name=name,
            type=str(connector.get("type") or status.get("type") or ""),
            config={str(k): str(v) for k, v in connector.get("config", {}).items()},
            state=str(status.get("connector", {}).get("state", "")),
            tasks=parse_task_status(status),
        )

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        tasks = self._json(f"/connectors/{quote(name, safe='')}/tasks")
        return list(tasks) if isinstance(tasks, list) else []

    def worker_version(self) -> str | None:
        """The worker's Kafka version (``GET /``), None when it does not say."""
        try:
            answer = self._json("/")
        except (httpx.HTTPError, CollectionError, ValueError):
            return None
        version = answer.get("version") if isinstance(answer, dict) else None
        return str(version)[:64] if version is not None else None

    def offsets(self, name: str) -> dict[str, Any] | None:
        """KIP-875 offsets, or None when the worker predates them (Connect < 3.5)."""
        response = self._get(f"/connectors/{quote(name, safe='')}/offsets")
        if response.status_code in (404, 405):  # the connector exists (checked first): no endpoint
            return None
        response.raise_for_status()
        payload = response.json()
        return payload if isinstance(payload, dict) else None


def parse_task_status(status: Mapping[str, Any]) -> list[TaskInfo]:
    return sorted(
        (
            TaskInfo(
                task_id=int(t["id"]),
                worker_id=str(t.get("worker_id", "")),
                state=str(t.get("state", "")),
                trace=t.get("trace"),
            )
            for t in status.get("tasks", [])
        ),
        key=lambda t: t.task_id,
    )


def parse_mirror_offsets(payload: Mapping[str, Any]) -> dict[TopicPartition, int]:
    """MirrorSourceConnector offsets: partition ``{cluster, topic, partition}``, offset ``{offset}``.

    Entries of other shapes (a checkpoint or heartbeat partition, a null offset) are skipped:
    they are not replication positions.
    """
    stored: dict[TopicPartition, int] = {}
    for entry in payload.get("offsets", []):
        part, off = entry.get("partition") or {}, entry.get("offset") or {}
        if "topic" in part and "partition" in part and off.get("offset") is not None:
            stored[TopicPartition(str(part["topic"]), int(part["partition"]))] = int(off["offset"])
    return stored


def kind_from_offsets(payload: Mapping[str, Any] | None) -> ConnectorKind | None:
    """MirrorMaker 2 recognised by what it stores, whatever its class is called: every non-null
    entry has one MM2 connector's exact shape (``connectops_rules.mm2.role_by_offsets``). None
    for anything else, and for the heartbeat connector (nothing to measure)."""
    role = role_by_offsets((payload or {}).get("offsets", []))
    kind = None if role is None else MIRROR_KINDS[role]
    return None if kind is ConnectorKind.SOURCE else kind


class Checkpoint(NamedTuple):
    """One record of MM2's checkpoints topic (``org.apache.kafka.connect.mirror.Checkpoint``)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    """Key ``(group STRING, topic STRING, partition INT32)``; value a header ``(version INT16)``
    then, for version 0, ``(upstreamOffset INT64, offset INT64, metadata STRING)``, where
    ``offset`` is the downstream offset. ValueError for anything else."""
    try:
        group, pos = protocol_string(key, 0)
        topic, pos = protocol_string(key, pos)
        (partition,) = struct.unpack_from(">i", key, pos)
        (version,) = struct.unpack_from(">h", value, 0)
        if version != 0:
            raise ValueError(f"checkpoint value version {version}, only 0 is known")
        upstream, downstream = struct.unpack_from(">qq", value, 2)
        metadata, _ = protocol_string(value, 18)
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(str(error)) from error
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def replication_separators(config: Mapping[str, str]) -> tuple[str, str]:
    """``(separator, internal-topic separator)`` of MM2's DefaultReplicationPolicy: internal topics
    use ``replication.policy.separator`` unless ``replication.policy.internal.topic.separator.
    enabled`` is false, when they keep ``.``."""
    sep = config.get("replication.policy.separator", ".") or "."
    enabled = config.get("replication.policy.internal.topic.separator.enabled", "true").strip().lower() != "false"
    return sep, sep if enabled else "."


def checkpoints_topic(source_alias: str, internal_sep: str) -> str:
    return f"{source_alias}{internal_sep}checkpoints{internal_sep}internal"


def original_topic(topic: str, sep: str) -> str:
    """DefaultReplicationPolicy.originalTopic: every ``<alias><sep>`` prefix removed."""
    while sep in topic:
        topic = topic.split(sep, 1)[1]
    return topic


def renamed_topic(upstream: str, source_alias: str, target_alias: str | None, sep: str) -> str:
    """The topic a checkpoint names for a group's upstream topic (MirrorCheckpointTask.
    renameTopicPartition): a topic that came from the target loses its prefixes, any other
    gains ``<source alias><sep>``."""
    if target_alias and sep in upstream and upstream.split(sep, 1)[0] == target_alias:
        return original_topic(upstream, sep)
    return f"{source_alias}{sep}{upstream}"


def checkpoint_row(group: str, topic: str) -> str:
    """A checkpoint row's name: ``<group>:<upstream topic>``; ``:`` cannot occur in a topic."""
    return f"{group}:{topic}"


def parse_assigned_partitions(value: str) -> list[TopicPartition]:
    """MM2's ``task.assigned.partitions``: comma-separated ``TopicPartition.toString()``, i.e.
    ``<topic>-<partition>``; the topic may itself contain dashes, the partition is the last part."""
    out: list[TopicPartition] = []
    for item in value.split(","):
        topic, _, number = item.strip().rpartition("-")
        if topic and number.isdigit():
            out.append(TopicPartition(topic, int(number)))
    return out


def task_id_from_client_id(connector: str, client_id: str) -> int | None:
    """A sink task's consumer is named ``connector-consumer-<connector>-<task>`` by the worker."""
    prefix = f"connector-consumer-{connector}-"
    rest = client_id[len(prefix) :] if client_id.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def sink_topics(config: Mapping[str, str], available: Iterable[str]) -> list[str]:
    """The topics a sink reads: its ``topics`` list, or the ``topics.regex`` matches.

    The regex must match the whole name (Java's ``Matcher.matches``); topics whose name
    starts with ``__`` are broker-internal and excluded, as the consumer excludes them.
    """
    listed = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    if listed:
        return listed
    pattern = config.get("topics.regex", "")
    if not pattern:
        return []
    regex = re.compile(pattern)
    return sorted(t for t in available if not t.startswith("__") and regex.fullmatch(t))


def now_ms() -> int:
    return int(time.time() * 1000)


ACTIVE_GROUP_STATES = frozenset({"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"})


def _state_name(state: object) -> str:
    """``ConsumerGroupState.STABLE`` -> ``STABLE`` (the enum's name, whatever its type)."""
    return str(getattr(state, "name", state)).upper()


class _Kafka:
    """One admin client and the offsets calls, each returning None on an unsupported API."""

    def __init__(self, bootstrap: str, client_config: Mapping[str, str] | None, notes: list[str], label: str):
        conf: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.admin = AdminClient(conf)
        self.notes = notes
        self.label = label

    def _note(self, call: str, error: BaseException) -> None:
        message = f"{self.label}: {call} failed: {error}"
        if message not in self.notes:
            self.notes.append(message)

    def topic_partitions(self) -> dict[str, list[int]]:
        """Every topic on the cluster and its partition numbers (one metadata request)."""
        metadata = self.admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        return {name: sorted(meta.partitions) for name, meta in sorted(metadata.topics.items()) if meta.error is None}

    def list_offsets(
        self, partitions: list[TopicPartition], spec: OffsetSpec, call: str
    ) -> dict[TopicPartition, OffsetAnswer] | None:
        """Answers per partition; partitions the broker refuses are left out (and noted).

        None only when no partition got an answer, which is what an unsupported request
        looks like; one deleted topic must not blank out the others.
        """
        if not partitions:
            return {}
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in partitions}
        try:
            futures = self.admin.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
        except (KafkaException, NotImplementedError) as error:
            self._note(call, error)
            return None
        answers: dict[TopicPartition, OffsetAnswer] = {}
        failed: list[str] = []
        for ktp, future in futures.items():
            try:
                a = future.result(timeout=REQUEST_TIMEOUT_S)
            except (KafkaException, TimeoutError) as error:
                failed.append(f"{ktp.topic}-{ktp.partition}: {error}")
                continue
            answers[TopicPartition(ktp.topic, ktp.partition)] = OffsetAnswer(int(a.offset), int(a.timestamp))
        if failed:
            self._note(call, RuntimeError(f"{len(failed)} partitions failed, first: {failed[0]}"))
        return answers or None

    def log_offsets(
        self, partitions: list[TopicPartition], spec: OffsetSpec, call: str
    ) -> dict[TopicPartition, int] | None:
        found = self.list_offsets(partitions, spec, call)
        return None if found is None else {tp: a.offset for tp, a in found.items()}

    def committed(self, group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None] | None:
        request = [GroupPartitions(group, [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions])]
        try:
            result = self.admin.list_consumer_group_offsets(request, request_timeout=REQUEST_TIMEOUT_S)[group]
            answer = result.result(timeout=REQUEST_TIMEOUT_S)
        except (KafkaException, NotImplementedError, TimeoutError) as error:
            self._note(f"list_consumer_group_offsets({group})", error)
            return None
        out: dict[TopicPartition, int | None] = {}
        for ktp in answer.topic_partitions or []:
            # librdkafka reports "nothing committed" as OFFSET_INVALID (-1001)
            ok = ktp.error is None and ktp.offset is not None and ktp.offset >= 0
            out[TopicPartition(ktp.topic, ktp.partition)] = int(ktp.offset) if ok else None
        return out

    def committed_all(self, group: str) -> dict[TopicPartition, int] | None:
        """Every partition ``group`` has a committed offset for (None when the call failed)."""
        try:
            result = self.admin.list_consumer_group_offsets([GroupPartitions(group)], request_timeout=REQUEST_TIMEOUT_S)
            answer = result[group].result(timeout=REQUEST_TIMEOUT_S)
        except (KafkaException, NotImplementedError, TimeoutError) as error:
            self._note(f"list_consumer_group_offsets({group})", error)
            return None
        return {
            TopicPartition(ktp.topic, ktp.partition): int(ktp.offset)
            for ktp in answer.topic_partitions or []
            if ktp.error is None and ktp.offset is not None and ktp.offset >= 0
        }

    def members(self, group: str, connector: str) -> list[Member] | None:
        try:
            future = self.admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)[group]
            description = future.result(timeout=REQUEST_TIMEOUT_S)
        except (KafkaException, NotImplementedError, TimeoutError) as error:
            self._note(f"describe_consumer_groups({group})", error)
            return None
        if not description.members and _state_name(description.state) in ACTIVE_GROUP_STATES:
            # Kafka never has an active group without members; a broker answering so does not
            # report membership (some Kafka-protocol brokers do), which is "unknown", not "nobody".
            self.notes.append(
                f"{self.label}: describe_consumer_groups({group}) reported state "
                f"{_state_name(description.state)} with no members: membership unknown"
            )
            return None
        members: list[Member] = []
        for m in description.members or []:
            assigned = m.assignment.topic_partitions if m.assignment is not None else []
            members.append(
                Member(
                    member_id=str(m.member_id),
                    client_id=str(m.client_id),
                    host=str(m.host),
                    task_id=task_id_from_client_id(connector, str(m.client_id)),
                    assignment=sorted(TopicPartition(tp.topic, tp.partition) for tp in assigned),
                )
            )
        return sorted(members, key=lambda m: m.member_id)


def collect_snapshot(
    bootstrap: str,
    connect_url: str,
    connector: str,
    samples: int,
    interval_s: float,
    client_config: Mapping[str, str] | None = None,
    *,
    source_bootstrap: str | None = None,
    source_client_config: Mapping[str, str] | None = None,
    window_start_ms: int | None = None,
    metrics_urls: Sequence[str] = (),
    kind: ConnectorKind | None = None,
    sleep: Callable[[float], None] = time.sleep,
    connect_auth: tuple[str, str] | None = None,
    metrics_auth: tuple[str, str] | None = None,
) -> Snapshot:
    """Samples a connector ``samples`` times, ``interval_s`` apart, and returns the snapshot.

    ``bootstrap`` is the cluster a sink reads; for MirrorMaker 2 the log-ends and the groups'
    offsets come from ``source_bootstrap`` or its ``source.cluster.bootstrap.servers``, and a
    checkpoint connector's checkpoints from its ``target.cluster.bootstrap.servers`` or else
    ``bootstrap``. ``window_start_ms`` starts the traffic window (default: the first sample).
    ``metrics_urls``: the workers' Prometheus endpoints; a source connector's tasks are scraped
    at every sample for the producer-pressure diagnosis (``pressure``). ``kind`` overrides what
    the class name and the stored offsets say (``--kind``). ``connect_auth`` and ``metrics_auth``:
    the basic auth (user, password) of the REST API and of the metrics endpoints.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    rest = ConnectRest(connect_url, auth=connect_auth)
    try:
        info = rest.info(connector)
        snapshot = Snapshot(
            connector=connector,
            kind=kind or info.kind,
            connector_class=info.connector_class,
            connector_state=info.state,
            tasks=info.tasks,
        )
        if kind is not None and kind is not info.kind:
            snapshot.notes.append(f"measured as {kind.value} as asked (--kind), not as {info.kind.value}")
        elif snapshot.kind is ConnectorKind.SOURCE and info.role is None:
            shaped = _shape_kind(rest, connector, snapshot.notes)
            if shaped is not None:
                snapshot.kind = shaped
                snapshot.notes.append(
                    f"measured as {shaped.value}: every stored offset has MirrorMaker 2's shape "
                    f"(class {info.connector_class or 'unknown'})"
                )
        if snapshot.kind is ConnectorKind.SINK:
            _collect_sink(snapshot, info, bootstrap, client_config, samples, interval_s, window_start_ms, sleep)
        elif snapshot.kind is ConnectorKind.MIRROR_CHECKPOINT:
            _collect_checkpoints(
                snapshot,
                info,
                rest.task_configs(info.name),
                info.config.get("target.cluster.bootstrap.servers") or bootstrap,
                client_config,
                source_bootstrap or info.config.get("source.cluster.bootstrap.servers"),
                source_client_config,
                samples,
                interval_s,
                sleep,
            )
        elif snapshot.kind is ConnectorKind.MIRROR_SOURCE:
            _collect_mirror(
                snapshot,
                info,
                rest,
                source_bootstrap or info.config.get("source.cluster.bootstrap.servers"),
                source_client_config,
                samples,
                interval_s,
                window_start_ms,
                sleep,
            )
        else:
            snapshot.not_applicable_reason = (
                f"{info.connector_class or 'this source connector'} keeps connector-defined offsets in the "
                "Connect offsets topic; there is no broker-side log-end to measure its lag against"
            )
            if metrics_urls:
                snapshot.worker_version = rest.worker_version()
                overrides = {k: info.config.get(PRODUCER_OVERRIDE + k) for k in PRODUCER_SETTINGS}
                snapshot.producer_overrides = {k: v for k, v in overrides.items() if v is not None}
                _collect_scrapes(snapshot, metrics_urls, samples, interval_s, sleep, metrics_auth)
        if snapshot.samples or snapshot.scrapes:
            # Task states at the END of the window decide which owners count as alive.
            final = rest.info(connector)
            snapshot.connector_state, snapshot.tasks = final.state, final.tasks
    except httpx.HTTPError as error:
        # httpx's words may quote the URL: its user-info, if any, is not repeated
        raise CollectionError(f"Connect REST at {shown_url(connect_url)}: {redact_userinfo(str(error))}") from error
    finally:
        rest.close()
    return snapshot


def _shape_kind(rest: ConnectRest, connector: str, notes: list[str]) -> ConnectorKind | None:
    """MirrorMaker 2 by its stored offsets; a worker that cannot list them leaves the connector an
    ordinary source (noted), since the check still has its producer diagnosis to give."""
    try:
        return kind_from_offsets(rest.offsets(connector))
    except (httpx.HTTPStatusError, ValueError) as error:
        notes.append(f"GET /connectors/{connector}/offsets failed ({str(error)[:200]}): not checked for MM2's shape")
        return None


PRODUCER_OVERRIDE = "producer.override."
#: a scrape that does not answer within this long is skipped (noted), not waited for
SCRAPE_TIMEOUT_S = 5.0


def scrape_workers(
    urls: Sequence[str], connector: str, notes: list[str], client: httpx.Client | None = None
) -> list[TaskFigures]:
    """This connector's task figures from every worker's exposition (a task runs on one worker).

    Each body is streamed and refused past ``worker_metrics``' size bound, so a URL that answers
    forever or with gigabytes cannot exhaust the driver's memory; a failing worker is a note.
    """
    owned = client is None
    http = client or httpx.Client(timeout=SCRAPE_TIMEOUT_S, follow_redirects=False)
    found: dict[tuple[str, int], TaskFigures] = {}
    try:
        for url in urls:
            try:
                with http.stream("GET", url, headers={"Accept": "text/plain"}) as response:
                    response.raise_for_status()
                    text = read_exposition(response.iter_bytes())
                found.update(parse_worker_metrics(text, connector))
            except (httpx.HTTPError, ExpositionError) as error:
                note = f"metrics {shown_url(url)[:200]}: {type(error).__name__}: {redact_userinfo(str(error))[:200]}"
                if note not in notes and len(notes) < MAX_NOTES:
                    notes.append(note)
    finally:
        if owned:
            http.close()
    return [found[k] for k in sorted(found)]


def _collect_scrapes(
    snapshot: Snapshot,
    urls: Sequence[str],
    samples: int,
    interval_s: float,
    sleep: Callable[[float], None],
    auth: tuple[str, str] | None = None,
) -> None:
    basic = httpx.BasicAuth(*auth) if auth else None
    with httpx.Client(timeout=SCRAPE_TIMEOUT_S, follow_redirects=False, auth=basic) as http:
        for _ in _sampling(samples, interval_s, sleep):
            ts = now_ms()
            snapshot.scrapes.append(Scrape(ts, scrape_workers(urls, snapshot.connector, snapshot.notes, http)))


def _sampling(samples: int, interval_s: float, sleep: Callable[[float], None]) -> Iterable[int]:
    """Yields sample numbers at a fixed cadence (start to start), whatever each sample costs."""
    start = time.monotonic()
    for i in range(samples):
        if i:
            sleep(max(0.0, start + i * interval_s - time.monotonic()))
        yield i


def _collect_sink(
    snapshot: Snapshot,
    info: ConnectorInfo,
    bootstrap: str,
    client_config: Mapping[str, str] | None,
    samples: int,
    interval_s: float,
    window_start_ms: int | None,
    sleep: Callable[[float], None],
) -> None:
    group = connect.sink_group(info.name, info.config)
    snapshot.group_id = group
    kafka = _Kafka(bootstrap, client_config, snapshot.notes, "kafka")
    available = kafka.topic_partitions()
    topics = sink_topics(info.config, available)
    missing = [t for t in topics if t not in available]
    if missing:
        snapshot.notes.append(f"kafka: topics {missing} do not exist on {bootstrap}")
    partitions = [TopicPartition(t, p) for t in topics for p in available.get(t, [])]
    if not partitions:
        snapshot.not_applicable_reason = f"the sink's topics {topics} have no partitions on {bootstrap}"
        return
    for _ in _sampling(samples, interval_s, sleep):
        ts = now_ms()
        # committed first, log-end second: a commit racing the sample can only overstate lag
        committed = kafka.committed(group, partitions)
        if committed is None:
            snapshot.not_applicable_reason = f"committed offsets of group {group} could not be read"
            snapshot.samples.clear()
            return
        ends = kafka.log_offsets(partitions, LATEST, "list_offsets(latest)")
        if ends is None:
            snapshot.not_applicable_reason = f"log-end offsets could not be read from {bootstrap}"
            snapshot.samples.clear()
            return
        starts = kafka.log_offsets(partitions, EARLIEST, "list_offsets(earliest)") or {}
        snapshot.samples.append(
            Sample(
                ts_ms=ts,
                partitions=[
                    PartitionSample(
                        tp.topic,
                        tp.partition,
                        ends[tp],
                        committed=committed.get(tp),
                        log_start=starts.get(tp),
                    )
                    for tp in partitions
                    if tp in ends
                ],
            )
        )
    snapshot.members = kafka.members(group, info.name)
    _window_start(snapshot, kafka, partitions, window_start_ms)


def _collect_mirror(
    snapshot: Snapshot,
    info: ConnectorInfo,
    rest: ConnectRest,
    source_bootstrap: str | None,
    source_client_config: Mapping[str, str] | None,
    samples: int,
    interval_s: float,
    window_start_ms: int | None,
    sleep: Callable[[float], None],
) -> None:
    if not source_bootstrap:
        snapshot.not_applicable_reason = (
            "MirrorMaker 2 lag needs the source cluster: no source.cluster.bootstrap.servers in the "
            "connector config and none given"
        )
        return
    members = [
        Member(
            member_id=f"{info.name}-{i}",
            client_id=f"{info.name}-{i}",
            task_id=int(t.get("id", {}).get("task", i)),
            assignment=parse_assigned_partitions(str(t.get("config", {}).get("task.assigned.partitions", ""))),
        )
        for i, t in enumerate(rest.task_configs(info.name))
    ]
    kafka = _Kafka(source_bootstrap, source_client_config, snapshot.notes, "source cluster")
    known: set[TopicPartition] = {tp for m in members for tp in m.assignment}
    for _ in _sampling(samples, interval_s, sleep):
        ts = now_ms()
        payload = rest.offsets(info.name)
        if payload is None:
            snapshot.not_applicable_reason = (
                "GET /connectors/{name}/offsets is not available on this worker (Kafka Connect < 3.5, "
                "KIP-875): MirrorMaker 2 positions cannot be read"
            )
            snapshot.samples.clear()
            return
        stored = parse_mirror_offsets(payload)
        known |= set(stored)
        partitions = sorted(known)
        ends = kafka.log_offsets(partitions, LATEST, "list_offsets(latest)")
        if ends is None:
            snapshot.not_applicable_reason = f"log-end offsets could not be read from {source_bootstrap}"
            snapshot.samples.clear()
            return
        starts = kafka.log_offsets(partitions, EARLIEST, "list_offsets(earliest)") or {}
        snapshot.samples.append(
            Sample(
                ts_ms=ts,
                partitions=[
                    PartitionSample(tp.topic, tp.partition, ends[tp], stored=stored.get(tp), log_start=starts.get(tp))
                    for tp in partitions
                    if tp in ends
                ],
            )
        )
    if not known:
        snapshot.not_applicable_reason = "MirrorMaker 2 has no assigned partitions and no stored offsets yet"
        snapshot.samples.clear()
        return
    snapshot.members = members
    _window_start(snapshot, kafka, sorted(known), window_start_ms)


#: a checkpoints topic read to its end per sample; past this, the sample notes it was cut short
CHECKPOINT_READ_S = 30.0


class _TopicTail:
    """One of MM2's internal topics, read from the start and then on to its log-end at every
    sample; each record goes to ``_apply``. ``first_only``: partition 0 alone, as MM2 reads its
    offset-syncs topic."""

    def __init__(
        self,
        bootstrap: str,
        client_config: Mapping[str, str] | None,
        topic: str,
        notes: list[str],
        *,
        first_only: bool = False,
    ):
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": bootstrap,
            **(client_config or {}),
            # assign() only: no group is joined and nothing is committed; librdkafka wants an id
            "group.id": f"connectops-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            # the end of a partition is where the broker says it is: transaction markers (an
            # exactly-once worker) occupy offsets after the last record
            "enable.partition.eof": True,
        }
        self.consumer = Consumer(conf)
        self.topic, self.notes, self.first_only = topic, notes, first_only
        self.partitions: list[int] = []
        self.next_offset: dict[int, int] = {}
        self.undecodable = 0

    def close(self) -> None:
        self.consumer.close()

    def exists(self) -> bool:
        meta = self.consumer.list_topics(self.topic, timeout=REQUEST_TIMEOUT_S).topics.get(self.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return False
        self.partitions = [0] if self.first_only else sorted(meta.partitions)
        self.consumer.assign([KafkaTopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self.partitions])
        return True

    def read_to_end(self) -> None:
        """Reads until every partition's position reaches the log-end taken first."""
        ends = {
            p: self.consumer.get_watermark_offsets(KafkaTopicPartition(self.topic, p), timeout=REQUEST_TIMEOUT_S)[1]
            for p in self.partitions
        }
        deadline = time.monotonic() + CHECKPOINT_READ_S
        while any(self.next_offset.get(p, 0) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                self.notes.append(f"topic {self.topic}: not read to its end in {CHECKPOINT_READ_S:.0f}s")
                return
            for message in self.consumer.consume(num_messages=500, timeout=0.5):
                error, partition, offset = message.error(), message.partition(), message.offset()
                if partition is None or offset is None:
                    continue
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        self.next_offset[partition] = max(self.next_offset.get(partition, 0), offset)
                    continue
                self.next_offset[partition] = offset + 1
                self._apply(message.key(), message.value())

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        raise NotImplementedError


class _CheckpointReader(_TopicTail):
    """MM2's checkpoints topic; keeps the latest checkpoint per key (the topic is compacted:
    later records win)."""

    def __init__(self, bootstrap: str, client_config: Mapping[str, str] | None, topic: str, notes: list[str]):
        super().__init__(bootstrap, client_config, topic, notes)
        self.latest: dict[tuple[str, str, int], Checkpoint] = {}

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            self.undecodable += 1
            return
        if value is None:  # a tombstone removes the key's checkpoint
            try:
                group, pos = protocol_string(key, 0)
                topic, pos = protocol_string(key, pos)
                (partition,) = struct.unpack_from(">i", key, pos)
            except (ValueError, struct.error, UnicodeDecodeError):
                self.undecodable += 1
                return
            self.latest.pop((group, topic, partition), None)
            return
        try:
            checkpoint = decode_checkpoint(key, value)
        except ValueError:
            self.undecodable += 1
            return
        self.latest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint


class _SyncReader(_TopicTail):
    """MM2's offset-syncs topic (partition 0, as MM2 reads it): every sync, in log order."""

    def __init__(self, bootstrap: str, client_config: Mapping[str, str] | None, topic: str, notes: list[str]):
        super().__init__(bootstrap, client_config, topic, notes, first_only=True)
        self.log = SyncLog()

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:  # a tombstone is no sync: MM2 never writes one
            self.undecodable += 1
            return
        try:
            self.log.add(decode_offset_sync(key, value))
        except ValueError:
            self.undecodable += 1


def _assigned_groups(task_configs: Iterable[Mapping[str, Any]]) -> set[str]:
    """MM2 checkpoint tasks' ``task.assigned.groups`` (comma-separated group ids)."""
    return {
        g.strip()
        for t in task_configs
        for g in str(t.get("config", {}).get("task.assigned.groups", "")).split(",")
        if g.strip()
    }


def _collect_checkpoints(
    snapshot: Snapshot,
    info: ConnectorInfo,
    task_configs: list[dict[str, Any]],
    target_bootstrap: str,
    target_client_config: Mapping[str, str] | None,
    source_bootstrap: str | None,
    source_client_config: Mapping[str, str] | None,
    samples: int,
    interval_s: float,
    sleep: Callable[[float], None],
) -> None:
    """Checkpoint lag rows (module docstring); one row per (group, upstream topic, partition) the
    group has committed on the source cluster, for topics the group has checkpoints of."""
    alias = info.config.get("source.cluster.alias")
    if not alias or not source_bootstrap:
        snapshot.not_applicable_reason = (
            "MirrorMaker 2 checkpoint lag needs the connector's source.cluster.alias and the source cluster "
            "(source.cluster.bootstrap.servers, or given)"
        )
        return
    sep, internal_sep = replication_separators(info.config)
    target_alias = info.config.get("target.cluster.alias")
    topic = checkpoints_topic(alias, internal_sep)
    reader = _CheckpointReader(target_bootstrap, target_client_config, topic, snapshot.notes)
    source = _Kafka(source_bootstrap, source_client_config, snapshot.notes, "source cluster")
    try:
        if not reader.exists():
            snapshot.not_applicable_reason = f"checkpoints topic {topic} does not exist on {target_bootstrap}"
            return
        assigned = _assigned_groups(task_configs)
        checkpointed_rows: list[_CheckpointedRow] = []
        for _ in _sampling(samples, interval_s, sleep):
            ts = now_ms()
            # checkpoints first, group offsets second: a commit racing the sample can only
            # overstate the lag, never hide it
            reader.read_to_end()
            latest = dict(reader.latest)
            groups = sorted(assigned | {g for g, _, _ in latest})
            rows: list[PartitionSample] = []
            checkpointed_rows = []
            for group in groups:
                committed = source.committed_all(group)
                if committed is None:
                    continue
                checkpointed = {t for g, t, _ in latest if g == group}
                for tp, offset in sorted(committed.items()):
                    remote = renamed_topic(tp.topic, alias, target_alias, sep)
                    if remote not in checkpointed:
                        continue  # a topic MM2 does not mirror for this group (or not yet)
                    checkpoint = latest.get((group, remote, tp.partition))
                    rows.append(
                        PartitionSample(
                            checkpoint_row(group, tp.topic),
                            tp.partition,
                            offset,
                            committed=None if checkpoint is None else checkpoint.upstream_offset,
                        )
                    )
                    if checkpoint is not None:
                        checkpointed_rows.append(_CheckpointedRow(tp, remote, offset, checkpoint))
            snapshot.samples.append(Sample(ts_ms=ts, partitions=rows))
        if reader.undecodable:
            snapshot.notes.append(f"checkpoints topic {topic}: {reader.undecodable} records are not checkpoints")
        if checkpointed_rows:
            # offset syncs third: a sync written since only moves the committed offset's target
            # position closer to the truth
            _collect_failover(
                snapshot,
                info.config,
                internal_sep,
                checkpointed_rows,
                (source_bootstrap, source_client_config),
                (target_bootstrap, target_client_config),
            )
    finally:
        reader.close()
    if not any(s.partitions for s in snapshot.samples):
        snapshot.not_applicable_reason = f"no consumer group has both committed offsets and checkpoints in {topic}"
        snapshot.samples.clear()
        return
    snapshot.window_start_ms = snapshot.samples[0].ts_ms


class _CheckpointedRow(NamedTuple):
    """A checkpoint row of the last sample whose partition has a checkpoint."""

    upstream: TopicPartition
    remote: str
    committed: int
    checkpoint: Checkpoint


def _collect_failover(
    snapshot: Snapshot,
    config: Mapping[str, str],
    internal_sep: str,
    rows: list[_CheckpointedRow],
    source: tuple[str, Mapping[str, str] | None],
    target: tuple[str, Mapping[str, str] | None],
) -> None:
    """What a consumer failing over now would read again, per checkpointed partition of the last
    sample (``offset_syncs``): the offset syncs from where ``offset-syncs.topic.location`` says,
    the remote partitions' log-ends from the target."""
    try:
        location = offset_syncs_location(config)
    except ValueError as error:
        snapshot.notes.append(f"failover re-reads not counted: {error}")
        return
    topic = offset_syncs_topic(config, internal_sep)
    bootstrap, client_config = source if location == LOCATION_SOURCE else target
    reader = _SyncReader(bootstrap, client_config, topic, snapshot.notes)
    try:
        if not reader.exists():
            snapshot.notes.append(f"failover re-reads not counted: offset-syncs topic {topic} not found on {bootstrap}")
            return
        reader.read_to_end()
    finally:
        reader.close()
    if reader.undecodable:
        snapshot.notes.append(f"offset-syncs topic {topic}: {reader.undecodable} records are not offset syncs")
    target_kafka = _Kafka(target[0], target[1], snapshot.notes, "target cluster")
    remote = sorted({TopicPartition(r.remote, r.upstream.partition) for r in rows})
    ends = target_kafka.list_offsets(remote, LATEST, "list_offsets(latest)") or {}
    for row in rows:
        end = ends.get(TopicPartition(row.remote, row.upstream.partition))
        snapshot.failover.append(
            failover_reread(
                reader.log,
                row=checkpoint_row(row.checkpoint.group, row.upstream.topic),
                topic=row.upstream.topic,
                partition=row.upstream.partition,
                committed=row.committed,
                checkpoint_downstream=row.checkpoint.downstream_offset,
                target_end=None if end is None else end.offset,
            )
        )


def _window_start(
    snapshot: Snapshot, kafka: _Kafka, partitions: list[TopicPartition], window_start_ms: int | None
) -> None:
    """Offsets at the traffic window's start.

    By default the window is the sampling span, and the first sample's log-end offsets ARE
    the offsets at its start (the metrics use them when no window-start offsets are stored):
    measured, not looked up. Asking ListOffsets by timestamp would trust producer-set record
    timestamps, which are event times for many producers. Only a window reaching back before
    the first sample needs the timestamp lookup.

    ListOffsets by timestamp answers offset -1 / timestamp -1 when no record is at or after the
    timestamp: nothing arrived since, so the window starts at the last log-end. Any answer
    without a timestamp is taken as that "not found": a found record always has one.
    """
    first = snapshot.samples[0].ts_ms
    snapshot.window_start_ms = first if window_start_ms is None else min(window_start_ms, first)
    if snapshot.window_start_ms >= first:
        return
    start = snapshot.window_start_ms
    found = kafka.list_offsets(partitions, OffsetSpec.for_timestamp(start), f"list_offsets(timestamp={start})")
    if found is None:
        snapshot.notes.append("traffic window falls back to the first sample: offsets by timestamp unavailable")
        snapshot.window_start_ms = first
        return
    last = {(p.topic, p.partition): p.log_end for p in snapshot.samples[-1].partitions}
    snapshot.window_start_offsets = [
        WindowStartOffset(tp.topic, tp.partition, a.offset if a.offset >= 0 and a.timestamp >= 0 else last[key])
        for tp, a in sorted(found.items())
        if (key := (tp.topic, tp.partition)) in last
    ]
