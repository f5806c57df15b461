"""The one read loop: chosen partitions of a topic, from a start offset to their end offset.

Every read of a Connect offsets topic goes through it: the full scan of a connector's offsets and
the read-back that verifies a write. They differ only in which partitions they read, what they
keep from each record and how a timeout is worded, so those are the caller's; the loop owns the
rest: a throw-away consumer (``assign()``, no group join, no commits), short ``consume()`` waits
under one deadline, the stop condition (each partition's *position* at its end offset), the
records already fetched beyond the end, and the mapping of consumer errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from connectops.adapters.kafka.client import KafkaClient
from connectops.adapters.kafka.errors import KafkaOffsetsError, KafkaUnavailable

_ERROR = Message.error

#: messages per ``consume()`` call when scanning a topic
_BATCH: Final = 10_000
#: ``consume()`` returns early only with a full batch, so its timeout is paid whenever fewer
#: records are left: the wait starts at 5 ms after records came, doubling to 100 ms while none
#: come (a reset's read-back of a few records took 104 ms with a fixed 100 ms, all of it waiting,
#: and the connector stays stopped meanwhile)
_FIRST_WAIT: Final = 0.005
_MAX_WAIT: Final = 0.1

#: What a caller keeps from a batch of records (consumer errors already taken out, in topic order).
Take = Callable[[list[Message]], None]
#: The text of the timeout failure, from the records read so far and the partitions not finished.
Stalled = Callable[[int, int], str]


class TopicReader(KafkaClient):
    """Reads partitions to their end with a short-lived consumer of its own (see the module doc)."""

    def _read_to_end(
        self,
        topic: str,
        ranges: Mapping[int, tuple[int, int]],
        take: Take,
        *,
        budget: float,
        operation: str,
        stalled: Stalled,
    ) -> int:
        """Read ``ranges`` (``{partition: (start offset, end offset)}``, each with ``end > start``)
        of ``topic``, hand every batch of records to ``take``, return how many records were read.

        The deadline is ``budget`` seconds from now; a partition is done when the consumer's
        position reaches its end offset. When the deadline passes first this raises
        :class:`KafkaUnavailable` (``_TIMED_OUT``) with the text ``stalled(records read,
        partitions unfinished)``. Records fetched beyond the end offsets are taken too.
        """
        todo = {p: end for p, (_, end) in ranges.items()}
        deadline = time.monotonic() + budget
        consumer = self._consumer()
        read = 0
        wait = _FIRST_WAIT
        try:
            consumer.assign([TopicPartition(topic, p, ranges[p][0]) for p in sorted(todo)])
            while todo:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaUnavailable(stalled(read, len(todo)), operation=operation, code="_TIMED_OUT")
                batch = self._records(consumer.consume(num_messages=_BATCH, timeout=min(wait, remaining)), operation)
                wait = _FIRST_WAIT if batch else min(wait * 2, _MAX_WAIT)
                read += len(batch)
                take(batch)
                # Position, not the last offset seen: transaction markers and compacted-away
                # records occupy offsets that are never delivered.
                for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= 0 and tp.offset >= todo.get(tp.partition, 0):
                        todo.pop(tp.partition, None)
            # Records already fetched beyond the end offsets are newer still: take them too (and
            # on a broker that reports an end offset inside the last batch, the rest of it).
            while time.monotonic() < deadline and (extra := consumer.consume(num_messages=_BATCH, timeout=0)):
                batch = self._records(extra, operation)
                read += len(batch)
                take(batch)
        except KafkaOffsetsError:
            raise
        except KafkaException as exc:
            raise self._from_exception(exc, operation) from None
        finally:
            consumer.close()
        return read

    def _records(self, messages: list[Message], operation: str) -> list[Message]:
        """``messages`` without the consumer events a read can ignore; raises on any other error.
        (Usually there is none: one C-level pass looks, and the list is returned as it is.)"""
        if not any(map(_ERROR, messages)):
            return messages
        for msg in messages:
            err = msg.error()
            if err is not None and not _ignorable_read_error(err):
                raise self._error(err, operation)
        return [msg for msg in messages if msg.error() is None]


def _ignorable_read_error(err: KafkaError) -> bool:
    """Consumer events a full read by assign() can ignore.

    librdkafka looks up a coordinator for the reader's (unused) group.id; where ACLs deny
    DESCRIBE on that group the lookup fails, which does not matter to fetching. Granting
    DESCRIBE on the group prefix ``connectops-offsets-reader-`` silences it.
    """
    return err.code() in (KafkaError._PARTITION_EOF, KafkaError.GROUP_AUTHORIZATION_FAILED)


__all__ = ["Stalled", "Take", "TopicReader"]
