"""How long each step of an OffsetReset may take, all its attempts together. No I/O.

Every call has its own deadline, but a step retried attempt after attempt (kopf retries it on
a worker that does not answer, or answers a byte at a time) would keep a connector stopped for
as long as the retries go on. A step's deadline counts from its first attempt's start, across
attempts and operator restarts (the start is in status); once it has passed, the step fails
and the failure path decides as for any failed step: before an offsets call the connector is
resumed ("nothing was changed"), after one it stays stopped and locked, naming its backup.

The figures: the stop is confirmed once Connect shows the connector STOPPED with no tasks,
which takes a rebalance (``rebalance.timeout.ms``, 60 s by default) and the tasks' graceful
shutdown (``task.shutdown.graceful.timeout.ms``, 5 s): 90 s leaves a margin over both. Lock,
resume and unlock are a few calls each. Inspect and backup read every offset of the
connectors (tens of thousands of partitions for a large sink or MirrorMaker 2 flow) and write
the backup's ConfigMaps; reset writes them all (tombstones, group offsets) and reads them back;
verify waits for the tasks to run again (as long as a start takes).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from connectops.planning.offset_reset import Step

STEP_DEADLINE_SECONDS: Mapping[Step, float] = MappingProxyType(
    {
        Step.LOCK: 60.0,
        Step.INSPECT: 120.0,
        Step.STOP: 90.0,
        Step.BACKUP: 180.0,
        Step.RESET: 600.0,
        Step.OFFSET_SYNCS: 300.0,
        Step.RESUME: 60.0,
        Step.VERIFY: 120.0,
        Step.UNLOCK: 60.0,
    }
)

#: steps whose attempt in flight may be cut at the deadline: they read, or make a change that is
#: whole or absent (a Lease, a ConfigMap, a stop). The others change offsets (some in threads
#: that a cancellation would not stop) or return a connector to its state: their deadline is
#: checked before each attempt, and each of their calls has its own.
INTERRUPTIBLE = frozenset({Step.LOCK, Step.INSPECT, Step.STOP, Step.BACKUP, Step.VERIFY})


def seconds_left(step: Step, first_started: float | None, now: float, deadlines: Mapping[Step, float]) -> float:
    """What is left of ``step``'s deadline at ``now`` (epoch seconds); its first start unknown
    (a status written before steps had one): the whole deadline, counted from now."""
    budget = deadlines.get(step, STEP_DEADLINE_SECONDS[step])
    if first_started is None:
        return budget
    return first_started + budget - now


def deadline_message(step: Step, seconds: float, attempts: int, last: str | None) -> str:
    """Why a step failed at its deadline, with what its last attempt said."""
    what = "the stop could not be confirmed" if step is Step.STOP else f"the {step} step did not finish"
    said = f"; last: {last}" if last else ""
    return f"{what} within the step's deadline of {seconds:g} s ({attempts} attempt(s){said})"
