"""Kafka-side offsets: Connect's offsets topics, sink consumer groups, MM2's offset-syncs topic.

Everything here talks to Kafka through confluent-kafka (librdkafka); there is no hand-written
protocol code. The adapter owns its wire format (the ``[connectorName, partitionMap]`` JSON keys of
Connect's offsets topics, the Java producer's murmur2 partitioner, MM2's topic naming) and turns
every failure into a typed :class:`KafkaOffsetsError` whose text never carries client config
values (``client_config`` may hold SASL passwords or key-store secrets).

Blocking by design: every public method is synchronous and may block for up to its timeout
(librdkafka calls block, and a full read of a big offsets topic takes seconds). Async callers run
them in a worker thread, e.g. ``await asyncio.to_thread(kafka.read_connector_offsets, topic,
{name})``. Methods are safe to call from several threads at once: each read or write uses its own
short-lived consumer or producer (their delivery callbacks and positions must not mix between
callers); only the thread-safe AdminClient is shared.

Written for Apache Kafka. Brokers that speak the protocol but implement less of it (the tests
run against Tansu) surface as the same typed errors; see the tests for what differs there.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

# isort: off
# confluent_kafka.admin re-exports OffsetSpec without declaring it public (no __all__ entry).
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]
# isort: on

from connectops import fence
from connectops.failures import ConnectopsError
from connectops.redact import Redactor

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]
#: ``(topic, partition)``
TopicPartitionKey = tuple[str, int]
#: ``"earliest"``, ``"latest"`` or a timestamp in ms (checked at run time: plans carry plain strings)
OffsetSpecArg = str | int

_T = TypeVar("_T")

# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class KafkaOffsetsError(ConnectopsError):
    """Base of every failure of this adapter; ``str()`` never contains client config values.

    ``retryable`` says whether trying the same operation again later can succeed without anyone
    changing anything (a broker outage, a group that is still shutting down).
    """

    def __init__(self, message: str, *, operation: str = "", code: str | None = None) -> None:
        super().__init__(message, operation=operation)
        #: librdkafka's error name (``KafkaError.name()``), when the failure came from Kafka
        self.code = code


class KafkaUnavailable(KafkaOffsetsError):
    """Kafka did not answer usefully in time: connection failures, timeouts, coordinator moves."""

    retryable = True


class KafkaAccessDenied(KafkaOffsetsError):
    """Authentication or authorization failed; retrying will not help until credentials/ACLs change."""


class KafkaClientConfigInvalid(KafkaOffsetsError):
    """librdkafka rejected the client configuration (the message names properties, never values)."""


class TopicMissing(KafkaOffsetsError):
    """A topic the operation needs does not exist (or is not visible to this principal)."""


class GroupActive(KafkaOffsetsError):
    """A consumer group still has members, so its offsets cannot be deleted or altered.

    Typically a sink connector's tasks have not left the group yet after a stop; retry shortly.
    """

    retryable = True


class ProduceFailed(KafkaOffsetsError):
    """A record was rejected by the broker with a non-retriable error."""


class VerificationFailed(KafkaOffsetsError):
    """Read-back after a write found records whose latest value is not what was written.

    ``mismatches`` lists ``(topic, partition, key, expected value, found value)``; "found" is the
    latest value for that key in that partition (``None`` = tombstone).
    """

    def __init__(
        self,
        message: str,
        *,
        mismatches: Sequence[tuple[str, int, bytes, bytes | None, bytes | None]],
        operation: str = "",
    ) -> None:
        super().__init__(message, operation=operation)
        self.mismatches = list(mismatches)


class TombstoneVerificationFailed(VerificationFailed):
    """Some keys still have a non-null latest value after the tombstones were written.

    The usual cause is a connector that was not fully stopped and committed offsets again.
    """


class RestoreVerificationFailed(VerificationFailed):
    """Some restored keys do not read back with the value that was written."""


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


@dataclass
class OffsetScan:
    """Result of a full read of one offsets topic, with counts for logs and status."""

    topic: str
    #: latest record per (Kafka partition, key bytes) of the selected connectors, in topic order
    records: list[OffsetRecord]
    #: records read from the topic (all connectors)
    scanned: int = 0
    #: records belonging to the selected connectors (all versions)
    matched: int = 0
    #: records whose key is not ``[name, {...}]`` JSON (foreign or corrupt data)
    unparseable: int = 0
    partitions: int = 0
    #: per partition: the end offset the read went to (read-committed, like Connect with EOS)
    end_offsets: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def live(self) -> list[OffsetRecord]:
        return [r for r in self.records if r.value is not None]


@dataclass(frozen=True)
class WrittenRecord:
    """Where the broker stored a record this adapter produced."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes | None


