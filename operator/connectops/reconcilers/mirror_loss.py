"""Silent loss behind a MirrorMaker 2 source connector: records the source lost before MM2 copied them.

Why the operator looks at every reconcile (its resync included) rather than leaving it to the
lag check: the check runs after a change, not on a clock, and the evidence does not last. A
running MM2 whose next offset fell below the source's log-start gets OFFSET_OUT_OF_RANGE, resets
to the earliest offset (MM2's ``auto.offset.reset``) and stores an offset past the log-start at
its next commit; after that, nothing in Connect or the source says records were skipped. And a
re-created topic is known only by its topic ID changing, which needs the ID from the look
before, kept in ``status.mirrorLoss``. The check's verdict says the same for truncation when it
runs (``MIRROR_RECORDS_LOST``), from its own snapshot.

What a look reads: MM2's stored offsets (``GET /connectors/<name>/offsets``: the LAST offset
replicated per source partition, under the ``source.cluster.alias``; entries under another
alias are ignored, as MM2 ignores them), and from the source cluster the log-start and log-end
(ListOffsets earliest/latest) and the topic IDs (Metadata). Per source partition:

- ``SourceTruncated``: the stored offset + 1 (where MM2 resumes) is below the log-start:
  ``log-start - (stored + 1)`` records were deleted (retention, DeleteRecords) unreplicated.
- ``SourceTopicRecreated``: the topic's ID differs from the last look's. MM2 resumes the new
  topic at the old stored offset + 1: when the new topic holds that offset already, the records
  below it (from its log-start) are skipped; when it does not, the consumer is out of range and
  MM2 starts from the earliest offset: nothing of the new topic is lost. Either way the remote
  topic now holds two topics' records, so the re-creation is reported even with 0 lost. Which
  stored offset: when MM2 has no running task at this look it has not read the new topic, and
  its offsets now are where it resumes (a stopping task commits last, often after the look
  before: at the 60 s resync that look can be a minute of traffic old); with a task running,
  the offsets now may already be the new topic's, so the look before's are taken. A look that
  comes between the re-creation and the new topic's records finds nothing lost yet: while MM2
  has no running task and has not moved, each later look counts again what it will skip.

Losses stay on the condition (False) until acknowledged: the annotation
``connectops.io/acknowledge-mirror-loss`` set to a value not acted on before clears them (a
one-shot token, like the restart verbs). Limits: a truncation that a RUNNING MM2 skips between
two looks is caught only when a look falls in the moment MM2 is behind the log-start; the
records a deleted topic held unreplicated when it was deleted are not known (the message gives
the count at the last look).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicCollection

from connectops.adapters.connect_rest import ConnectApi, ConnectError
from connectops.adapters.kafka import KafkaOffsetsError
from connectops.adapters.kafka.topics import TopicAdmin
from connectops.models.base import utcnow_iso
from connectops.models.connector import ConnectorStatus, MirrorLoss, MirrorLossStatus, MirrorTopicSeen
from connectops.reconcilers.common import Conditions
from connectops.redact import Redactor
from connectops_rules import mm2

log = logging.getLogger(__name__)

CONDITION = "MirrorComplete"
ACK_ANNOTATION = "connectops.io/acknowledge-mirror-loss"
TRUNCATED = "SourceTruncated"
RECREATED = "SourceTopicRecreated"
#: each broker round trip of a look; a look makes three
TIMEOUT_S = 10.0
#: losses kept in the status (the oldest go first; the count stays in recordsLost)
MAX_LOSSES = 50
#: Java client settings of the source cluster that librdkafka takes as they are
_PASSED = ("security.protocol", "sasl.mechanism")
_JAAS = re.compile(r'username\s*=\s*"(?P<user>[^"]*)"\s+password\s*=\s*"(?P<password>[^"]*)"')

#: (topic, partition)
Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Observation:
    """One look: MM2's stored offsets under its source alias, and the source topics now."""

    stored: dict[Key, int]
    topic_ids: dict[str, str]
    log_start: dict[Key, int]
    log_end: dict[Key, int]


def is_mirror_source(connector_class: str) -> bool:
    """By its class, as the check job recognises it too (connectops_rules.mm2)."""
    return mm2.role_by_class(connector_class) is mm2.Mm2Role.SOURCE


def stored_offsets(entries: Sequence[Mapping[str, Any]], alias: str) -> dict[Key, int]:
    """MirrorSourceConnector's KIP-875 entries under ``alias``: (topic, partition) -> last replicated."""
    out: dict[Key, int] = {}
    for entry in entries:
        partition, offset = entry.get("partition") or {}, entry.get("offset") or {}
        if partition.get("cluster") != alias or not isinstance(offset.get("offset"), int):
            continue
        if isinstance(partition.get("topic"), str) and isinstance(partition.get("partition"), int):
            out[(partition["topic"], partition["partition"])] = int(offset["offset"])
    return out


