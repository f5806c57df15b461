"""What a change cost: how long a connector processed nothing because of it.

Shared by the Connector (config changes, restart verbs) and the OffsetReset (stop -> resume) so
that one dashboard, one Event wording and one histogram describe both.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from connectops.models.base import StatusModel


class InterruptionCause(StrEnum):
    CONFIG_UPDATED = "ConfigUpdated"
    DRIFT_CORRECTED = "DriftCorrected"
    RESTARTED = "Restarted"
    OFFSET_RESET = "OffsetReset"


class InterruptionOutcome(StrEnum):
    #: tasks were seen stopped and then RUNNING again: ``seconds`` is the figure
    MEASURED = "Measured"
    #: no task was seen stopped while it was watched: Connect kept the tasks (their configs did
    #: not change), or restarted them between two polls
    NO_STOP_SEEN = "NoStopSeen"
    #: the watch ended before a task was RUNNING again (the Ready condition says why)
    NOT_RUNNING_YET = "NotRunningYet"
    #: the change left the connector paused or stopped on purpose (an OffsetReset's resume policy)
    NOT_RESUMED = "NotResumed"


class Interruption(StatusModel):
    """Connect reports no time for task transitions, so this is measured by polling
    ``GET /connectors/<name>/status``: from the call that stopped the tasks (known exactly) to
    the first poll that showed a task RUNNING again after it was seen stopped. The figure
    overstates the truth by at most ``precisionSeconds``, the wait before that poll."""

    cause: str = Field(description="ConfigUpdated, DriftCorrected, Restarted or OffsetReset.")
    connector: str = Field(description="The connector in Kafka Connect.")
    outcome: str = Field(description="Measured, NoStopSeen, NotRunningYet or NotResumed.")
    stopped_at: str = Field(description="When the call that stopped the tasks was made.")
    first_task_running_at: str | None = Field(
        default=None, description="When a task was first seen RUNNING again (Measured)."
    )
    seconds: float | None = Field(
        default=None, ge=0, description="Stop to first task RUNNING: how long the connector processed nothing."
    )
    all_tasks_seconds: float | None = Field(
        default=None, ge=0, description="Stop to every task RUNNING, when that was seen."
    )
    precision_seconds: float | None = Field(
        default=None, ge=0, description="The wait before the poll that saw the first task RUNNING: the error bound."
    )
    message: str | None = Field(default=None, description="What was seen, in a sentence.")
