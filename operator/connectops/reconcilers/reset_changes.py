"""Every offsets-changing call of a reset, recorded, and the read-back that proves its result.

Recording: a call is written to ``status.changes`` as Started before it is sent and as Done (with
Connect's answer) or Refused after, so the failure path knows whether offsets may already have
changed, even after a crash. The Started record is written before the call; the answer rides on
the next write (see :meth:`OffsetChanges.change`). Read-back: while the connector is still
stopped, the whole connector's offsets are read from Connect's ``GET /offsets`` and, with Kafka
access, from Kafka itself, and compared with what the plan says every partition must hold
afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from connectops.adapters.kafka import OffsetRecord
from connectops.adapters.kube import KubeClient
from connectops.concurrency.backoff import Backoff
from connectops.concurrency.gather import both
from connectops.failures import ConnectopsError
from connectops.models.offset_reset import ChangeState, OffsetChange, OffsetResetStatus
from connectops.planning.offset_reset import ConnectorKind, diff_offsets
from connectops.reconcilers.common import Conditions
from connectops.reconcilers.offsets_listing import listed_when_settled
from connectops.reconcilers.reset_run import PLURAL, Run, StepFailed

#: how long Connect may take to show what was written to its offsets topic
READ_BACK_SECONDS = 30.0


def confirmation(message: str) -> bool | None:
    """Whether Connect's answer to a PATCH/DELETE of offsets says the connector confirmed the change
    (its alterOffsets returned true) or that only the framework-managed offsets changed."""
    if "framework-managed offsets" in message:
        return False
    if message.startswith("The offsets for this connector have been"):
        return True
    return None


def changed(run: Run) -> bool:
    """Whether any offsets call may have taken effect (Done, or Started with no answer)."""
    return run.status.changed_offsets()


def latest_entries(records: list[OffsetRecord]) -> list[dict[str, Any]]:
    """KIP-875 entries from offsets-topic records: the latest value of each key, tombstoned keys
    left out. ``records`` in the order :meth:`OffsetChanges.read_records` gives them: the
    connector-specific topic comes last, as Connect reads it in preference to the worker's."""
    latest: dict[bytes, OffsetRecord] = {}
    for record in records:
        latest[record.key] = record
    return [
        {"partition": r.partition_map, "offset": r.source_offset()}
        for r in latest.values()
        if r.value is not None and r.partition_map is not None
    ]


