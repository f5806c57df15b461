"""The reconciler's side of a producer not served (reconcilers.producer_metrics): against the
Connect double, which tasks it restarts, the Event it posts, the condition it words, and that
the check after its restart restarts nothing again."""

from __future__ import annotations

from connectops.adapters.connect_rest import ConnectUnavailable
from connectops.models.checks import LastCheck
from connectops.models.connector import ConnectorSpec
from connectops.planning.checks import CheckConditions
from connectops.planning.producer_metrics import NOT_SERVED, RESTARTED, restarted_already
from connectops.reconcilers.common import Conditions
from connectops.reconcilers.producer_metrics import remedy
from tests.doubles.connect import FILE_SOURCE, Call, FakeConnect

NAME = "flood"
SPEC = ConnectorSpec.model_validate({"clusterRef": {"name": "c"}, "class": FILE_SOURCE, "tasksMax": 1})
RESULT = CheckConditions(
    (None, "NotApplicable", ""),
    (None, "NotApplicable", ""),
    (None, NOT_SERVED, "the workers' metrics serve task(s) [0] but not their producers'"),
    unserved_producer_tasks=(0,),
)


async def _connect() -> FakeConnect:
    connect = FakeConnect()
    await connect.put_config(NAME, {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": "/x", "topic": "t"})
    connect.calls.clear()
    return connect


async def test_the_unserved_running_task_is_restarted_once_with_an_event() -> None:
    connect = await _connect()
    events: list[tuple[str, str, str]] = []
    conditions = Conditions([], 2, lambda *e: events.append(e))
    state = await connect.get_status(NAME)
    last = LastCheck(application="flood-check-g2", trigger="generation 2: UpdateConfig", state="COMPLETED")

    again = await remedy(connect, NAME, SPEC, state, last, RESULT, conditions, lambda *e: events.append(e), 2)

    assert connect.writes() == [Call("restart_task", (NAME, 0))]
    assert again is not None
    assert restarted_already(again)
    assert [reason for _, reason, _ in events] == [RESTARTED]
    condition = conditions.get("ProducerHealthy")
    assert condition is not None
    assert (condition.status, condition.reason) == ("Unknown", NOT_SERVED)
    assert "restarted task(s) [0] once" in condition.message

    # the check that follows the restart finds it still missing: said, nothing restarted
    connect.calls.clear()
    events.clear()
    after = LastCheck(application="flood-check-g2-pm", trigger=again, state="COMPLETED")
    assert await remedy(connect, NAME, SPEC, state, after, RESULT, conditions, lambda *e: events.append(e), 2) is None
    assert connect.writes() == []
    condition = conditions.get("ProducerHealthy")
    assert condition is not None
    assert "still after the operator restarted them once" in condition.message
    assert [reason for _, reason, _ in events] == [NOT_SERVED]


async def test_a_failed_restart_asks_for_no_check_and_says_so() -> None:
    connect = await _connect()
    connect.fail_next("restart_task", ConnectUnavailable("down", operation="restart task"))
    events: list[tuple[str, str, str]] = []
    conditions = Conditions([], 2, lambda *e: events.append(e))
    last = LastCheck(application="flood-check-g2", trigger="generation 2: UpdateConfig", state="COMPLETED")
    state = await connect.get_status(NAME)
    assert await remedy(connect, NAME, SPEC, state, last, RESULT, conditions, lambda *e: events.append(e), 2) is None
    condition = conditions.get("ProducerHealthy")
    assert condition is not None
    assert "the restart failed" in condition.message
    assert [(kind, reason) for kind, reason, _ in events] == [("Warning", NOT_SERVED)]


async def test_served_producers_need_nothing() -> None:
    connect = await _connect()
    conditions = Conditions([], 2, lambda *e: None)
    served = CheckConditions((None, "", ""), (None, "", ""), (True, "NoProducerPressure", "ok"))
    last = LastCheck(application="flood-check-g2", state="COMPLETED")
    state = await connect.get_status(NAME)
    assert await remedy(connect, NAME, SPEC, state, last, served, conditions, lambda *e: None, 2) is None
    assert connect.writes() == []
    assert conditions.get("ProducerHealthy") is None
