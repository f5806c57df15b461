"""The Connector planner with plain data: no Connect, no Kubernetes, no mocks."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from connectops.models.connect_cluster import Capabilities
from connectops.models.connector import ConnectorSpec, DesiredState
from connectops.planning.connector import (
    Create,
    ObservedConnector,
    RestartBook,
    RestartFailed,
    SetState,
    UpdateConfig,
    capabilities_for,
    config_drift,
    failing_run_start,
    next_look,
    plan_connector,
    readiness,
    ready_run_start,
    render_config,
    restart_delay,
    restart_due_at,
    restarts_cleared,
)

MODERN = capabilities_for("4.3.0")
OLD = capabilities_for("3.4.1")


def spec(**kw: Any) -> ConnectorSpec:
    return ConnectorSpec.model_validate(
        {"clusterRef": {"name": "c"}, "class": "FileStreamSource", "config": {"file": "/f"}, **kw}
    )


def desired(s: ConnectorSpec) -> dict[str, str]:
    return render_config(s, "conn", {})


def plan(
    s: ConnectorSpec,
    observed: ObservedConnector,
    caps: Capabilities = MODERN,
    locked_by: str | None = None,
    book: RestartBook | None = None,
    now: float = 1000.0,
) -> Any:
    return plan_connector(s, desired(s), observed, caps, locked_by=locked_by, restarts=book or RestartBook(), now=now)


@pytest.mark.parametrize(
    ("version", "stop", "alter", "initial", "only_failed"),
    [
        ("2.8.2", False, False, False, False),
        ("3.0.0", False, False, False, True),
        ("3.5.1", True, False, False, True),
        ("3.6.0", True, True, False, True),
        ("3.7.0", True, True, True, True),
        ("4.3.0", True, True, True, True),
        ("7.5.0-ccs", True, False, False, True),
        ("7.6.1-ccs", True, True, False, True),
        ("3.9.0-SNAPSHOT", True, True, True, True),
    ],
)
def test_capabilities_by_version(version: str, stop: bool, alter: bool, initial: bool, only_failed: bool) -> None:
    caps = capabilities_for(version)
    assert (caps.stop, caps.alter_offsets, caps.initial_state, caps.restart_only_failed) == (
        stop,
        alter,
        initial,
        only_failed,
    )


def test_render_config_with_overrides_and_secrets() -> None:
    s = spec(
        tasksMax=3,
        producerOverrides={"lingerMs": 20, "config": {"max.request.size": "1"}},
        consumerOverrides={"max.poll.records": 10},
        adminOverrides={"request.timeout.ms": "5"},
        configFrom={"db.password": {"secretKeyRef": {"name": "s", "key": "k"}}},
    )
    rendered = render_config(s, "my conn", {"db.password": "pw"})
    assert rendered == {
        "file": "/f",
        "producer.override.linger.ms": "20",
        "producer.override.max.request.size": "1",
        "consumer.override.max.poll.records": "10",
        "admin.override.request.timeout.ms": "5",
        "db.password": "pw",
        "connector.class": "FileStreamSource",
        "tasks.max": "3",
        "name": "my conn",
    }


def test_missing_connector_is_created_in_desired_state_when_supported() -> None:
    s = spec(state="paused")
    p = plan(s, ObservedConnector(live_config=None, state=None))
    assert p.needs_validation
    assert p.actions == [Create(initial_state="PAUSED")]


def test_old_worker_creates_then_sets_state() -> None:
    s = spec(state="paused")
    p = plan(s, ObservedConnector(live_config=None, state=None), caps=OLD)
    assert p.actions == [Create(initial_state=None), SetState(DesiredState.PAUSED, None)]


def test_stopped_refused_on_old_worker() -> None:
    p = plan(spec(state="stopped"), ObservedConnector(live_config=None, state=None), caps=OLD)
    assert p.unsupported
    assert "3.5" in p.unsupported
    assert p.actions == []


def test_no_action_when_nothing_differs() -> None:
    s = spec()
    p = plan(s, ObservedConnector(live_config=desired(s), state="RUNNING", task_count=1))
    assert p.actions == []
    assert not p.needs_validation
    assert p.drift == []


def test_config_change_is_validated_then_put_with_changed_keys_only() -> None:
    s = spec(producerOverrides={"batchSize": 100})
    live = desired(spec())
    p = plan(s, ObservedConnector(live_config=live, state="RUNNING", task_count=1))
    assert p.needs_validation
    assert p.actions == [UpdateConfig(("producer.override.batch.size",))]


def test_config_drift_reports_removed_and_changed_keys() -> None:
    assert config_drift({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "x"}) == ["b", "c"]


@pytest.mark.parametrize(
    ("desired_state", "observed", "expected"),
    [
        ("running", "PAUSED", DesiredState.RUNNING),
        ("running", "STOPPED", DesiredState.RUNNING),
        ("paused", "RUNNING", DesiredState.PAUSED),
        ("paused", "STOPPED", DesiredState.PAUSED),
        ("stopped", "RUNNING", DesiredState.STOPPED),
        ("stopped", "FAILED", DesiredState.STOPPED),
        ("stopped", "PAUSED", DesiredState.STOPPED),
    ],
)
def test_state_transitions(desired_state: str, observed: str, expected: DesiredState) -> None:
    s = spec(state=desired_state)
    p = plan(s, ObservedConnector(live_config=desired(s), state=observed, task_count=1))
    assert p.actions == [SetState(expected, observed)]


@pytest.mark.parametrize("transitional", ["UNASSIGNED", "RESTARTING"])
def test_transitional_states_wait(transitional: str) -> None:
    s = spec(state="paused")
    p = plan(s, ObservedConnector(live_config=desired(s), state=transitional))
    assert p.actions == []


def test_lock_blocks_everything_including_config() -> None:
    s = spec(producerOverrides={"batchSize": 1})
    p = plan(s, ObservedConnector(live_config=desired(spec()), state="STOPPED"), locked_by="default/reset-1")
    assert p.blocked_reason == "default/reset-1"
    assert p.actions == []


def test_failed_tasks_restart_with_doubling_backoff() -> None:
    s = spec(autoRestart={"backoff": {"initialSeconds": 10, "maxSeconds": 60}})
    obs = ObservedConnector(live_config=desired(s), state="RUNNING", failed_tasks=(1,), task_count=2)
    # the first look that sees the failure waits initialSeconds: it is the first sight, and it
    # asks to be looked at again then
    first = plan(s, obs, book=RestartBook(failing_since=None), now=1000.0)
    assert first.actions == []
    assert next_look(s, obs, RestartBook(failing_since=1000.0), 1000.0) == pytest.approx(1010.0)
    assert plan(s, obs, book=RestartBook(failing_since=1000.0), now=1009.0).actions == []
    due = plan(s, obs, book=RestartBook(failing_since=1000.0), now=1010.0)
    assert due.actions == [RestartFailed((1,), False, True)]
    # second restart is due 20 s after the first (count 1 -> 10 * 2)
    book = RestartBook(count=1, last_restart_at=1000.0, failing_since=900.0)
    assert plan(s, obs, book=book, now=1015.0).actions == []
    assert restart_due_at(s, book, 1015.0) == pytest.approx(1020.0)
    assert next_look(s, obs, book, 1015.0) == pytest.approx(1020.0)
    due = plan(s, obs, book=RestartBook(count=1, last_restart_at=1000.0), now=1020.0)
    assert due.actions == [RestartFailed((1,), False, True)]
    assert restart_delay(10, 10, 60) == 60


def _restart_times(s: ConnectorSpec, failed_at: float, restarts: int) -> list[float]:
    """When the planner restarts a task that fails again at once after each restart, first seen
    failing at ``failed_at``, looked at when :func:`next_look` asks (and only then)."""
    obs = ObservedConnector(live_config=desired(s), state="RUNNING", failed_tasks=(0,), task_count=1)
    book, now, made = RestartBook(), failed_at, []
    since = failing_run_start(True, None, now, conclusive=True)
    for _ in range(restarts + 1):
        book = RestartBook(book.count, book.last_restart_at, since)
        look = next_look(s, obs, book, now)
        if look is None:
            break
        now = look
        p = plan(s, obs, book=book, now=now)
        assert p.actions == [RestartFailed((0,), False, True)], p
        made.append(now)
        book = RestartBook(book.count + 1, now)
    return made


def test_the_restarts_come_at_their_delays_2_4_4() -> None:
    """What the field says: initialSeconds is the delay before the first restart, counted from
    the failure seen; each next one doubles, capped at maxSeconds, counted from the one before."""
    s = spec(autoRestart={"maxRestarts": 3, "backoff": {"initialSeconds": 2, "maxSeconds": 4}})
    made = _restart_times(s, 100.0, 5)
    assert [b - a for a, b in itertools.pairwise([100.0, *made])] == [2.0, 4.0, 4.0]
    # after the last one: a look when a next one would be due, to see the task fail again…
    obs = ObservedConnector(live_config=desired(s), state="RUNNING", failed_tasks=(0,), task_count=1)
    restarting = ObservedConnector(desired(s), "RUNNING", task_count=1, unsettled_tasks=((0, "RESTARTING"),))
    book = RestartBook(3, made[-1])
    assert next_look(s, restarting, book, made[-1] + 0.5) == made[-1] + 4
    # …and say the limit is reached then; after that no look is asked for
    assert plan(s, obs, book=book, now=made[-1] + 4).restart_limit_reached
    assert next_look(s, obs, book, made[-1] + 4) is None


def test_next_look_while_a_restart_is_on_its_way() -> None:
    s = spec(autoRestart={"maxRestarts": 5, "backoff": {"initialSeconds": 2, "maxSeconds": 8}})
    live = desired(s)
    restarting = ObservedConnector(live, "RUNNING", task_count=1, unsettled_tasks=((0, "RESTARTING"),))
    running = ObservedConnector(live, "RUNNING", task_count=1)
    book = RestartBook(1, 100.0)
    # before the next restart would fall due: then (a task failing again is restarted on time)
    assert next_look(s, restarting, book, 101.0) == 104.0
    assert next_look(s, running, book, 101.0) == 104.0
    # past it, still on its way: every initialSeconds, until maxSeconds after the restart
    assert next_look(s, restarting, book, 105.0) == 107.0
    assert next_look(s, restarting, book, 108.0) is None
    # Ready past it, or never restarted and not failing: the resync's
    assert next_look(s, running, book, 105.0) is None
    assert next_look(s, running, RestartBook(), 105.0) is None
    assert next_look(s, restarting, RestartBook(), 105.0) is None
    # a failure seen, its restart already past due (planned on an earlier look): at once
    failed = ObservedConnector(live, "RUNNING", failed_tasks=(0,), task_count=1)
    assert next_look(s, failed, RestartBook(1, 100.0), 120.0) == 104.0
    # nothing to keep pace with: paused, disabled
    assert next_look(spec(state="paused"), failed, book, 101.0) is None
    assert next_look(spec(autoRestart={"enabled": False}), failed, book, 101.0) is None


def test_a_failing_run_starts_at_its_first_sight_and_only_a_fresh_look_ends_it() -> None:
    assert failing_run_start(True, None, 10.0, conclusive=False) == 10.0
    assert failing_run_start(True, 10.0, 15.0, conclusive=True) == 10.0
    # a shared listing may be older than the look that began the run
    assert failing_run_start(False, 10.0, 15.0, conclusive=False) == 10.0
    assert failing_run_start(False, 10.0, 15.0, conclusive=True) is None


def test_restart_limit() -> None:
    s = spec(autoRestart={"maxRestarts": 2})
    obs = ObservedConnector(live_config=desired(s), state="FAILED", connector_failed=True)
    p = plan(s, obs, book=RestartBook(count=2, last_restart_at=0.0))
    assert p.restart_limit_reached
    assert p.actions == []


def test_old_worker_restarts_per_task() -> None:
    s = spec()
    obs = ObservedConnector(live_config=desired(s), state="RUNNING", failed_tasks=(0,), task_count=1)
    seen = RestartBook(failing_since=0.0)
    assert plan(s, obs, caps=capabilities_for("2.8.0"), book=seen).actions == [RestartFailed((0,), False, False)]


def test_no_restart_when_paused_or_disabled() -> None:
    s = spec(state="paused")
    obs = ObservedConnector(live_config=desired(s), state="PAUSED", failed_tasks=(0,), task_count=1)
    seen = RestartBook(failing_since=0.0)  # long enough ago for a restart to be due
    assert plan(s, obs, book=seen).actions == []
    s2 = spec(autoRestart={"enabled": False})
    obs2 = ObservedConnector(live_config=desired(s2), state="RUNNING", failed_tasks=(0,), task_count=1)
    assert plan(s2, obs2, book=seen).actions == []


def test_readiness() -> None:
    s = spec()
    live = desired(s)
    assert readiness(s, ObservedConnector(live, "RUNNING", task_count=1)).ready
    assert readiness(s, ObservedConnector(live, "RUNNING", task_count=0)).reason == "NoTasks"
    assert readiness(s, ObservedConnector(live, "RUNNING", (0,), 1)).reason == "TasksFailed"
    assert readiness(s, ObservedConnector(live, "PAUSED", task_count=1)).reason == "StateMismatch"
    # a task on its way to RUNNING or to FAILED is not Ready yet (CI29-CI31)
    for unsettled in ("RESTARTING", "UNASSIGNED"):
        seen = readiness(s, ObservedConnector(live, "RUNNING", task_count=2, unsettled_tasks=((1, unsettled),)))
        assert (seen.ready, seen.reason, seen.message) == (
            False,
            "TasksNotRunning",
            f"task(s) not RUNNING yet: 1 {unsettled}",
        )
    stopped = spec(state="stopped")
    assert readiness(stopped, ObservedConnector(live, "STOPPED")).ready


# -- when the automatic restart count starts again from 0 -----------------------------------------


def _observe(spec_: ConnectorSpec, book: RestartBook, looks: list[tuple[float, bool]]) -> list[bool]:
    """Each look (time, Ready) as the reconciler makes it: the run of Ready looks, then the rule."""
    since: float | None = None
    out = []
    for now, ready in looks:
        since = ready_run_start(ready, since, now)
        out.append(restarts_cleared(spec_, ready, book, now, since))
    return out


def test_one_look_at_a_failing_task_s_running_moment_never_clears_the_count() -> None:
    """CI29/CI30: the task that fails in start() showed RUNNING 3 s after a slow restart; one
    look at that moment cleared the count (maxSeconds 2), and it was restarted twice more."""
    s = spec(autoRestart={"maxRestarts": 2, "backoff": {"initialSeconds": 1, "maxSeconds": 2}})
    book = RestartBook(count=2, last_restart_at=100.0)
    assert _observe(s, book, [(103.0, True), (106.0, False), (109.0, True), (112.0, False)]) == [False] * 4


def test_the_count_clears_after_an_unbroken_run_of_ready_looks_as_long_as_max_seconds() -> None:
    s = spec(autoRestart={"maxRestarts": 2, "backoff": {"initialSeconds": 1, "maxSeconds": 2}})
    book = RestartBook(count=2, last_restart_at=100.0)
    assert _observe(s, book, [(103.0, True), (104.0, True), (105.0, True)]) == [False, False, True]
    # a break starts the run again
    assert _observe(s, book, [(103.0, True), (104.5, False), (105.0, True), (106.0, True), (107.0, True)]) == [
        False,
        False,
        False,
        False,
        True,
    ]


def test_the_count_never_clears_sooner_than_max_seconds_after_the_last_restart() -> None:
    s = spec(autoRestart={"maxRestarts": 5, "backoff": {"initialSeconds": 1, "maxSeconds": 10}})
    book = RestartBook(count=1, last_restart_at=100.0)
    assert _observe(s, book, [(95.0, True), (105.0, True), (110.0, True)]) == [False, False, True]
    assert _observe(s, RestartBook(count=0, last_restart_at=None), [(0.0, True), (100.0, True)]) == [False, False]