class OffsetChanges:
    """Makes and records offsets calls, and reads their result back."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def save(self, namespace: str, name: str, status: OffsetResetStatus, *fields: str) -> None:
        """Store ``status`` now (all of it, or only ``fields``): each step's start and end, and
        each offsets call, must be durable before the machine moves on."""
        await self._kube.patch_status(namespace, PLURAL, name, status.for_storage(*fields))

    async def store(self, run: Run, *fields: str) -> None:
        """Store ``fields`` of the run's status, or all of it when something not written yet
        rides along (``run.unsaved``)."""
        await self.save(run.namespace, run.name, run.status, *(() if run.unsaved else fields))
        run.unsaved = False

    async def change(
        self, run: Run, connector: str, call: str, partitions: int, act: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Make one offsets-changing call, recorded in status before it is sent (so a crash or a lost
        answer still counts as "may have changed") and after it returns, with Connect's answer."""
        entry = OffsetChange(connector=connector, call=call, partitions=partitions, state=ChangeState.STARTED)
        run.status.changes = [*run.status.changes, entry]
        await self.store(run, "changes")
        try:
            result = await act()
        except ConnectopsError as exc:
            # the adapters know their answers: Refused only when nothing was done; otherwise the
            # call may have taken effect and stays Started
            if exc.changed_nothing():
                entry.state = ChangeState.REFUSED
                await self.store(run, "changes")
            raise
        entry.state = ChangeState.DONE
        if isinstance(result, str) and result:
            entry.message = run.redactor(result)[:1000]
            entry.confirmed_by_connector = confirmation(result)
            if entry.confirmed_by_connector is False:
                self._external_offsets_condition(run)
        # The answer rides on the next write, which comes before the next offsets call or the
        # next step that acts: until then the entry reads Started, "may have changed", which is
        # what a crash in between must mean anyway (the answer was not kept).
        run.unsaved = True
        return result

    @staticmethod
    def _external_offsets_condition(run: Run) -> None:
        unconfirmed = [c for c in run.status.changes if c.confirmed_by_connector is False]
        message = "; ".join(f"{c.connector}: {c.message or ''}" for c in unconfirmed)
        conditions = Conditions(run.status.conditions, run.generation, run.emit)
        conditions.set(
            "OffsetsExternallyManaged", True, "NotConfirmedByConnector", message, event_on_change=True, warning=True
        )
        run.status.conditions = conditions.items

    async def confirm(self, run: Run, connector: str, expected: list[dict[str, Any]]) -> None:
        """Read back while still stopped (after a resume the connector commits new offsets at
        once, and the comparison would mean nothing): from Connect's GET /offsets and, where the
        cluster gives Kafka access, from the broker itself (the sink's group, or the records in
        the offsets topics). ``expected`` describes the whole connector, so a partition the reset
        was not asked to touch and that moved is caught too. Connect may lag its topic briefly."""
        deadline = time.monotonic() + READ_BACK_SECONDS
        backoff = Backoff()
        while True:
            # both reads at once: each is a read of the offsets topic (Connect's own, and ours),
            # and the connector stays stopped until they agree
            answered, broker = await both(
                run.cluster.client.get_offsets(connector), self.broker_offsets(run, connector)
            )
            actual = [e for e in answered if e.get("offset") is not None]
            problems = [f"Connect: {p}" for p in diff_offsets(expected, actual)]
            if not problems and broker is not None:
                problems = [f"Kafka: {p}" for p in diff_offsets(expected, broker)]
            if not problems:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{connector}: offsets after the reset differ from the plan: " + "; ".join(problems[:5]),
                    unsafe_to_resume=True,
                )
            await backoff.wait()

    async def settled_offsets(self, run: Run, connector: str) -> tuple[list[dict[str, Any]], list[OffsetRecord] | None]:
        """Connect's ``GET /offsets`` for a stopped connector, once it lists what Kafka holds.

        For a source connector on the worker's offsets topic, Connect lists the partitions from
        the set its offsets-topic reader has consumed so far, without reading to the end first
        (``Worker.sourceConnectorOffsets``: ``ConnectorOffsetBackingStore.start`` leaves the
        worker's store alone, so only the values are read to the end, not the partition list).
        Right after partitions were written (the stop's final commit, a large PATCH) it can leave
        some out: a backup from that answer would lose them, and ``DELETE /offsets`` would not
        reset them. With Kafka access the answer is compared with the offsets topics and asked
        again until they agree; without it, until two answers in a row agree (each answer reads
        the topic to the end before it returns, so the next one lists what the first left out).
        A sink's answer is the group's committed offsets read at the call: taken as it is.

        Returned with the answer: the offsets-topic records it was compared with (None where
        none were read), which a tombstone backup keeps as they are."""
        client = run.cluster.client
        if run.plan.config(connector).kind == ConnectorKind.SINK:
            return await client.get_offsets(connector), None
        if run.kafka is None:
            return await listed_when_settled(client, connector), None
        deadline = time.monotonic() + READ_BACK_SECONDS
        backoff = Backoff()
        while True:
            answered, records = await both(client.get_offsets(connector), self.read_records(run, connector))
            problems = diff_offsets(latest_entries(records), [e for e in answered if e.get("offset") is not None])
            if not problems:
                return answered, records
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{connector}: Connect's GET /offsets still differs from its offsets topic after "
                    f"{READ_BACK_SECONDS:.0f} s ({len(problems)} partition(s), first: {problems[0]}); "
                    "no backup was taken and nothing was changed"
                )
            await backoff.wait()

    async def broker_offsets(self, run: Run, connector: str) -> list[dict[str, Any]] | None:
        """The connector's offsets as Kafka holds them; None without Kafka access."""
        if run.kafka is None:
            return None
        cfg = run.plan.config(connector)
        if cfg.kind == ConnectorKind.SINK:
            group = await asyncio.to_thread(run.kafka.group_offsets, run.group(connector))
            return [
                {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(group.items())
            ]
        return latest_entries(await self.read_records(run, connector))

    @staticmethod
    def offsets_topics(run: Run, connector: str) -> list[str]:
        """The worker's offsets topic, then the connector's own one if it has one."""
        topics = [run.cluster.spec.topics.offsets]
        extra = run.plan.config(connector).offsets_topic
        if extra and extra not in topics:
            topics.append(extra)
        return topics

    async def read_records(self, run: Run, connector: str) -> list[OffsetRecord]:
        assert run.kafka is not None
        records: list[OffsetRecord] = []
        for topic in self.offsets_topics(run, connector):
            records.extend(await asyncio.to_thread(run.kafka.read_connector_offsets, topic, {connector}))
        return records
