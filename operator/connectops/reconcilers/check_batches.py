"""Batching the checks of one Connect cluster into one SparkApplication, with a cap on how many run.

Why: every change used to launch its own SparkApplication, so a GitOps sync that changed 500
Connectors started 500 Spark drivers at once. Here a check request joins the open batch of its
group (same namespace, same cluster arguments, same driver settings and credentials:
:func:`~connectops.planning.checks.batch_group`); the batch is launched when its window closes (or
when it is full) and only while fewer than ``check_max_running`` of this operator's batches run;
until then it keeps accepting members. A newer change of a connector whose check is still waiting
replaces that request (its batch name stays, so the status already written stays true).

What it is not: the record. Each Connector's ``status.lastCheck`` is (QUEUED, then the
application's state); this class only schedules. Its memory is lost with the process: a QUEUED
check it does not know is requested again by the Connector's reconciler (:meth:`knows`), and the
running count starts from zero after a restart (applications launched before it are not counted
against the cap until they are seen again; the log says how many are counted).

The Connector's reconciler stays the only writer of its status: the batcher never writes a
status, it answers :meth:`outcome` when the reconciler asks; a refused batch wakes its members
(:attr:`CheckBatcher.wake`), so that their status says so now, not at their next resync. A batch
refused because SparkApplications are not served leaves its members waiting on the kind
(:class:`~connectops.reconcilers.check_kind.KindProbe`), which wakes them once it is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing
from connectops.models.checks import SparkCheckDefaults
from connectops.planning.checks import (
    NOT_SERVED,
    SPARK_GROUP,
    SPARK_PLURAL,
    SPARK_VERSION,
    TERMINAL_STATES,
    BatchMember,
    application_name,
    batch_application,
)
from connectops.reconcilers.check_kind import FIRST_SECONDS, KindProbe

log = logging.getLogger(__name__)

#: how often a batch waiting for a running slot looks again (each look GETs the running ones)
SLOT_POLL_SECONDS = 2.0
#: a launched or refused batch is forgotten after this long; a QUEUED status naming a forgotten
#: batch is settled by reading its application (see ConnectorReconciler)
FORGET_SECONDS = 3600.0


@dataclass
class _Batch:
    name: str
    namespace: str
    group: str
    #: the ConnectCluster the batch checks: the application's name and owner label
    cluster: str
    settings: SparkCheckDefaults
    #: by owner uid; a member leaves when superseded or when its object is deleted
    members: dict[str, BatchMember] = field(default_factory=dict)
    launched_at: float | None = None
    #: why it could not be launched (NOT_SUBMITTED for every member)
    refused: list[str] | None = None
    #: when it was launched or refused (monotonic)
    settled_at: float | None = None
    #: the longest timeout of its members: a launched batch running longer is deleted
    timeout_seconds: float = 0.0
    full: asyncio.Event = field(default_factory=asyncio.Event)


class BatchState(StrEnum):
    """Where a check's batch is, as its member sees it."""

    QUEUED = "QUEUED"
    LAUNCHED = "LAUNCHED"
    #: the batch's launch was refused (the outcome's reasons say why)
    REFUSED = "REFUSED"


@dataclass(frozen=True)
class Outcome:
    """What became of a member's batch: still waiting, launched, or refused (with why)."""

    state: BatchState
    reasons: tuple[str, ...] = ()


