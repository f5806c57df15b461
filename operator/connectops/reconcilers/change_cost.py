"""What a change cost a connector: the watch begun before the call, what it observes, and its
publication (status, histogram, Event). The decisions are :mod:`connectops.planning.interruption`'s.

The source is the workers' status records of the connector from just before the change (see
:mod:`connectops.adapters.kafka.status_topic` for why not the REST status), where the
ConnectCluster says how to reach its Kafka; otherwise the REST status is polled, and the result
says what that cannot see."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from connectops import metrics
from connectops.adapters.connect_rest import ConnectorState
from connectops.adapters.kafka import KafkaOffsetsError
from connectops.adapters.kafka.status_topic import StatusTopic
from connectops.models.connector import ConnectorStatus
from connectops.models.interruption import InterruptionCause
from connectops.planning.connector import UpdateConfig
from connectops.planning.interruption import InterruptionWatch
from connectops.reconcilers.clusters import ClusterHandle
from connectops.reconcilers.common import EmitEvent

#: one read of the new status records; a change's whole watch is bounded by the settle time
_READ_BUDGET = 5.0


@dataclass
class StatusFeed:
    reader: StatusTopic
    topic: str
    connector: str
    since: dict[int, int]

    @classmethod
    async def begin(cls, cluster: ClusterHandle, connector: str) -> StatusFeed | None:
        """Where the status topic ends now (call it before the change), or None without Kafka
        access or when the topic cannot be read (the REST status is used then)."""
        reader = cluster.status_reader()
        if reader is None:
            return None
        topic = cluster.spec.topics.status
        try:
            since = await asyncio.to_thread(reader.ends, topic)
        except KafkaOffsetsError:
            return None
        return cls(reader, topic, connector, since)

    async def feed(self, watch: InterruptionWatch) -> bool:
        """Hand the records written since the last call to ``watch``; True when it is complete."""
        try:
            events, self.since = await asyncio.to_thread(
                self.reader.task_events, self.topic, self.connector, self.since, budget=_READ_BUDGET
            )
        except KafkaOffsetsError:
            return False  # read again at the next poll; the settle time bounds the whole watch
        done = False
        for event in events:
            done = watch.observe_event(event.at, event.task, event.state) or done
        return done


def watch_for(
    state: ConnectorState | None, cause: InterruptionCause, tasks: frozenset[int] | None = None
) -> InterruptionWatch | None:
    """A watch of the change about to be made, when it can cost anything: only a connector
    that is RUNNING with tasks is processing (a paused or failed one has nothing to lose)."""
    if state is None or state.state != "RUNNING" or not state.tasks:
        return None
    return InterruptionWatch(
        cause=cause,
        connector=state.name,
        started=time.time(),
        restarted=tasks,
        before=frozenset(t.id for t in state.tasks),
    )


def watch_change(action: Any, state: ConnectorState | None, periodic: bool) -> InterruptionWatch | None:
    """Of the planned actions, a config PUT restarts running tasks (state changes are the user's
    own stop or resume, automatic restarts bring back tasks that were already failed)."""
    if not isinstance(action, UpdateConfig):
        return None
    return watch_for(state, InterruptionCause.DRIFT_CORRECTED if periodic else InterruptionCause.CONFIG_UPDATED)


async def observe(
    watch: InterruptionWatch | None, feed: StatusFeed | None, state: ConnectorState | None, sent: float | None = None
) -> bool:
    """One look after the change (status records if there is a feed, else this REST status,
    asked for at ``sent``); True when the watch has nothing more to learn (or there is none)."""
    if watch is None:
        return True
    if feed is not None:
        return await feed.feed(watch)
    return watch.observe(
        time.time(),
        None if state is None else state.state,
        [] if state is None else [(t.id, t.state) for t in state.tasks],
        sent=sent,
    )


def publish(watch: InterruptionWatch | None, status: ConnectorStatus, emit: EmitEvent) -> None:
    """Status always; the histogram and an Event when something was seen stopped (a change
    Connect absorbed without a visible stop is no news)."""
    if watch is None:
        return
    cost = watch.result()
    status.last_interruption = cost
    if cost.seconds is not None:
        metrics.INTERRUPTION_SECONDS.labels(cause=cost.cause).observe(cost.seconds)
    if watch.stop_seen:
        emit("Normal", "Interrupted", f"{cost.cause}: {cost.connector} {cost.message}")