# --------------------------------------------------------------------------------------------------
# The adapter
# --------------------------------------------------------------------------------------------------

# librdkafka error codes that mean "Kafka is (temporarily) not reachable or not ready": retry.
_UNAVAILABLE_CODES: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._NOENT,  # "no leaders found" while metadata is being (re)built
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.REBALANCE_IN_PROGRESS,
    }
)
_DENIED_CODES: Final = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
_MISSING_TOPIC_CODES: Final = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)
# An admin OffsetCommit to a group with members: UNKNOWN_MEMBER_ID (classic coordinator),
# GROUP_SUBSCRIBED_TO_TOPIC / STALE_MEMBER_EPOCH (KIP-848 consumer groups).
_GROUP_ACTIVE_CODES: Final = frozenset(
    {
        KafkaError.NON_EMPTY_GROUP,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.GROUP_SUBSCRIBED_TO_TOPIC,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.ILLEGAL_GENERATION,
    }
)

#: messages per ``consume()`` call when scanning a topic
_BATCH: Final = 10_000


class KafkaOffsets:
    """Kafka access for offset resets: Connect offsets topics, consumer groups, MM2 topics.

    ``client_config`` holds librdkafka properties (``security.protocol``, ``sasl.*``,
    ``ssl.*``…) applied to every client; ``bootstrap`` wins over any ``bootstrap.servers`` in it.
    ``timeout_s`` bounds each broker round trip and each write's delivery; full-topic reads get
    their own budget (``read_timeout_s``, default four times ``timeout_s``).
    """

    def __init__(
        self,
        bootstrap: str,
        client_config: Mapping[str, str] | None = None,
        timeout_s: float = 30,
        *,
        read_timeout_s: float | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = float(timeout_s)
        self.read_timeout_s = float(read_timeout_s) if read_timeout_s is not None else 4 * self.timeout_s
        self._config: dict[str, str] = {str(k): str(v) for k, v in (client_config or {}).items()}
        self._config["bootstrap.servers"] = bootstrap
        # Every config value is treated as a secret in error texts: cheaper than deciding which
        # properties are sensitive, and a masked host name costs nothing.
        self._redact = Redactor(v for k, v in self._config.items() if k != "bootstrap.servers")
        self._admin: AdminClient | None = None
        self._admin_lock = threading.Lock()

    def __enter__(self) -> KafkaOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._admin_lock:
            self._admin = None

    # -- clients --------------------------------------------------------------------------------

    def _admin_client(self) -> AdminClient:
        with self._admin_lock:
            if self._admin is None:
                conf: dict[str, str | int | float | bool] = {
                    **self._config,
                    # librdkafka's admin and producer handles default to true: a metadata lookup
                    # of a missing topic would create it on brokers with auto.create.topics.enable
                    # (Apache Kafka's default) - an existence check must never do that.
                    "allow.auto.create.topics": False,
                }
                self._admin = self._construct(lambda: AdminClient(conf), "admin client")
            return self._admin

    def _drop_admin(self) -> None:
        # After a transport failure librdkafka's admin client can keep failing lookups for a while
        # ("no leaders found"); a fresh client on the next call recovers at once.
        with self._admin_lock:
            self._admin = None

    def _construct(self, make: Callable[[], _T], what: str) -> _T:
        try:
            return make()
        except (KafkaException, ValueError, TypeError):
            # librdkafka quotes the offending *value* ("Invalid value "x" for configuration
            # property "sasl.password""): keep only the property names.
            names = ", ".join(sorted(k for k in self._config if k != "bootstrap.servers")) or "none"
            raise KafkaClientConfigInvalid(
                f"cannot create Kafka {what}: librdkafka rejected the client configuration (properties given: {names})",
                operation=f"create {what}",
            ) from None

    def _consumer(self) -> Consumer:
        conf: dict[str, Any] = {
            **self._config,
            # librdkafka requires a group.id even for assign(); nothing joins or commits to it.
            "group.id": f"connectops-offsets-reader-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            # Connect's offset store reads read_committed when exactly-once source support is
            # on, and transactional markers are the only thing it hides otherwise: this matches
            # what Connect itself sees in both cases.
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
            # librdkafka pauses fetching for this long whenever its local queue is over
            # queued.min.messages (default 1 s): on a full scan of a large offsets topic that
            # idled the reader most of the time (a 1M-record scan went 7.6 s -> 3.0 s, see
            # benchmarks/tombstone_scan_bench.py). The queue's size limits are unchanged.
            "fetch.queue.backoff.ms": 10,
        }
        return self._construct(lambda: Consumer(conf), "consumer")

    def _producer(self) -> Producer:
        conf: dict[str, Any] = {
            **self._config,
            "allow.auto.create.topics": False,
            "acks": "all",
            "linger.ms": 5,
            # One in flight: a retried batch can never overtake a later one, so for any key the
            # record written last is the one that ends up last in its partition.
            "max.in.flight.requests.per.connection": 1,
            "message.timeout.ms": int(self.timeout_s * 1000),
        }
        return self._construct(lambda: Producer(conf), "producer")

    # -- error mapping --------------------------------------------------------------------------

    def _error(self, err: KafkaError | None, operation: str, subject: str = "") -> KafkaOffsetsError:
        if err is None:
            return KafkaUnavailable(f"{operation}: unknown Kafka error", operation=operation)
        code = err.code()
        name = err.name()
        text = self._redact(f"{operation}{': ' + subject if subject else ''}: {name}: {err.str()}")
        if code in _DENIED_CODES:
            return KafkaAccessDenied(text, operation=operation, code=name)
        if code in _MISSING_TOPIC_CODES:
            return TopicMissing(text, operation=operation, code=name)
        if code in _GROUP_ACTIVE_CODES:
            return GroupActive(text, operation=operation, code=name)
        if code in _UNAVAILABLE_CODES or err.retriable():
            return KafkaUnavailable(text, operation=operation, code=name)
        return KafkaOffsetsError(text, operation=operation, code=name)

    def _from_exception(self, exc: BaseException, operation: str, subject: str = "") -> KafkaOffsetsError:
        if isinstance(exc, KafkaOffsetsError):
            return exc
        if isinstance(exc, KafkaException):
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            mapped = self._error(err, operation, subject)
            if isinstance(mapped, KafkaUnavailable):
                self._drop_admin()
            return mapped
        if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
            self._drop_admin()
            return KafkaUnavailable(
                f"{operation}{': ' + subject if subject else ''}: no answer within {self.timeout_s:.0f}s",
                operation=operation,
                code="_TIMED_OUT",
            )
        return KafkaOffsetsError(self._redact(f"{operation}: {type(exc).__name__}: {exc}"), operation=operation)

    def _result(self, future: concurrent.futures.Future[Any], operation: str, subject: str = "") -> Any:
        try:
            return future.result(timeout=self.timeout_s + 5)
        except Exception as exc:
            raise self._from_exception(exc, operation, subject) from None

    def _call(self, operation: str, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except KafkaOffsetsError:
            raise
        except (KafkaException, concurrent.futures.TimeoutError, TimeoutError) as exc:
            raise self._from_exception(exc, operation) from None

    # -- topics and offsets ---------------------------------------------------------------------

    def _metadata(self, operation: str, topic: str | None = None) -> Any:
        admin = self._admin_client()
        return self._call(operation, lambda: admin.list_topics(topic=topic, timeout=self.timeout_s))

    def partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic``; :class:`TopicMissing` if it does not exist."""
        return len(self._partitions(topic, "describe topic"))

    def _partitions(self, topic: str, operation: str) -> list[int]:
        md = self._metadata(operation, topic)
        tmd = md.topics.get(topic)
        if tmd is None or (tmd.error is not None and tmd.error.code() in _MISSING_TOPIC_CODES):
            raise TopicMissing(f"{operation}: topic {topic!r} does not exist", operation=operation)
        if tmd.error is not None:
            raise self._error(tmd.error, operation, f"topic {topic!r}")
        if not tmd.partitions:
            raise TopicMissing(f"{operation}: topic {topic!r} has no partitions", operation=operation)
        return sorted(int(p) for p in tmd.partitions)

    def partitions_for(self, topics: Iterable[str]) -> list[TopicPartitionKey]:
        """All ``(topic, partition)`` of the given topics, sorted; :class:`TopicMissing` if one is absent."""
        out: list[TopicPartitionKey] = []
        for topic in dict.fromkeys(topics):
            out.extend((topic, p) for p in self._partitions(topic, "list partitions"))
        return out

    def topics_matching(self, regex: str) -> list[str]:
        """Topic names that fully match ``regex`` (as Java's ``Pattern.matcher(t).matches()``,
        which Connect's ``topics.regex`` and MM2's filters use), sorted."""
        pattern = re.compile(regex)
        md = self._metadata("list topics")
        return sorted(str(t) for t in md.topics if pattern.fullmatch(str(t)))

    def topic_exists(self, topic: str) -> bool:
        md = self._metadata("list topics")
        return topic in md.topics

    def list_offsets(
        self,
        topic_partitions: Iterable[TopicPartitionKey],
        spec: OffsetSpecArg,
        *,
        read_committed: bool = False,
    ) -> dict[TopicPartitionKey, int]:
        """Offsets per partition for ``spec``: ``"earliest"``, ``"latest"`` or a timestamp in ms.

        For a timestamp the answer is the first offset whose record timestamp is at or after it;
        where no such record exists Kafka answers -1, and this returns the partition's end offset
        instead (where a consumer positioned "at that time" would start, as
        ``kafka-consumer-groups --to-datetime`` does).
        """
        tps = list(dict.fromkeys(topic_partitions))
        if not tps:
            return {}
        offset_spec: Any
        if spec == "earliest":
            offset_spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        elif spec == "latest":
            offset_spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        elif isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
            offset_spec = OffsetSpec.for_timestamp(spec)
        else:
            raise ValueError(f"spec must be 'earliest', 'latest' or a timestamp in ms, not {spec!r}")
        operation = f"list offsets ({spec})"
        admin = self._admin_client()
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        futures = self._call(
            operation,
            lambda: admin.list_offsets(
                {TopicPartition(t, p): offset_spec for t, p in tps},
                isolation_level=level,
                request_timeout=self.timeout_s,
            ),
        )
        out: dict[TopicPartitionKey, int] = {}
        for tp, future in futures.items():
            info = self._result(future, operation, f"{tp.topic}[{tp.partition}]")
            out[(str(tp.topic), int(tp.partition))] = int(info.offset)
        if isinstance(spec, int):
            beyond = [tp for tp, offset in out.items() if offset < 0]
            if beyond:
                out.update(self.list_offsets(beyond, "latest", read_committed=read_committed))
        return out

    def watermarks(self, topic: str, *, read_committed: bool = False) -> dict[int, tuple[int, int]]:
        """``{partition: (low watermark, end offset)}`` for every partition of ``topic``."""
        tps = [(topic, p) for p in self._partitions(topic, "read watermarks")]
        low = self.list_offsets(tps, "earliest")
        high = self.list_offsets(tps, "latest", read_committed=read_committed)
        return {p: (low[(topic, p)], high[(topic, p)]) for _, p in tps}

    # -- Connect offsets topics: read -----------------------------------------------------------

    def scan_connector_offsets(
        self, topic: str, connector_names: Iterable[str], *, timeout_s: float | None = None
    ) -> OffsetScan:
        """Read ``topic`` from its start to its end and keep the latest record per key of the
        given connectors, tombstones included (a null latest value = already reset).

        Reads by ``assign()`` with a throw-away group id: no group join, no commits, nothing left
        behind on the cluster. "Latest" is per (Kafka partition, exact key bytes), which is how
        Connect's offset store and log compaction identify a key. A key found in more than one
        partition (written by a tool that used the wrong partitioner) is returned once per
        partition, so a reset can tombstone every copy.
        """
        wanted = set(connector_names)
        operation = f"read offsets topic {topic!r}"
        started = time.monotonic()
        budget = self.read_timeout_s if timeout_s is None else float(timeout_s)
        marks = self.watermarks(topic, read_committed=True)
        scan = OffsetScan(topic=topic, records=[], partitions=len(marks))
        scan.end_offsets = {p: end for p, (_, end) in marks.items()}
        todo = {p: end for p, (low, end) in marks.items() if end > low}
        latest: dict[tuple[int, bytes], Any] = {}
        if wanted and todo:
            self._read_partitions(topic, marks, todo, latest, scan, wanted, budget, operation)
        for (_, key), msg in latest.items():
            parsed = parse_offset_key(key)
            ts_type, ts = msg.timestamp()
            scan.records.append(
                OffsetRecord(
                    topic=topic,
                    partition=int(msg.partition()),
                    offset=int(msg.offset()),
                    key=key,
                    value=msg.value(),
                    connector=parsed[0] if parsed else None,
                    partition_map=parsed[1] if parsed else None,
                    timestamp_ms=int(ts) if ts_type else None,
                )
            )
        scan.records.sort(key=lambda r: (r.partition, r.offset))
        scan.seconds = time.monotonic() - started
        log.info(
            "read %s: %d records in %d partitions in %.1fs; %d of %s; %d keys (%d live)",
            topic,
            scan.scanned,
            scan.partitions,
            scan.seconds,
            scan.matched,
            ",".join(sorted(wanted)),
            len(scan.records),
            len(scan.live),
        )
        return scan

    def _read_partitions(
        self,
        topic: str,
        marks: Mapping[int, tuple[int, int]],
        todo: dict[int, int],
        latest: dict[tuple[int, bytes], Any],
        scan: OffsetScan,
        wanted: set[str],
        budget: float,
        operation: str,
    ) -> None:
        deadline = time.monotonic() + budget
        consumer = self._consumer()
        names: dict[bytes, str | None] = {}

        def take(messages: list[Message]) -> None:
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if _ignorable_read_error(err):
                        continue
                    raise self._error(err, operation)
                scan.scanned += 1
                key = msg.key()
                if key is None:
                    scan.unparseable += 1
                    continue
                if key in names:
                    name = names[key]
                else:
                    name = _key_connector(key)
                    # Typically few distinct keys with many versions each: remember their
                    # connector (bounded, for topics with millions of distinct keys).
                    if len(names) < 200_000:
                        names[key] = name
                if name is None:
                    scan.unparseable += 1
                elif name in wanted:
                    scan.matched += 1
                    latest[(msg.partition() or 0, key)] = msg

        try:
            consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in sorted(todo)])
            while todo:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaUnavailable(
                        f"{operation}: not at the end after {budget:.0f}s "
                        f"({scan.scanned} records read; {len(todo)} partitions unfinished)",
                        operation=operation,
                        code="_TIMED_OUT",
                    )
                # A short wait: consume() returns early only with a full batch, so a topic whose size is
                # not a multiple of _BATCH would pay the whole timeout at its end.
                take(consumer.consume(num_messages=_BATCH, timeout=min(0.1, remaining)))
                # Position, not the last offset seen: transaction markers and compacted-away
                # records occupy offsets that are never delivered.
                positions = consumer.position([TopicPartition(topic, p) for p in todo])
                for tp in positions:
                    if tp.offset >= 0 and tp.offset >= todo.get(tp.partition, 0):
                        todo.pop(tp.partition, None)
            # Records already fetched beyond the end offsets are newer still: take them too. (On
            # brokers that report an end offset inside the last batch - Tansu does - they are the
            # rest of that batch.)
            while time.monotonic() < deadline and (extra := consumer.consume(num_messages=_BATCH, timeout=0)):
                take(extra)
        except KafkaOffsetsError:
            raise
        except KafkaException as exc:
            raise self._from_exception(exc, operation) from None
        finally:
            consumer.close()

    def read_connector_offsets(
        self, topic: str, connector_names: Iterable[str], *, timeout_s: float | None = None
    ) -> list[OffsetRecord]:
        """:meth:`scan_connector_offsets` without the counts (they are logged)."""
        return self.scan_connector_offsets(topic, connector_names, timeout_s=timeout_s).records

    # -- Connect offsets topics: write ----------------------------------------------------------

    def _produce_exact(self, records: Sequence[RawRecord], operation: str) -> list[WrittenRecord]:
        """Produce each record's exact key/value bytes to its exact partition, and wait for acks.

        The explicit ``partition=`` is the point: librdkafka's default partitioner is
        ``consistent_random`` (CRC32 of the key), not the Java client's murmur2, so a record
        produced without it can land in another partition than the key's existing records, where
        it changes nothing for that key (and leaves a stray key behind).
        """
        if not records:
            return []
        fence.check()
        counts: dict[str, int] = {}
        for topic in {r.topic for r in records}:
            counts[topic] = self.partition_count(topic)
        for r in records:
            if not 0 <= r.partition < counts[r.topic]:
                raise ValueError(f"{r.topic} has {counts[r.topic]} partitions; cannot write to {r.partition}")
        producer = self._producer()
        written: list[WrittenRecord | None] = [None] * len(records)
        errors: list[KafkaError] = []

        def report(index: int) -> Callable[[KafkaError | None, Message], None]:
            def on_delivery(err: KafkaError | None, msg: Message) -> None:
                if err is not None:
                    errors.append(err)
                    return
                rec = records[index]
                written[index] = WrittenRecord(
                    topic=rec.topic,
                    partition=int(msg.partition() or 0),
                    offset=int(msg.offset() or 0),
                    key=rec.key,
                    value=rec.value,
                )

            return on_delivery

        try:
            for i, rec in enumerate(records):
                while True:
                    try:
                        producer.produce(
                            rec.topic,
                            key=rec.key,
                            value=rec.value,
                            partition=rec.partition,
                            on_delivery=report(i),
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)  # local queue full: serve delivery reports first
            remaining = producer.flush(self.timeout_s + 5)
        except KafkaException as exc:
            raise self._from_exception(exc, operation) from None
        if errors:
            first = self._error(errors[0], operation, f"{len(errors)} of {len(records)} records rejected")
            if isinstance(first, KafkaUnavailable | KafkaAccessDenied | TopicMissing):
                raise first
            raise ProduceFailed(str(first), operation=operation, code=first.code)
        if remaining or any(w is None for w in written):
            raise KafkaUnavailable(
                f"{operation}: {sum(w is None for w in written)} of {len(records)} records not "
                f"acknowledged within {self.timeout_s:.0f}s",
                operation=operation,
                code="_MSG_TIMED_OUT",
            )
        return [w for w in written if w is not None]

    def write_tombstones(self, records: Iterable[OffsetRecord]) -> list[WrittenRecord]:
        """Reset offsets: a null-valued record with each live record's exact key, to the exact
        partition it was read from. Records that already are tombstones are skipped.

        Call only while the connector is STOPPED with no tasks: a running task's next offset
        commit would write its offset again. Follow with :meth:`verify_tombstones`.
        """
        live = [r for r in records if r.value is not None]
        tombstones = [
            OffsetRecord(
                topic=r.topic,
                partition=r.partition,
                offset=-1,
                key=r.key,
                value=None,
                connector=r.connector,
                partition_map=r.partition_map,
            )
            for r in live
        ]
        return self._produce_exact(tombstones, "write tombstones")

    def verify_tombstones(self, topic: str, records: Iterable[OffsetRecord], *, timeout_s: float | None = None) -> None:
        """Re-read ``topic`` and check that every given key's latest value is null.

        Raises :class:`TombstoneVerificationFailed` listing the keys that still hold a value.
        """
        expected: dict[tuple[int, bytes], bytes | None] = {}
        for r in records:
            if r.topic != topic:
                raise ValueError(f"record of topic {r.topic!r} given to verify {topic!r}")
            expected[(r.partition, r.key)] = None
        self._verify(topic, expected, TombstoneVerificationFailed, "verify tombstones", timeout_s)

    def restore_records(self, records: Iterable[RawRecord]) -> list[WrittenRecord]:
        """Write the given key/value bytes back to their partitions (a backup of raw records, or
        rewritten values for existing keys), then verify each key reads back with that value.

        ``value=None`` writes a tombstone. When one key appears several times the last wins.
        """
        items = list(records)
        written = self._produce_exact(items, "restore records")
        expected: dict[str, dict[tuple[int, bytes], bytes | None]] = {}
        for r in items:
            expected.setdefault(r.topic, {})[(r.partition, r.key)] = r.value
        for topic, wanted in expected.items():
            self._verify(topic, wanted, RestoreVerificationFailed, "verify restored records", None)
        return written

    def _verify(
        self,
        topic: str,
        expected: Mapping[tuple[int, bytes], bytes | None],
        error: type[VerificationFailed],
        operation: str,
        timeout_s: float | None,
    ) -> None:
        if not expected:
            return
        found = self._latest_values(topic, expected, operation, timeout_s)
        mismatches = [
            (topic, p, k, want, found.get((p, k)))
            for (p, k), want in expected.items()
            if found.get((p, k), None) != want
        ]
        if mismatches:
            sample = "; ".join(
                f"[{p}] {_show(k)} = {_show(v) if v is not None else 'null'}" for _, p, k, _, v in mismatches[:5]
            )
            raise error(
                f"{operation} in {topic!r}: {len(mismatches)} of {len(expected)} keys read back differently: {sample}",
                mismatches=mismatches,
                operation=operation,
            )

    def _latest_values(
        self,
        topic: str,
        keys: Mapping[tuple[int, bytes], Any],
        operation: str,
        timeout_s: float | None,
    ) -> dict[tuple[int, bytes], bytes | None]:
        """Latest value of each ``(partition, key)``, reading only the partitions involved."""
        marks = self.watermarks(topic, read_committed=True)
        parts = {p for p, _ in keys}
        todo = {p: marks[p][1] for p in parts if p in marks and marks[p][1] > marks[p][0]}
        found: dict[tuple[int, bytes], bytes | None] = {}
        if not todo:
            return found
        budget = self.read_timeout_s if timeout_s is None else float(timeout_s)
        deadline = time.monotonic() + budget
        consumer = self._consumer()
        read = 0

        def take(messages: list[Message]) -> None:
            nonlocal read
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if _ignorable_read_error(err):
                        continue
                    raise self._error(err, operation)
                read += 1
                k = (msg.partition() or 0, msg.key() or b"")
                if k in keys:
                    found[k] = msg.value()

        try:
            consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in sorted(todo)])
            while todo:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaUnavailable(
                        f"{operation}: {topic!r} not read to the end after {budget:.0f}s ({read} records)",
                        operation=operation,
                        code="_TIMED_OUT",
                    )
                # A short wait: consume() returns early only with a full batch, so a topic whose size is
                # not a multiple of _BATCH would pay the whole timeout at its end.
                take(consumer.consume(num_messages=_BATCH, timeout=min(0.1, remaining)))
                for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= 0 and tp.offset >= todo.get(tp.partition, 0):
                        todo.pop(tp.partition, None)
            while time.monotonic() < deadline and (extra := consumer.consume(num_messages=_BATCH, timeout=0)):
                take(extra)
        except KafkaOffsetsError:
            raise
        except KafkaException as exc:
            raise self._from_exception(exc, operation) from None
        finally:
            consumer.close()
        return found

    # -- sink connectors: consumer groups -------------------------------------------------------

    def group_offsets(self, group: str) -> dict[TopicPartitionKey, int]:
        """Committed offsets of ``group``; ``{}`` when the group does not exist or has none."""
        operation = f"list offsets of group {group!r}"
        admin = self._admin_client()
        futures = self._call(
            operation,
            lambda: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s
            ),
        )
        result = self._result(futures[group], operation)
        out: dict[TopicPartitionKey, int] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise self._error(tp.error, operation, f"{tp.topic}[{tp.partition}]")
            if tp.offset >= 0:  # -1001 (OFFSET_INVALID): nothing committed for that partition
                out[(str(tp.topic), int(tp.partition))] = int(tp.offset)
        return out

    def group_members(self, group: str) -> list[str] | None:
        """Client ids (``client@host``) of the group's members; ``None`` if the group is unknown."""
        operation = f"describe group {group!r}"
        admin = self._admin_client()
        futures = self._call(operation, lambda: admin.describe_consumer_groups([group], request_timeout=self.timeout_s))
        try:
            desc = futures[group].result(timeout=self.timeout_s + 5)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return None
            raise self._from_exception(exc, operation) from None
        except Exception as exc:
            raise self._from_exception(exc, operation) from None
        if getattr(desc.state, "name", "") == "DEAD":
            return None
        return [f"{m.client_id}@{m.host}" for m in desc.members or []]

    def group_exists(self, group: str) -> bool:
        """Whether the cluster lists ``group`` (in any state, including Empty with offsets)."""
        operation = "list consumer groups"
        admin = self._admin_client()
        future = self._call(operation, lambda: admin.list_consumer_groups(request_timeout=self.timeout_s))
        result = self._result(future, operation)
        if result.errors:
            # Partial answers (one broker failed) cannot prove absence.
            raise self._from_exception(result.errors[0], operation)
        return any(g.group_id == group for g in result.valid or [])

    def _group_active(self, group: str, operation: str, cause: KafkaOffsetsError) -> GroupActive:
        """The broker said the group has members: name them if a describe can (best effort)."""
        try:
            members = self.group_members(group)
        except KafkaOffsetsError:
            members = None
        who = f" ({', '.join(sorted(members)[:5])})" if members else ""
        return GroupActive(
            f"{operation}: group {group!r} still has members{who}; Kafka answered {cause.code}",
            operation=operation,
            code=cause.code,
        )

    def delete_group(self, group: str) -> bool:
        """Delete consumer group ``group`` and with it all its committed offsets (a sink reset).

        Returns False when the group did not exist (a success: nothing to reset). Raises
        :class:`GroupActive` while it has members (DeleteGroups answers NON_EMPTY_GROUP), e.g. a
        sink whose tasks have not left the group yet. The group is looked up with ListGroups
        first instead of relying on DeleteGroups' GROUP_ID_NOT_FOUND alone: some Kafka-protocol
        brokers never answer DeleteGroups for an unknown group.
        """
        fence.check()
        operation = f"delete group {group!r}"
        if not self.group_exists(group):
            return False
        admin = self._admin_client()
        futures = self._call(operation, lambda: admin.delete_consumer_groups([group], request_timeout=self.timeout_s))
        try:
            futures[group].result(timeout=self.timeout_s + 5)
        except Exception as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return False
            mapped = self._from_exception(exc, operation)
            if isinstance(mapped, GroupActive):
                raise self._group_active(group, operation, mapped) from None
            raise mapped from None
        return True

    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Commit ``offsets`` for ``group`` (creating the group if needed).

        Kafka accepts admin commits only while the group has no members: otherwise this raises
        :class:`GroupActive` (UNKNOWN_MEMBER_ID per partition from the coordinator). A commit is
        idempotent, so one dropped connection is retried here at once.
        """
        fence.check()
        operation = f"alter offsets of group {group!r}"
        if not offsets:
            return
        for (topic, partition), offset in offsets.items():
            if offset < 0:
                raise ValueError(f"offset for {topic}[{partition}] must be >= 0, not {offset}")
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )
        for attempt in (1, 2):
            try:
                self._alter_once(group, request, operation)
            except GroupActive as exc:
                raise self._group_active(group, operation, exc) from None
            except KafkaUnavailable as exc:
                if attempt == 2 or exc.code != "_TRANSPORT":
                    raise
                log.info("%s: connection dropped, retrying once", operation)
            else:
                return

    def _alter_once(self, group: str, request: ConsumerGroupTopicPartitions, operation: str) -> None:
        admin = self._admin_client()
        futures = self._call(
            operation, lambda: admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        )
        result = self._result(futures[group], operation)
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise self._error(tp.error, operation, f"{tp.topic}[{tp.partition}]")

    # -- MirrorMaker 2 offset-syncs topic -------------------------------------------------------

    def delete_topic(self, topic: str) -> bool:
        """Delete ``topic``; False when it did not exist (a success)."""
        operation = f"delete topic {topic!r}"
        admin = self._admin_client()
        futures = self._call(
            operation,
            lambda: admin.delete_topics([topic], operation_timeout=self.timeout_s, request_timeout=self.timeout_s),
        )
        try:
            self._result(futures[topic], operation)
        except TopicMissing:
            return False
        return True

    def truncate_topic(self, topic: str) -> dict[int, int]:
        """Delete every record of ``topic`` (DeleteRecords up to each partition's end offset).

        Returns ``{partition: new low watermark}``; ``{}`` when the topic does not exist (nothing
        to truncate). The topic itself, its configs and ACLs stay, unlike :meth:`delete_topic`.
        """
        operation = f"truncate topic {topic!r}"
        try:
            marks = self.watermarks(topic)
        except TopicMissing:
            return {}
        targets = [TopicPartition(topic, p, end) for p, (low, end) in sorted(marks.items()) if end > low]
        out = {p: low for p, (low, _) in marks.items()}
        if not targets:
            return out
        admin = self._admin_client()
        futures = self._call(
            operation,
            lambda: admin.delete_records(targets, operation_timeout=self.timeout_s, request_timeout=self.timeout_s),
        )
        for tp, future in futures.items():
            deleted = self._result(future, operation, f"partition {tp.partition}")
            out[int(tp.partition)] = int(deleted.low_watermark)
        return out


def _ignorable_read_error(err: KafkaError) -> bool:
    """Consumer events a full read by assign() can ignore.

    librdkafka looks up a coordinator for the reader's (unused) group.id; where ACLs deny
    DESCRIBE on that group the lookup fails, which does not matter to fetching. Granting
    DESCRIBE on the group prefix ``connectops-offsets-reader-`` silences it.
    """
    return err.code() in (KafkaError._PARTITION_EOF, KafkaError.GROUP_AUTHORIZATION_FAILED)


def _show(data: bytes, limit: int = 120) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "GroupActive",
    "KafkaAccessDenied",
    "KafkaClientConfigInvalid",
    "KafkaOffsets",
    "KafkaOffsetsError",
    "KafkaUnavailable",
    "OffsetRecord",
    "OffsetScan",
    "ProduceFailed",
    "RawRecord",
    "RestoreVerificationFailed",
    "TombstoneVerificationFailed",
    "TopicMissing",
    "VerificationFailed",
    "WrittenRecord",
    "checkpoints_topic_name",
    "java_partition",
    "murmur2",
    "offset_syncs_topic_name",
    "parse_offset_key",
]
