"""What a change cost, from polls of Connect's status (planning/interruption.py): a stale RUNNING
from before the change never ends the interruption, the error bound is the wait before the poll
that saw a task back, and what could not be seen is said rather than guessed."""

from __future__ import annotations

from connectops.planning.interruption import InterruptionWatch

R, U = "RUNNING", "UNASSIGNED"


def _feed(watch: InterruptionWatch, polls: list[tuple[float, str | None, list[tuple[int, str]]]]) -> list[bool]:
    return [watch.observe(at, state, tasks) for at, state, tasks in polls]


def test_a_config_change_is_measured_from_the_call_to_the_first_task_back() -> None:
    watch = InterruptionWatch(cause="ConfigUpdated", connector="c", started=100.0, before=frozenset({0, 1}))
    done = _feed(
        watch,
        [
            (100.05, R, [(0, R), (1, R)]),  # stale: the status topic has not caught up yet
            (100.15, R, [(0, U), (1, R)]),
            (100.35, R, [(0, U), (1, U)]),
            (100.75, R, [(0, R), (1, U)]),
            (101.75, R, [(0, R), (1, R)]),
        ],
    )
    assert done == [False, False, False, False, True]
    cost = watch.result()
    assert cost.outcome == "Measured"
    assert cost.seconds == 0.75
    assert cost.precision_seconds == 0.4  # the poll before it was at 100.35
    assert cost.all_tasks_seconds == 1.75
    assert cost.stopped_at == "1970-01-01T00:01:40.000Z"
    assert cost.first_task_running_at == "1970-01-01T00:01:40.750Z"


def test_stale_running_only_is_no_stop_seen_not_a_zero() -> None:
    watch = InterruptionWatch(cause="ConfigUpdated", connector="c", started=10.0, before=frozenset({0}))
    assert _feed(watch, [(10.1, R, [(0, R)]), (10.3, R, [(0, R)]), (11.3, R, [(0, R)])]) == [False] * 3
    cost = watch.result()
    assert (cost.outcome, cost.seconds) == ("NoStopSeen", None)
    assert "1.3s (3 observations)" in (cost.message or "")


def test_a_task_the_change_created_counts_as_back_when_it_runs() -> None:
    # tasksMax 1 -> 2: task 1 did not exist before the call, so its RUNNING cannot be stale
    watch = InterruptionWatch(cause="ConfigUpdated", connector="c", started=0.0, before=frozenset({0}))
    assert _feed(watch, [(0.1, R, [(0, U)]), (0.5, R, [(0, U), (1, R)]), (0.9, R, [(0, R), (1, R)])]) == [
        False,
        False,
        True,
    ]
    cost = watch.result()
    assert (cost.seconds, cost.all_tasks_seconds) == (0.5, 0.9)


def test_a_reset_starts_at_the_stop_and_its_error_bound_at_the_resume() -> None:
    watch = InterruptionWatch(cause="OffsetReset", connector="c", started=50.0, already_stopped=True, down_until=58.0)
    assert _feed(watch, [(58.05, "RUNNING", []), (58.15, R, [(0, R)])]) == [False, True]
    cost = watch.result()
    assert (cost.seconds, cost.precision_seconds) == (8.15, 0.1)


def test_only_the_restarted_tasks_are_watched() -> None:
    watch = InterruptionWatch(
        cause="Restarted", connector="c", started=0.0, restarted=frozenset({1}), before=frozenset({0, 1})
    )
    # task 0 was never touched: its RUNNING says nothing; task 1 goes down and comes back
    assert _feed(
        watch, [(0.1, R, [(0, R), (1, R)]), (0.2, R, [(0, R), (1, "RESTARTING")]), (0.6, R, [(0, R), (1, R)])]
    ) == [
        False,
        False,
        True,
    ]
    assert watch.result().seconds == 0.6


def test_still_down_at_the_end_of_the_watch_and_left_paused_on_purpose() -> None:
    watch = InterruptionWatch(cause="ConfigUpdated", connector="c", started=0.0, before=frozenset({0}))
    _feed(watch, [(0.2, R, [(0, U)]), (5.0, "FAILED", [(0, "FAILED")])])
    cost = watch.result()
    assert (cost.outcome, cost.seconds) == ("NotRunningYet", None)
    assert "5s after the change" in (cost.message or "")
    paused = InterruptionWatch(cause="OffsetReset", connector="c", started=0.0, already_stopped=True)
    assert paused.result(not_resumed="PAUSED").outcome == "NotResumed"


def test_a_slow_answer_bounds_the_return_from_when_it_was_asked_for() -> None:
    """Connect took its state somewhere between a poll's sending and its answer: a poll that
    saw the task not back yet, answered late, says only that it came back after it was sent.
    (Seen in CI: an answer 2.5 s late claimed a bound the task had already beaten.)"""
    watch = InterruptionWatch(cause="OffsetReset", connector="c", started=10.0, already_stopped=True, down_until=10.0)
    # sent at 10.2, answered at 12.5 (the task was back at 10.9, after Connect took its state)
    assert watch.observe(12.5, R, [(0, U)], sent=10.2) is False
    assert watch.observe(12.6, R, [(0, R)], sent=12.55) is True
    cost = watch.result()
    assert cost.first_task_running_at == "1970-01-01T00:00:12.600Z"
    # the task came back after 10.2 (the slow poll's sending), not after 12.5 (its answer)
    assert cost.precision_seconds == 2.4
    assert 12.6 - cost.precision_seconds <= 10.9