def needs_state(previous: MirrorLossStatus | None, seen: Observation) -> bool:
    """Whether this look must know if MM2 has a running task (assess's ``idle``): a topic's ID
    changed since the last look, or a re-creation found earlier waits for MM2 to resume."""
    before = {t.topic: t.topic_id for t in (previous.topics if previous else [])}
    if any(before.get(t, topic_id) != topic_id for t, topic_id in seen.topic_ids.items()):
        return True
    losses = previous.losses if previous else []
    return any(
        x.reason == RECREATED and _waiting(seen.stored.get((x.topic, x.partition)), x.first_lost) for x in losses
    )


def _waiting(stored: int | None, resume: int) -> bool:
    """MM2's offset still just below where it resumes a re-created topic: it has not read it yet."""
    return (stored if stored is not None else -1) == resume - 1


def assess(
    previous: MirrorLossStatus | None, seen: Observation, now: str, ack: str | None, *, idle: bool = False
) -> MirrorLossStatus:
    """The new ``status.mirrorLoss`` from the last one and this look (module docstring).
    ``idle``: MM2 has no running task now, so its stored offsets are where it resumes, and a
    topic re-created at an earlier look that MM2 has not resumed is counted again at this look."""
    before = {t.topic: t for t in (previous.topics if previous else [])}
    acknowledged = previous.acknowledged if previous else None
    losses = list(previous.losses) if previous else []
    if ack and ack != acknowledged:
        losses, acknowledged = [], ack
    found: dict[tuple[str, int, str, int], MirrorLoss] = {
        (x.topic, x.partition, x.reason, x.first_lost): x for x in losses
    }

    def record(topic: str, partition: int, reason: str, first: int, lost: int, message: str) -> None:
        key = (topic, partition, reason, first)
        old = found.get(key)
        if old is not None and old.lost >= lost:
            return
        found[key] = MirrorLoss(
            topic=topic,
            partition=partition,
            reason=reason,
            first_lost=first,
            lost=lost,
            detected_at=old.detected_at if old is not None else now,
            message=message,
        )

    topics: list[MirrorTopicSeen] = []
    for topic in sorted({t for t, _ in seen.stored} | set(before)):
        topic_id = seen.topic_ids.get(topic)
        last = before.get(topic)
        if topic_id is None:
            if last is not None:
                topics.append(last)  # deleted for now: its re-creation is told by the ID it had
            continue
        partitions = sorted(p for t, p in seen.log_end if t == topic)
        recreated = last is not None and last.topic_id != topic_id
        # where MM2 resumes a topic re-created at an earlier look (the latest re-creation's)
        waiting = {
            x.partition: x.first_lost
            for x in sorted(found.values(), key=lambda x: x.detected_at)
            if x.topic == topic and x.reason == RECREATED
        }
        for p in partitions:
            start, end, stored = seen.log_start[(topic, p)], seen.log_end[(topic, p)], seen.stored.get((topic, p))
            if recreated and last is not None:
                old = last.stored.get(str(p))
                base = stored if idle and stored is not None else old if old is not None else stored
                resume = (base if base is not None else -1) + 1
                lost = resume - start if start < resume <= end else 0
                tail = last.log_end.get(str(p), 0) - resume if old is not None else 0
                record(
                    topic,
                    p,
                    RECREATED,
                    resume,
                    lost,
                    f"{topic}-{p} was deleted and re-created (topic ID {last.topic_id} -> {topic_id}): "
                    + (
                        f"MirrorMaker 2 resumes the new topic at offset {resume}, skipping its {lost} records from "
                        f"{start}"
                        if lost
                        else f"MirrorMaker 2's next offset {resume} is past the new topic's end {end}, so it reads "
                        "the new topic from its start"
                    )
                    + (f"; {tail} records of the old topic were not replicated at the look before" if tail > 0 else ""),
                )
            elif idle and p in waiting and _waiting(stored, waiting[p]) and start < waiting[p] <= end:
                # re-created at an earlier look, and MM2 has not resumed since: the records the new
                # topic got meanwhile below MM2's next offset are skipped as well when it does
                resume = waiting[p]
                record(
                    topic,
                    p,
                    RECREATED,
                    resume,
                    resume - start,
                    f"{topic}-{p} was deleted and re-created: MirrorMaker 2, not running, resumes the new topic at "
                    f"offset {resume}, skipping its {resume - start} records from {start}",
                )
            elif stored is not None and stored + 1 < start:
                record(
                    topic,
                    p,
                    TRUNCATED,
                    stored + 1,
                    start - (stored + 1),
                    f"{topic}-{p}: the source's log-start {start} passed MirrorMaker 2's next offset {stored + 1}: "
                    f"{start - (stored + 1)} records deleted before they were replicated",
                )
        topics.append(
            MirrorTopicSeen(
                topic=topic,
                topic_id=topic_id,
                stored={str(p): seen.stored[(topic, p)] for p in partitions if (topic, p) in seen.stored},
                log_end={str(p): seen.log_end[(topic, p)] for p in partitions},
            )
        )
    kept = sorted(found.values(), key=lambda x: (x.detected_at, x.topic, x.partition))[-MAX_LOSSES:]
    return MirrorLossStatus(
        topics=topics,
        losses=kept,
        records_lost=sum(x.lost for x in found.values()),
        acknowledged=acknowledged,
        checked_at=now,
    )


