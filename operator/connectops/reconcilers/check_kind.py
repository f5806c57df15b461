"""Noticing that the SparkApplication kind is served after checks were refused for its absence.

A check refused because the cluster does not serve SparkApplications (no spark-operator, or not
yet) is said once, as conditions; nothing asks again while nothing changes, so once the
spark-operator is installed its Connectors would stay at CheckNotSubmitted until their spec
changed. This probe is what changes that: while at least one object's check waits on the kind,
one discovery read per operator process (``GET /apis/sparkoperator.k8s.io/v1beta2``) asks whether
it is served, on a backoff (first after ``first_seconds``, then doubling up to ``cap_seconds``);
once it is, every waiting object is woken (``wake``) and its next pass asks its check again, once,
through the batcher like any request. While nothing waits, nothing is read.

Why discovery and not a watch on CustomResourceDefinitions: every identity may read discovery
(the ``system:discovery`` ClusterRole of ``system:authenticated``), so it needs no RBAC of its own;
its answer is a few hundred bytes, read only while something waits, where a CRD watch streams
every CRD of the cluster for the process's lifetime (the SparkApplication CRD alone is ~800 kB);
and it says what creating a SparkApplication needs, the version served, where a CRD object can
exist before it is Established or serve another version.

Memory: the uids of the objects waiting (or woken and not yet asked again), each forgotten when
its object asks a new check or is deleted; bounded by the objects there are. It is lost with the
process: the next one finds ``lastCheck`` NOT_SUBMITTED for this reason in the status at its
start-up pass and waits again (:meth:`KindProbe.wait`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from connectops.adapters.kube import KubeError

log = logging.getLogger(__name__)

#: the first look after a check is refused (then 2x, 4x ... up to the cap: the resync period)
FIRST_SECONDS = 5.0
#: the deadline of one discovery read
TIMEOUT_SECONDS = 10.0


class KindProbe:
    def __init__(
        self,
        look: Callable[[float], Awaitable[bool]],
        wake: Callable[[str], None],
        *,
        first_seconds: float = FIRST_SECONDS,
        cap_seconds: float,
        timeout_seconds: float = TIMEOUT_SECONDS,
    ) -> None:
        """``look(timeout)``: whether the kind is served now (raises KubeError when unknowable);
        ``wake(uid)``: called for each waiting object once it is (the operator: a pass of it now)."""
        self._look = look
        self._wake = wake
        self._first = max(first_seconds, 0.001)
        self._cap = max(cap_seconds, self._first)
        self._timeout = timeout_seconds
        self._delay = self._first
        #: objects whose check was refused for the kind's absence
        self._waiting: set[str] = set()
        #: objects woken since the kind was seen served, until their next pass asks again
        self._ready: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        #: when the kind was last seen served (monotonic): a refusal soon after does not reset the backoff
        self._served_at: float | None = None
        self._failing = False
        #: set when the backoff starts again: the probe's current wait ends, the first delay begins
        self._restart = asyncio.Event()

    @property
    def probing(self) -> bool:
        return self._task is not None and not self._task.done()

    def wait(self, uid: str) -> None:
        """``uid``'s check was refused because the kind is not served (now, or as its status says
        after a restart): probe until it is. A newly waiting object starts the backoff again,
        unless the kind was seen served within the last cap: then served and refused disagree
        (the kind is being installed or removed), and the backoff goes on doubling instead of
        asking every object again at the first delay."""
        if uid in self._ready or uid in self._waiting:
            return
        self._waiting.add(uid)
        recently = self._served_at is not None and time.monotonic() - self._served_at < self._cap
        if not recently and self._delay > self._first:
            self._delay = self._first
            self._restart.set()
        if not self.probing:
            self._task = asyncio.get_running_loop().create_task(self._probe(), name="SparkApplication kind probe")

    def take(self, uid: str) -> bool:
        """Whether ``uid`` was woken because the kind is served now (once: its pass asks again)."""
        if uid in self._ready:
            self._ready.discard(uid)
            return True
        return False

    def forget(self, uid: str) -> None:
        """``uid`` asked a new check, or is deleted: it no longer waits."""
        self._waiting.discard(uid)
        self._ready.discard(uid)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _probe(self) -> None:
        while self._waiting:
            self._restart.clear()
            try:
                await asyncio.wait_for(self._restart.wait(), timeout=self._delay)
            except TimeoutError:
                pass
            else:
                continue  # a new refusal: wait the first delay from now instead
            self._delay = min(self._delay * 2, self._cap)
            if not self._waiting:
                return  # every waiting object was deleted or changed meanwhile
            if await self._served():
                woken, self._waiting = self._waiting, set()
                self._ready |= woken
                self._served_at = time.monotonic()
                log.info(
                    "SparkApplication is served now: asking the %d check(s) refused for its absence again", len(woken)
                )
                for uid in woken:
                    self._wake(uid)

    async def _served(self) -> bool:
        try:
            # the read's own deadline is the client's; this one holds should the thread hang
            served = await asyncio.wait_for(self._look(self._timeout), timeout=self._timeout + 5.0)
        except (KubeError, TimeoutError) as exc:
            # once per run of failures: a probe every cap seconds must not fill the log
            if not self._failing:
                log.warning(
                    "cannot tell whether SparkApplication is served (asking again in %gs): %s", self._delay, exc
                )
            self._failing = True
            return False
        if self._failing:
            log.info("discovery answers again")
        self._failing = False
        return served
