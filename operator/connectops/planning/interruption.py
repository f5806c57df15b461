"""Measuring what a change cost: the time a connector processed nothing, from polls of its status.

Connect's status API has no timestamps and keeps showing a task's last state until the status
topic says otherwise, so right after a config PUT the old tasks still read RUNNING. A task counts
as running *again* only once it was itself seen not RUNNING (UNASSIGNED, RESTARTING, gone with
the whole task set...) since the change; a stale RUNNING never ends the interruption. The start
is the operator's own call, which it knows exactly; the end is the first poll that proves a task
came back, so the figure errs only upwards, by at most the wait before that poll.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from connectops.models.base import iso_ms
from connectops.models.interruption import Interruption, InterruptionOutcome

RUNNING = "RUNNING"


@dataclass
class InterruptionWatch:
    """Feed it every status poll after the call (:meth:`observe`); read :meth:`result` at the end.

    ``restarted``: the ids whose tasks the change restarts, or None for all of them (a config
    change, a whole-connector restart, a resume after a stop). ``already_stopped``: the tasks
    were known to be down when the call was made (a stopped connector's task set is empty).
    ``before``: the task ids Connect listed before the call; an id not among them is a task the
    change created, which cannot be showing a stale state (None: not known, no id is new).
    ``down_until``: a moment after the call when the tasks were still known to be down (a
    stopped connector before its resume call); the first poll's error bound starts there."""

    cause: str
    connector: str
    started: float
    restarted: frozenset[int] | None = None
    already_stopped: bool = False
    before: frozenset[int] | None = None
    down_until: float | None = None
    polls: int = 0
    _last: float | None = None
    _stopped: set[int] = field(default_factory=set)
    _torn_down: bool = False
    _back: set[int] = field(default_factory=set)
    #: measured from status records: the stop is the first record saying a task stopped
    _exact: bool = False
    _first_stop: float | None = None
    first_running: float | None = None
    precision: float | None = None
    all_running: float | None = None

    def __post_init__(self) -> None:
        self._torn_down = self.already_stopped
        # never before the call itself (a time cut to the second can be)
        self._last = None if self.down_until is None else max(self.down_until, self.started)

    def _watched(self, tasks: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
        return [(i, s) for i, s in tasks if self.restarted is None or i in self.restarted]

    def observe(
        self, at: float, connector_state: str | None, tasks: Sequence[tuple[int, str]], *, sent: float | None = None
    ) -> bool:
        """One poll (when its answer arrived, Connect's connector state, (task id, state)
        pairs); True when every watched task is back, nothing more to learn.

        ``sent``: when the poll was sent. Connect took its state at some moment between the two,
        so a poll that saw a task not yet back says only that it came back after ``sent``: the
        next poll's error bound starts there. (From ``at`` instead, a slow answer would claim a
        bound its state could not give: a task back while the answer was on its way.)"""
        if self.all_running is not None:
            return True
        waited = at - (self._last if self._last is not None else self.started)
        self._last = at if sent is None else min(sent, at)
        self.polls += 1
        watched = self._watched(tasks)
        if connector_state is None or (not tasks and self.restarted is None):
            # gone, or a stopped connector (no tasks at all): every task of the connector is down
            self._torn_down = True
            return False
        for task_id, state in watched:
            if state != RUNNING:
                self._stopped.add(task_id)
        back = [i for i, s in watched if s == RUNNING and (self._torn_down or i in self._stopped or self._new(i))]
        if connector_state != RUNNING or not back:
            return False
        if self.first_running is None:
            self.first_running = at
            self.precision = waited
        if len(back) == len(watched) and (self.restarted is None or len(watched) == len(self.restarted)):
            self.all_running = at
            return True
        return False

    def observe_event(self, at: float, task_id: int, state: str) -> bool:
        """One record of Connect's status topic (in the order the workers wrote them, with their
        own timestamps); True when every watched task is back. A record cannot be stale, so the
        stop is the first non-RUNNING record, and a RUNNING record with no stop before it (the
        worker did not write the stop) is still a restart after the call: its stop is the call."""
        if self.all_running is not None:
            return True
        if self.restarted is not None and task_id not in self.restarted:
            return False
        self.polls += 1
        self._exact = True
        if state != RUNNING:
            if not self._stopped and not self._torn_down:
                self._first_stop = at
            self._stopped.add(task_id)
            self._back.discard(task_id)
            return False
        self._stopped.add(task_id)
        self._back.add(task_id)
        if self.first_running is None:
            self.first_running = at
            self.precision = 0.001  # the records' CreateTime, in milliseconds
        expected = self.restarted if self.restarted is not None else self.before
        if expected is not None and expected <= self._back:
            self.all_running = at
            return True
        return False

    def _new(self, task_id: int) -> bool:
        return self.before is not None and task_id not in self.before

    @property
    def stop_seen(self) -> bool:
        return self._torn_down or bool(self._stopped)

    def result(self, *, not_resumed: str | None = None) -> Interruption:
        """What was seen; ``not_resumed`` names the state a change left the connector in on
        purpose (nothing more will run, and the figure would be meaningless)."""
        stopped = self._first_stop if self._exact and self._first_stop is not None else self.started
        base = Interruption(cause=self.cause, connector=self.connector, outcome="", stopped_at=iso_ms(stopped))

        if not_resumed is not None:
            base.outcome = InterruptionOutcome.NOT_RESUMED
            base.message = f"left {not_resumed} on purpose: it processes nothing until it is resumed"
            return base
        if self.first_running is not None:
            base.outcome = InterruptionOutcome.MEASURED
            base.first_task_running_at = iso_ms(self.first_running)
            base.seconds = round(self.first_running - stopped, 3)
            base.precision_seconds = round(self.precision or 0.0, 3)
            if self.all_running is not None:
                base.all_tasks_seconds = round(self.all_running - stopped, 3)
            every = base.all_tasks_seconds
            source = (
                "from the workers' status records"
                if self._exact
                else f"to within {base.precision_seconds:g}s, from polls of the REST status"
            )
            base.message = f"processed nothing for {base.seconds:g}s ({source}), stop to first task RUNNING" + (
                f"; every task RUNNING after {every:g}s" if every is not None else ""
            )
            return base
        span = round(max(self._last or self.started, self.started) - self.started, 3)
        if self.stop_seen:
            base.outcome = InterruptionOutcome.NOT_RUNNING_YET
            base.message = f"no task RUNNING again {span:g}s after the change ({self.polls} observations)"
        else:
            base.outcome = InterruptionOutcome.NO_STOP_SEEN
            base.message = f"no task was seen stopped in {span:g}s ({self.polls} observations): " + (
                "the workers wrote no stop record, Connect kept its tasks"
                if self._exact
                else "the REST status can hide a restart; with spec.kafka and spec.topics.status on the "
                "ConnectCluster the figure comes from the workers' status records"
            )
        return base
