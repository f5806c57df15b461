"""What the operator decides when a check read a running task but not its producer
(planning.producer_metrics), and how ProducerHealthy says it (planning.checks)."""

from __future__ import annotations

from typing import Any

from connectops.models.connector import ConnectorSpec
from connectops.planning.checks import conditions_for, producer_condition
from connectops.planning.producer_metrics import (
    NOT_SERVED,
    Remedy,
    client_id_overridden,
    decide,
    restart_trigger,
    restarted_already,
    unserved_tasks,
)


def _verdict(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"verdict": "HEALTHY", "lag": None, "balance": None, "reasons": [], "producer": {"tasks": list(tasks)}}


SERVED = {"task": 0, "producerMetricsServed": True, "diagnosis": None, "effect": None}
UNSERVED = {"task": 1, "producerMetricsServed": False, "diagnosis": None, "effect": None}


def test_unserved_tasks_are_the_ones_the_check_flagged() -> None:
    assert unserved_tasks(_verdict(SERVED, UNSERVED)) == (1,)
    assert unserved_tasks(_verdict(SERVED)) == ()
    # a verdict of a job before the flag existed: nothing is claimed missing
    assert unserved_tasks(_verdict({"task": 0, "diagnosis": None})) == ()
    assert unserved_tasks(None) == ()
    assert unserved_tasks({"producer": None}) == ()


def test_the_condition_is_unknown_not_healthy_when_a_producer_is_not_served() -> None:
    ok, reason, message = producer_condition(_verdict(SERVED, UNSERVED)["producer"]) or (True, "", "")
    assert (ok, reason) == (None, NOT_SERVED)
    assert "[1]" in message
    result = conditions_for("COMPLETED", _verdict(SERVED, UNSERVED))
    assert result.unserved_producer_tasks == (1,)
    assert result.producer is not None
    assert result.producer[1] == NOT_SERVED
    # all served: healthy as before
    assert (producer_condition(_verdict(SERVED)["producer"]) or (None,))[0] is True
    assert conditions_for("COMPLETED", _verdict(SERVED)).unserved_producer_tasks == ()


def test_pressure_seen_on_another_task_still_wins() -> None:
    diagnosed = {**SERVED, "diagnosis": {"message": "records per request 16"}}
    assert producer_condition(_verdict(diagnosed, UNSERVED)["producer"]) == (
        False,
        "ProducerPressure",
        "records per request 16",
    )


def test_a_running_task_whose_producer_is_not_served_is_restarted_once() -> None:
    first = decide([1, 0], [0, 1, 2], client_id_override=False, after_restart=False)
    assert first is not None
    assert first.remedy is Remedy.RESTART
    assert first.restart == (0, 1)
    assert "restarted task(s) [0, 1] once" in first.message
    # the check after that restart still finds it: reported, nothing restarted again
    second = decide([1], [0, 1], client_id_override=False, after_restart=True)
    assert second is not None
    assert second.remedy is Remedy.REPORT
    assert second.restart == ()
    assert "still after the operator restarted them once" in second.message


def test_only_running_tasks_are_restarted() -> None:
    some = decide([0, 1], [1], client_id_override=False, after_restart=False)
    assert some is not None
    assert some.restart == (1,)
    none = decide([0], [], client_id_override=False, after_restart=False)
    assert none is not None
    assert none.remedy is Remedy.REPORT
    assert "not RUNNING" in none.message


def test_a_client_id_override_is_reported_not_restarted() -> None:
    decision = decide([0], [0], client_id_override=True, after_restart=False)
    assert decision is not None
    assert decision.remedy is Remedy.REPORT
    assert "producer.override.client.id" in decision.message
    spec = ConnectorSpec.model_validate(
        {"clusterRef": {"name": "c"}, "class": "x", "producerOverrides": {"config": {"client.id": "mine"}}}
    )
    assert client_id_overridden(spec)
    plain = ConnectorSpec.model_validate(
        {"clusterRef": {"name": "c"}, "class": "x", "producerOverrides": {"batchSize": 1}}
    )
    assert not client_id_overridden(plain)


def test_nothing_to_decide_when_every_producer_is_served() -> None:
    assert decide([], [0], client_id_override=False, after_restart=False) is None


def test_the_restart_check_is_recognised_by_its_trigger() -> None:
    trigger = restart_trigger(3, [1, 0])
    assert trigger.endswith("restarted tasks [0, 1]")
    assert restarted_already(trigger)
    assert not restarted_already("generation 3: UpdateConfig")
    assert not restarted_already(None)
