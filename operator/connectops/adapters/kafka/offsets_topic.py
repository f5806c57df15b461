"""Connect's offsets topics: read a connector's offsets, reset them with tombstones, restore them.

A source connector's offsets live in its worker's offsets topic as ``[connectorName,
partitionMap]`` keys; the latest record per (Kafka partition, exact key bytes) is the offset
Connect sees. Resetting writes a tombstone with the exact key to the exact partition, restoring
writes the saved bytes back, and both read the partitions again afterwards to prove that each key's
latest value is what was written. Reads use the one loop of :mod:`connectops.adapters.kafka.reader`.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, count
from operator import add
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from connectops import fence
from connectops.adapters.kafka.codec import (
    OffsetRecord,
    RawRecord,
    WrittenRecord,
    _key_connector,
    _show,
    parse_offset_key,
)
from connectops.adapters.kafka.errors import (
    KafkaAccessDenied,
    KafkaUnavailable,
    ProduceFailed,
    RestoreVerificationFailed,
    TombstoneVerificationFailed,
    TopicMissing,
    VerificationFailed,
)
from connectops.adapters.kafka.reader import TopicReader
from connectops.adapters.kafka.topics import TopicAdmin

log = logging.getLogger(__name__)


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
    #: records whose key does not start as ``[name, {...}]`` JSON (foreign data, null keys)
    unparseable: int = 0
    partitions: int = 0
    #: per partition: the end offset the read went to (read-committed, like Connect with EOS)
    end_offsets: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def live(self) -> list[OffsetRecord]:
        return [r for r in self.records if r.value is not None]


_KEY = Message.key
_SEPARATOR = b"\x00"


def _prefixes(wanted: Iterable[str]) -> tuple[bytes, ...]:
    """How a key of each wanted connector starts when its name is written without escapes
    (Connect's JsonConverter writes ``["name",{...}]``, the name in UTF-8). A name that needs
    escaping has none: its keys hold a backslash, and those are all looked at (see ``take``)."""
    return tuple(
        b'["' + name.encode() + b'"'
        for name in wanted
        if not any(c in name for c in '"\\') and all(ord(c) >= 0x20 for c in name)
    )


class _LatestOfConnectors:
    """What a scan keeps while it reads: the latest message per (partition, key) of the wanted
    connectors, counting their records and the unparseable ones into ``scan``.

    Without a Python call per record: a batch's keys are joined into one buffer, each preceded
    by a NUL, and ``bytes.find`` looks for NUL + the start of a wanted connector's key, and for
    backslashes (an escaped name can be anyone's). Only those keys, a few per batch, are then
    classified as before, by :func:`_key_connector`, which decides; no other key can be a wanted
    connector's (a NUL inside a key can only add candidates, which it then rejects). A Python
    call per record held the scan at 0.5-0.8x kcat on 1M records, of which reading them
    (``consume()``) took 0.7 s: a compacted offsets topic has mostly distinct keys, so no cache of
    verdicts helps. ``unparseable`` counts null keys and the keys that do not start as a JSON
    array with a string (``["``)."""

    def __init__(self, wanted: set[str], scan: OffsetScan) -> None:
        self.wanted = wanted
        self.scan = scan
        self.latest: dict[tuple[int, bytes], Any] = {}
        self._needles = [_SEPARATOR + prefix for prefix in _prefixes(wanted)]

    def take(self, messages: list[Message]) -> None:
        keys: list[bytes | None] = list(map(_KEY, messages))
        if None in keys:  # foreign data: null keys, counted and left out
            self.scan.unparseable += keys.count(None)
            pairs = [(m, k) for m, k in zip(messages, keys, strict=True) if k is not None]
            messages, keys = [m for m, _ in pairs], [k for _, k in pairs]
        present = cast(list[bytes], keys)
        blob = _SEPARATOR + _SEPARATOR.join(present)
        self.scan.unparseable += max(0, len(present) - blob.count(_SEPARATOR + b'["'))
        # key i's separator sits at seps[i]: the lengths of the keys before it, plus i separators
        # (built by C-level map and accumulate: no Python call per record)
        seps = list(map(add, accumulate(map(len, present), initial=0), count()))

        def key_at(position: int) -> int:
            return bisect_right(seps, position) - 1

        candidates: set[int] = set()
        for needle in self._needles:
            at = blob.find(needle)
            while at >= 0:
                candidates.add(key_at(at))
                at = blob.find(needle, at + 1)
        at = blob.find(b"\\")
        while at >= 0:
            index = key_at(at)
            candidates.add(index)
            at = blob.find(b"\\", seps[index + 1])  # on from the next key's separator
        wanted, latest = self.wanted, self.latest
        for index in sorted(candidates):  # topic order: the latest record per key wins
            key = present[index]
            if _key_connector(key) in wanted:
                self.scan.matched += 1
                latest[(messages[index].partition() or 0, key)] = messages[index]


class _Deliveries:
    """The producer's delivery reports for one write: where each record landed, or why not."""

    def __init__(self, records: Sequence[RawRecord]) -> None:
        self.records = records
        self.written: list[WrittenRecord | None] = [None] * len(records)
        self.errors: list[KafkaError] = []

    def report(self, index: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.errors.append(err)
                return
            rec = self.records[index]
            self.written[index] = WrittenRecord(
                topic=rec.topic,
                partition=int(msg.partition() or 0),
                offset=int(msg.offset() or 0),
                key=rec.key,
                value=rec.value,
            )

        return on_delivery


def _produce_one(producer: Producer, rec: RawRecord, on_delivery: Callable[[KafkaError | None, Message], None]) -> None:
    """Queue one record for its exact partition, serving delivery reports while the queue is full."""
    while True:
        try:
            producer.produce(rec.topic, key=rec.key, value=rec.value, partition=rec.partition, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.1)  # local queue full: serve delivery reports first
        else:
            return


class ConnectOffsetsTopics(TopicReader, TopicAdmin):
    """Reads, resets and restores connectors' records in Connect's offsets topics."""

    # -- read -----------------------------------------------------------------------------------

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
        ranges = {p: (low, end) for p, (low, end) in marks.items() if end > low}
        keep = _LatestOfConnectors(wanted, scan)
        if wanted and ranges:
            scan.scanned = self._read_to_end(
                topic,
                ranges,
                keep.take,
                budget=budget,
                operation=operation,
                stalled=lambda read, unfinished: (
                    f"{operation}: not at the end after {budget:.0f}s "
                    f"({read} records read; {unfinished} partitions unfinished)"
                ),
            )
        for (_, key), msg in keep.latest.items():
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

    def read_connector_offsets(
        self, topic: str, connector_names: Iterable[str], *, timeout_s: float | None = None
    ) -> list[OffsetRecord]:
        """:meth:`scan_connector_offsets` without the counts (they are logged)."""
        return self.scan_connector_offsets(topic, connector_names, timeout_s=timeout_s).records

    # -- write ----------------------------------------------------------------------------------

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
        self._check_partitions(records)
        producer = self._producer()
        deliveries = _Deliveries(records)
        try:
            for i, rec in enumerate(records):
                _produce_one(producer, rec, deliveries.report(i))
            remaining = producer.flush(self.timeout_s + 5)
        except KafkaException as exc:
            raise self._from_exception(exc, operation) from None
        return self._acknowledged(deliveries, remaining, operation)

    def _check_partitions(self, records: Sequence[RawRecord]) -> None:
        """Every record names a partition its topic has (ValueError otherwise: a caller's bug)."""
        counts: dict[str, int] = {}
        for topic in {r.topic for r in records}:
            counts[topic] = self.partition_count(topic)
        for r in records:
            if not 0 <= r.partition < counts[r.topic]:
                raise ValueError(f"{r.topic} has {counts[r.topic]} partitions; cannot write to {r.partition}")

    def _acknowledged(self, deliveries: _Deliveries, remaining: int, operation: str) -> list[WrittenRecord]:
        """The written records once every one was acknowledged; the typed failure otherwise."""
        records, written, errors = deliveries.records, deliveries.written, deliveries.errors
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
        tombstones = [r.rewritten(None) for r in live]
        return self._produce_exact(tombstones, "write tombstones")

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

    # -- verify ---------------------------------------------------------------------------------

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
        ranges = {p: marks[p] for p in parts if p in marks and marks[p][1] > marks[p][0]}
        found: dict[tuple[int, bytes], bytes | None] = {}
        if not ranges:
            return found
        budget = self.read_timeout_s if timeout_s is None else float(timeout_s)

        def take(messages: list[Message]) -> None:
            for msg in messages:
                k = (msg.partition() or 0, msg.key() or b"")
                if k in keys:
                    found[k] = msg.value()

        self._read_to_end(
            topic,
            ranges,
            take,
            budget=budget,
            operation=operation,
            stalled=lambda read, _unfinished: (
                f"{operation}: {topic!r} not read to the end after {budget:.0f}s ({read} records)"
            ),
        )
        return found


__all__ = ["ConnectOffsetsTopics", "OffsetScan"]
