"""Connect's status topic: the record of every task transition, with the worker's own timestamps.

Why read it: the REST status is a cache of this topic that can skip a transition entirely. After a
config change on Connect 4.3 the worker wrote ``UNASSIGNED`` for the task and, three seconds later,
``RUNNING`` with a new generation, while ``GET /status`` polled every 10 ms showed ``RUNNING`` the
whole time (tests/e2e/test_change_cost.py). The records are what the workers wrote, in order, with
the producer's CreateTime: how long a task was down is their difference.

Wire format (Connect's ``KafkaStatusBackingStore``): key ``status-task-<connector>-<task id>``,
value JSON ``{"state", "trace", "worker_id", "generation", ...}`` (written with schemas disabled).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Message

from connectops.adapters.kafka.reader import TopicReader
from connectops.adapters.kafka.topics import TopicAdmin

#: a status value is a few hundred bytes; a FAILED one carries a stack trace. Anything bigger is
#: not Connect's and is not parsed.
_VALUE_LIMIT = 1 << 20


@dataclass(frozen=True)
class TaskEvent:
    task: int
    state: str
    generation: int | None
    #: the worker's CreateTime, seconds since the epoch
    at: float


class StatusTopic(TopicAdmin, TopicReader):
    """Task transitions of one connector, from a point on (see the module doc)."""

    def ends(self, topic: str) -> dict[int, int]:
        """Every partition's end offset now: where to start reading what comes next."""
        return {p: end for p, (_, end) in self.watermarks(topic).items()}

    def task_events(
        self, topic: str, connector: str, since: Mapping[int, int], *, budget: float = 5.0
    ) -> tuple[list[TaskEvent], dict[int, int]]:
        """The task records of ``connector`` written after ``since`` (as :meth:`ends` returned
        it), oldest first, and the offsets to continue from. An end offset reported inside the
        last batch (some Kafka-protocol brokers do) only makes the read start earlier: records are filtered by key,
        nothing new is lost."""
        ends = self.ends(topic)
        ranges = {p: (since.get(p, 0), end) for p, end in ends.items() if end > since.get(p, 0)}
        prefix = f"status-task-{connector}-".encode()
        events: list[TaskEvent] = []

        def take(messages: list[Message]) -> None:
            for msg in messages:
                event = _event(msg, prefix)
                if event is not None:
                    events.append(event)

        if ranges:
            self._read_to_end(
                topic,
                ranges,
                take,
                budget=budget,
                operation=f"read status topic {topic!r}",
                stalled=lambda read, left: (
                    f"status topic {topic!r}: {read} record(s) read, {left} partition(s) stalled"
                ),
            )
        events.sort(key=lambda e: e.at)
        return events, {**since, **ends}


def _event(msg: Message, prefix: bytes) -> TaskEvent | None:
    key, value = msg.key(), msg.value()
    if not key or not key.startswith(prefix) or not value or len(value) > _VALUE_LIMIT:
        return None
    task = key[len(prefix) :]
    if not task.isdigit() or len(task) > 9:
        return None  # another connector whose name extends this one's ("orders-v2" after "orders")
    try:
        body = json.loads(value)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("state"), str):
        return None
    generation = body.get("generation")
    _, ms = msg.timestamp()
    if ms <= 0:
        return None  # no time: nothing to measure with
    return TaskEvent(
        task=int(task),
        state=body["state"][:20],
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else None,
        at=ms / 1000,
    )
