"""The Kafka client plumbing shared by every concern of the adapter: clients and error translation.

Everything in :mod:`connectops.adapters.kafka` talks to Kafka through confluent-kafka
(librdkafka); there is no hand-written protocol code. This module builds the clients (one shared
AdminClient, a short-lived consumer or producer per read or write) and turns every failure into a
typed :class:`~connectops.adapters.kafka.errors.KafkaOffsetsError` whose text never carries client
config values (``client_config`` may hold SASL passwords or key-store secrets): every config value
is redacted, and a rejected configuration is reported by property names only.

Blocking by design: every public method of the adapter is synchronous and may block for up to its
timeout (librdkafka calls block, and a full read of a big offsets topic takes seconds). Async
callers run them in a worker thread, e.g. ``await asyncio.to_thread(kafka.read_connector_offsets,
topic, {name})``. Methods are safe to call from several threads at once: each read or write uses
its own short-lived consumer or producer (their delivery callbacks and positions must not mix
between callers); only the thread-safe AdminClient is shared.
"""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, Self, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from connectops.adapters.kafka.errors import (
    GroupActive,
    KafkaAccessDenied,
    KafkaClientConfigInvalid,
    KafkaOffsetsError,
    KafkaUnavailable,
    TopicMissing,
)
from connectops.redact import Redactor

_T = TypeVar("_T")

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


class KafkaClient:
    """The clients and error translation every part of :class:`~connectops.adapters.kafka.KafkaOffsets` uses.

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

    def __enter__(self) -> Self:
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

    # -- metadata -------------------------------------------------------------------------------

    def _metadata(self, operation: str, topic: str | None = None) -> Any:
        admin = self._admin_client()
        return self._call(operation, lambda: admin.list_topics(topic=topic, timeout=self.timeout_s))

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
