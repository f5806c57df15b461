"""The typed failures of the Kafka adapter, apart from the code that raises them.

Reconcilers and :mod:`connectops.errors` only need these classes to decide what to record and
whether to retry; keeping them free of confluent-kafka lets them be imported and matched without
the client plumbing. Every text they carry has already been redacted by the raiser.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectops.failures import ConnectopsError


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
    The coordinator refuses an offset commit or a group delete of a non-empty group as a whole.
    """

    retryable = True
    refused = True


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


__all__ = [
    "GroupActive",
    "KafkaAccessDenied",
    "KafkaClientConfigInvalid",
    "KafkaOffsetsError",
    "KafkaUnavailable",
    "ProduceFailed",
    "RestoreVerificationFailed",
    "TombstoneVerificationFailed",
    "TopicMissing",
    "VerificationFailed",
]