class CheckBatcher:
    def __init__(
        self,
        kube: KubeClient,
        *,
        window_seconds: float,
        max_connectors: int,
        max_running: int,
        slot_poll_seconds: float = SLOT_POLL_SECONDS,
        kind_cap_seconds: float = 60.0,
        kind_first_seconds: float = FIRST_SECONDS,
    ) -> None:
        self._kube = kube
        self._window = window_seconds
        self._max_connectors = max_connectors
        self._max_running = max_running
        self._slot_poll = slot_poll_seconds
        self._open: dict[str, _Batch] = {}  # group -> the batch accepting members
        self._waiting: dict[str, _Batch] = {}  # owner uid -> its batch, until launched
        self._batches: dict[str, _Batch] = {}  # name -> every batch not yet forgotten
        #: launched batches not seen finished, and the one being created (its slot is taken first)
        self._running: dict[tuple[str, str], _Batch] = {}
        self._slots = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._sequence = 0
        #: figures for the benchmark and the log: launched, peak running
        self.launched = 0
        self.peak_running = 0
        #: asks for a pass of the object with this uid now (the operator's Runtime.later; unset: its next resync)
        self.wake: Callable[[str], None] | None = None
        #: the objects whose check was refused for the kind's absence, and the probe that finds it served
        self.kind = KindProbe(self._serves, self._wake, first_seconds=kind_first_seconds, cap_seconds=kind_cap_seconds)

    def request(
        self,
        uid: str,
        member: BatchMember,
        *,
        group: str,
        cluster: str,
        settings: SparkCheckDefaults,
        timeout_seconds: float,
    ) -> str:
        """Queue ``member`` (the check of object ``uid``) and return its batch's name: the
        SparkApplication it will run in."""
        self.kind.forget(uid)  # a new request: whatever it waited on, it asks now
        previous = self._waiting.pop(uid, None)
        if previous is not None:
            previous.members.pop(uid, None)
        batch = self._open.get(group)
        if batch is None or len(batch.members) >= self._max_connectors:
            batch = self._new_batch(member.target.namespace, group, cluster, settings)
        batch.members[uid] = member
        batch.timeout_seconds = max(batch.timeout_seconds, timeout_seconds)
        self._waiting[uid] = batch
        if len(batch.members) >= self._max_connectors:
            self._open.pop(group, None)  # full: later requests open the next batch
            batch.full.set()
        return batch.name

    def knows(self, name: str, uid: str) -> bool:
        """Whether this process holds ``uid``'s request in batch ``name`` (False after a restart,
        or when a newer request of the same object went to another batch)."""
        batch = self._batches.get(name)
        return batch is not None and (uid in batch.members or batch.launched_at is not None or bool(batch.refused))

    def outcome(self, name: str) -> Outcome | None:
        batch = self._batches.get(name)
        if batch is None:
            return None
        if batch.refused is not None:
            return Outcome(BatchState.REFUSED, tuple(batch.refused))
        return Outcome(BatchState.LAUNCHED) if batch.launched_at is not None else Outcome(BatchState.QUEUED)

    def withdraw(self, uid: str) -> None:
        """The object is gone: its waiting request leaves its batch (an empty batch is not launched)."""
        self.kind.forget(uid)
        batch = self._waiting.pop(uid, None)
        if batch is not None:
            batch.members.pop(uid, None)

    def finished(self, namespace: str, name: str) -> None:
        """The application ended (a reconciler read its terminal state): its slot is free."""
        self._running.pop((namespace, name), None)

    async def close(self) -> None:
        await self.kind.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _forget_old(self) -> None:
        now = time.monotonic()
        for name, batch in list(self._batches.items()):
            if batch.settled_at is not None and now - batch.settled_at > FORGET_SECONDS:
                del self._batches[name]

    def _new_batch(self, namespace: str, group: str, cluster: str, settings: SparkCheckDefaults) -> _Batch:
        self._forget_old()
        self._sequence += 1
        # unique per process start and sequence: a batch is never a second launch of another
        stamp = f"{int(time.time() * 1000) % 10**10:x}{self._sequence:x}"
        batch = _Batch(
            name=application_name(cluster, f"b{stamp}"),
            namespace=namespace,
            group=group,
            cluster=cluster,
            settings=settings,
        )
        self._open[group] = batch
        self._batches[batch.name] = batch
        task = asyncio.get_running_loop().create_task(self._launch_when_due(batch), name=f"check batch {batch.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return batch

    async def _launch_when_due(self, batch: _Batch) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(batch.full.wait(), timeout=self._window)
        key = (batch.namespace, batch.name)
        # One batch at a time looks for a slot and takes it before anything else is awaited:
        # checking and creating across an await would let every waiting batch see the same
        # free slot (CI's bench saw 7 in flight under a cap of 4). Batches queue here in order,
        # and keep accepting members while they wait: the wait makes them fuller, not later.
        async with self._slots:
            while not await self._slot_free():
                await asyncio.sleep(self._slot_poll)
            self._running[key] = batch
        if self._open.get(batch.group) is batch:
            del self._open[batch.group]
        members = list(batch.members.items())
        for uid, _ in members:
            if self._waiting.get(uid) is batch:
                del self._waiting[uid]
        if not members:
            self._running.pop(key, None)
            self._batches.pop(batch.name, None)
            return
        batch.settled_at = time.monotonic()
        manifest = batch_application([m for _, m in members], batch.settings, batch.name, batch.cluster)
        try:
            await self._kube.create_object(SPARK_GROUP, SPARK_VERSION, batch.namespace, SPARK_PLURAL, manifest)
        except KubeObjectMissing:
            self._running.pop(key, None)
            batch.refused = [NOT_SERVED]
            for uid, _ in members:
                self.kind.wait(uid)
            self._refused(members)
            return
        except KubeError as exc:
            self._running.pop(key, None)
            # a check must never block the change it follows (e.g. RBAC without sparkapplications)
            log.warning("check batch %s not submitted: %s", batch.name, exc)
            batch.refused = [f"could not create the SparkApplication: {exc}"]
            self._refused(members)
            return
        batch.launched_at = batch.settled_at
        self.launched += 1
        self.peak_running = max(self.peak_running, len(self._running))
        log.info("check batch %s launched: %d connector(s), %d running", batch.name, len(members), len(self._running))

    def _refused(self, members: list[tuple[str, BatchMember]]) -> None:
        """The members' next pass reads the refusal (CheckNotSubmitted): now, once each."""
        for uid, _ in members:
            self._wake(uid)

    def _wake(self, uid: str) -> None:
        if self.wake is not None:
            self.wake(uid)

    async def _serves(self, timeout: float) -> bool:
        return await self._kube.serves(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, timeout=timeout)

    async def _slot_free(self) -> bool:
        """Whether fewer than the cap of launched batches still run, as their applications say."""
        if len(self._running) < self._max_running:
            return True
        for key, batch in list(self._running.items()):
            if batch.launched_at is None:
                continue  # being created: its slot is taken, and the API may not show it yet
            namespace, name = key
            try:
                app = await self._kube.get_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name)
            except KubeObjectMissing:
                self._running.pop(key, None)
                continue
            except KubeError as exc:
                log.warning("check batch %s not readable now: %s", name, exc)
                continue  # counted as running: the cap errs on the side of fewer drivers
            state = ((app.get("status") or {}).get("applicationState") or {}).get("state")
            if state in TERMINAL_STATES:
                self._running.pop(key, None)
            elif time.monotonic() - batch.launched_at > batch.timeout_seconds:
                # every member has given up on it by now (TIMEOUT): a hung driver must not hold a slot
                try:
                    await self._kube.delete_object(SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name)
                except KubeError as exc:
                    log.warning("could not delete the timed-out check batch %s: %s", name, exc)
                    continue
                self._running.pop(key, None)
        return len(self._running) < self._max_running
