"""What to do when a check read a running task's own series but none of its producer's.

Kafka's ``JmxReporter`` registers and unregisters MBeans by name, and a source task's producer
keeps its client id, ``connector-producer-<connector>-<task>``, across restarts of the task.
When a task is stopped under producer pressure its thread is blocked in ``send()`` (the buffer is
full and Connect sets ``max.block.ms`` to Long.MAX_VALUE), so the graceful stop times out after
``task.shutdown.graceful.timeout.ms``; ``cancel()`` then closes the old producer from another
thread, the new task starts and registers its producer, and the old task's thread, unblocked,
closes the old producer again on its way out. That second close runs the old reporter's
``close()``, which unregisters every MBean of its name: the new producer's. Nothing registers
them again while that producer lives, so every scrape of the JMX exporter lacks the task's
producer from then on, though the task runs and produces. (Measured on Connect 4.3.1: the new
producer's series were served for about a second after the restart, then never again.)

A restart of the task builds a new producer whose MBeans nobody clobbers, provided the old one
stops in time, which it does once the pressure is gone; so the operator restarts the task once
and checks again. Once: if the producer is still not served after that (pressure still there,
or a cause a restart does not mend), the condition says so and nothing loops. A
``producer.override.client.id`` breaks the link between task and producer instead: there a
restart cannot help, and the condition says that.

Pure: figures in, decision out; the reconciler restarts, posts the Event and asks for the check.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from connectops.models.connector import ConnectorSpec

#: Condition reason of ProducerHealthy (status Unknown) and the Event of the restart
NOT_SERVED: Final = "ProducerMetricsNotServed"
RESTARTED: Final = "ProducerMetricsRestart"
#: how the trigger of the check that follows the restart begins: the restart was made
RESTART_TRIGGER: Final = "producer metrics restart"
CLIENT_ID_KEY: Final = "producer.override.client.id"


class Remedy(Enum):
    #: restart the listed tasks and check again
    RESTART = "restart"
    #: say so in the condition, restart nothing
    REPORT = "report"


@dataclass(frozen=True)
class ProducerMetricsDecision:
    remedy: Remedy
    #: the tasks to restart (empty unless RESTART)
    restart: tuple[int, ...]
    #: the ProducerHealthy message
    message: str


def unserved_tasks(verdict: Mapping[str, Any] | None) -> tuple[int, ...]:
    """The tasks whose own series the check read but whose producer's it did not."""
    block = (verdict or {}).get("producer")
    if not isinstance(block, Mapping):
        return ()
    found = []
    for task in block.get("tasks") or []:
        if (
            isinstance(task, Mapping)
            and task.get("producerMetricsServed") is False
            and isinstance(task.get("task"), int)
        ):
            found.append(int(task["task"]))
    return tuple(sorted(found))


def client_id_overridden(spec: ConnectorSpec) -> bool:
    """Whether the connector names its producer's client id (the series cannot be tied to a task);
    a ``producer.override.*`` key can only come from ``producerOverrides`` (the spec refuses it
    in ``config``)."""
    overrides = spec.producer_overrides
    return overrides is not None and "client.id" in overrides.as_properties()


def restarted_already(trigger: str | None) -> bool:
    """Whether the check that read this was the one after the operator's restart."""
    return bool(trigger) and str(trigger).startswith(RESTART_TRIGGER)


def restart_trigger(generation: int | None, tasks: Collection[int]) -> str:
    return f"{RESTART_TRIGGER} (generation {generation}): restarted tasks {sorted(tasks)}"


def decide(
    unserved: Collection[int],
    running: Collection[int],
    *,
    client_id_override: bool,
    after_restart: bool,
) -> ProducerMetricsDecision | None:
    """None when every task's producer was read. ``running``: the tasks Connect reports RUNNING
    now (a task not running has no producer to read, and its state says why)."""
    tasks = sorted(set(unserved))
    if not tasks:
        return None
    head = (
        f"the workers' metrics serve task(s) {tasks} but not their producers' "
        "(connector-producer-<connector>-<task>): producer pressure is not judged"
    )
    if client_id_override:
        return ProducerMetricsDecision(
            Remedy.REPORT,
            (),
            f"{head}; the connector sets {CLIENT_ID_KEY}, so its producer's series carry that id instead "
            "and cannot be tied to a task: remove the override to have them read",
        )
    if after_restart:
        return ProducerMetricsDecision(
            Remedy.REPORT,
            (),
            f"{head}, still after the operator restarted them once; the worker's JMX holds no producer "
            "MBean for them (check the exporter's rules for kafka.producer, and the worker log for a "
            "'Graceful stop of task ... failed' around the last restart): restart the tasks once the "
            "producer keeps up, or raise task.shutdown.graceful.timeout.ms",
        )
    restart = tuple(t for t in tasks if t in set(running))
    if not restart:
        return ProducerMetricsDecision(Remedy.REPORT, (), f"{head}; the tasks are not RUNNING now")
    return ProducerMetricsDecision(
        Remedy.RESTART,
        restart,
        f"{head}. A task restarted while its producer could not drain (graceful stop timed out) keeps "
        "running, but the old producer's close unregisters the new one's MBeans, which share its "
        f"client id; the operator restarted task(s) {list(restart)} once so its producer registers "
        "again, and checks again",
    )