def condition(status: MirrorLossStatus) -> tuple[bool, str, str]:
    if not status.losses:
        watched = sum(len(t.log_end) for t in status.topics)
        return True, "NothingLost", f"the source holds every record MM2 has yet to copy ({watched} partitions)"
    reason = RECREATED if any(x.reason == RECREATED for x in status.losses) else TRUNCATED
    per = ", ".join(f"{x.topic}-{x.partition}: {x.lost}" for x in status.losses)
    text = f"{status.records_lost} records lost before replication ({per}); {status.losses[-1].message}"
    return False, reason, f"{text}. Acknowledge with annotation {ACK_ANNOTATION}=<new token>"[:1000]


def source_client_config(config: Mapping[str, str]) -> tuple[str | None, dict[str, str]]:
    """The source cluster's bootstrap and the librdkafka settings MM2's ``source.cluster.*`` Java
    settings translate to: security protocol, SASL mechanism, and a PLAIN/SCRAM JAAS login's user
    and password. Key stores (JKS) have no librdkafka counterpart: such a cluster is not readable."""
    prefix = "source.cluster."
    out = {k: config[prefix + k] for k in _PASSED if config.get(prefix + k)}
    jaas = _JAAS.search(config.get(prefix + "sasl.jaas.config", ""))
    if jaas is not None:
        out["sasl.username"], out["sasl.password"] = jaas["user"], jaas["password"]
    return config.get(prefix + "bootstrap.servers"), out


class _SourceCluster(TopicAdmin):
    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        """Topic name -> topic ID of the topics that exist (Metadata v10+, Kafka 2.8+)."""
        if not topics:
            return {}
        admin = self._admin_client()
        futures = self._call(
            "describe topics",
            lambda: admin.describe_topics(TopicCollection(topics), request_timeout=self.timeout_s),
        )
        out: dict[str, str] = {}
        for name, future in futures.items():
            try:
                description = future.result(timeout=self.timeout_s)
            except KafkaException:
                continue  # a missing topic: absent, which is what a deletion looks like
            out[str(name)] = str(description.topic_id)
        return out

    def observe(self, stored: dict[Key, int]) -> Observation:
        ids = self.topic_ids(sorted({t for t, _ in stored}))
        partitions = self.partitions_for(ids)
        return Observation(
            stored=stored,
            topic_ids=ids,
            log_start=self.list_offsets(partitions, "earliest"),
            log_end=self.list_offsets(partitions, "latest"),
        )


class MirrorLossWatch:
    """Looks for silent loss behind each MirrorMaker 2 source connector at every reconcile."""

    async def look(
        self,
        client: ConnectApi,
        connector: str,
        config: Mapping[str, str],
        annotations: Mapping[str, str],
        stored: ConnectorStatus,
        status: ConnectorStatus,
        conditions: Conditions,
    ) -> None:
        """Sets ``status.mirrorLoss`` and the condition for an MM2 source connector (nothing for
        any other); a source not readable now leaves the last look's record and says Unknown."""
        if not is_mirror_source(config.get("connector.class", "")):
            return
        bootstrap, settings = source_client_config(config)
        alias = config.get("source.cluster.alias")
        if not bootstrap or not alias:
            conditions.set(CONDITION, None, "NotObservable", "no source.cluster.bootstrap.servers or alias")
            return
        redactor = Redactor(settings.values())
        try:
            entries = await client.get_offsets(connector)
            source = _SourceCluster(bootstrap, settings, timeout_s=TIMEOUT_S)
            try:
                seen = await asyncio.wait_for(
                    asyncio.to_thread(source.observe, stored_offsets(entries, alias)), 4 * TIMEOUT_S
                )
            finally:
                source.close()
            # only around a re-creation: which stored offsets MM2 resumes from (assess)
            idle = False
            if needs_state(stored.mirror_loss, seen):
                state = await client.get_status(connector)
                idle = state is None or not any(t.state == "RUNNING" for t in state.tasks)
        except (ConnectError, KafkaOffsetsError, KafkaException, TimeoutError) as exc:
            text = redactor(f"{type(exc).__name__}: {exc}")[:500]
            conditions.set(CONDITION, None, "NotObservable", f"could not look for lost records: {text}")
            log.info("mirror loss of %s not observable: %s", connector, text)
            return
        found = assess(stored.mirror_loss, seen, utcnow_iso(), annotations.get(ACK_ANNOTATION), idle=idle)
        ok, reason, message = condition(found)
        conditions.set(CONDITION, ok, reason, message, event_on_change=True, warning=not ok)
        status.mirror_loss = found
