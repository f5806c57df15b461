"""A finished check that read a running task but not its producer: say so, and restart the task
once so its producer registers again (why: planning.producer_metrics)."""

from __future__ import annotations

import logging

from connectops.adapters.connect_rest import ConnectApi, ConnectError, ConnectorState
from connectops.models.checks import LastCheck
from connectops.models.connector import ConnectorSpec
from connectops.planning.checks import CheckConditions
from connectops.planning.producer_metrics import (
    NOT_SERVED,
    RESTARTED,
    Remedy,
    client_id_overridden,
    decide,
    restart_trigger,
    restarted_already,
)
from connectops.reconcilers.common import Conditions, EmitEvent

log = logging.getLogger(__name__)


async def remedy(  # noqa: PLR0913 - the check's result and the pass it remedies
    client: ConnectApi,
    connector: str,
    spec: ConnectorSpec,
    state: ConnectorState | None,
    last: LastCheck,
    result: CheckConditions,
    conditions: Conditions,
    emit: EmitEvent,
    generation: int | None,
) -> str | None:
    """Words ProducerHealthy for tasks whose producer was not served; the trigger of the check to
    ask for when tasks were restarted (None: nothing restarted, no check to ask for)."""
    running = [t.id for t in (state.tasks if state is not None else ()) if t.state == "RUNNING"]
    decision = decide(
        result.unserved_producer_tasks,
        running,
        client_id_override=client_id_overridden(spec),
        after_restart=restarted_already(last.trigger),
    )
    if decision is None:
        return None
    if decision.remedy is not Remedy.RESTART:
        conditions.set("ProducerHealthy", None, NOT_SERVED, decision.message[:1500], event_on_change=True)
        return None
    restarted: list[int] = []
    for task in decision.restart:
        try:
            await client.restart_task(connector, task)
        except ConnectError as exc:
            # not retried here: the next check that finds it unserved words it (after_restart
            # is not set, so it tries again then), and a failing restart must not loop
            log.warning("restart of task %s of %s (producer metrics not served) failed: %s", task, connector, exc)
            break
        restarted.append(task)
    if not restarted:
        message = f"{decision.message[:1200]}; the restart failed, the next check tries again"
        conditions.set("ProducerHealthy", None, NOT_SERVED, message, event_on_change=True, warning=True)
        return None
    conditions.set("ProducerHealthy", None, NOT_SERVED, decision.message[:1500])
    emit(
        "Normal",
        RESTARTED,
        f"restarted task(s) {restarted} of {connector}: the workers' metrics served the tasks but not their "
        "producers (the old producer's close unregistered the new one's MBeans); checking again",
    )
    return restart_trigger(generation, restarted)
