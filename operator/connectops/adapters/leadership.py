"""Leader election: exactly one operator process acts, the others stand by.

Why not kopf's peering: it needs cluster-scoped objects (``ClusterKopfPeering``) that a namespaced
install cannot create, and it does not fence: a paused peer may still finish what it started, and
two processes without peering objects both act. Two processes acting at once ran every reset twice,
and the second backup overwrote the first with post-reset offsets (issue 13, finding 2).

The election is the Kubernetes client's own (``kubernetes.leaderelection``: a ``Lease`` in the
operator's namespace, optimistic concurrency on its resourceVersion, client-go's rules for when a
lease has expired). Around it, what fencing needs and the library does not give:

- every Lease call has a deadline (the library passes none, and a hung call would keep a leader
  that cannot renew acting past its lease);
- a watchdog that ends the process once ``renew_deadline`` has passed since the last successful
  renewal, whatever the renew loop is doing. ``renew_deadline < lease_duration``, so the leader is
  gone before any standby may take the Lease. Ending the process is the fence: a reset is a
  durable step machine that the next leader resumes from its status, so a hard stop loses nothing,
  while a graceful stop could still be writing after the Lease expired;
- a release on a clean shutdown, so a successor starts at once instead of after the lease expires;
- a health endpoint while standing by, so the kubelet does not restart a healthy standby, and
  a readiness on it that means "this standby can take over": the API server answered its last
  Lease poll within the lease duration (a rolling update waits for that before it stops the
  leader);
- a stop flag for the standby's wait, so SIGTERM ends a standby at once (the CLI's handler sets
  it: Python as a container's PID 1 would otherwise ignore SIGTERM until the kubelet's SIGKILL).
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger("connectops.leadership")

# The library logs every standby poll at INFO ("yet to finish lease_duration ..."); transitions
# are logged here instead.
logging.getLogger("leaderelection").setLevel(logging.WARNING)


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str
    identity: str
    duration_s: int = 15
    renew_deadline_s: int = 10
    retry_period_s: int = 2
    request_timeout_s: float = 5.0

    def problems(self) -> list[str]:
        """Why these settings cannot fence (the library would ``sys.exit`` on some of them)."""
        out = []
        if min(self.duration_s, self.renew_deadline_s, self.retry_period_s) < 1:
            out.append("lease duration, renew deadline and retry period must each be at least 1 s")
        if self.duration_s <= self.renew_deadline_s:
            out.append("the lease duration must be longer than the renew deadline")
        if self.renew_deadline_s <= 1.2 * self.retry_period_s:
            out.append("the renew deadline must be longer than 1.2 x the retry period")
        if self.request_timeout_s >= self.renew_deadline_s:
            out.append("the request timeout must be shorter than the renew deadline")
        return out


class _TimedLeases:
    """The three Lease calls the library makes, each with a deadline, and a network failure turned
    into the ApiException the library handles: it only catches that, so a timeout would otherwise
    end the renew loop at once instead of being retried until the renew deadline."""

    def __init__(self, api: Any, timeout_s: float) -> None:
        self._api = api
        self._timeout = timeout_s
        #: monotonic time of the API server's last answer (a 404 or a 409 is an answer too)
        self.answered_at: float | None = None

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            answer = fn(*args, _request_timeout=self._timeout, **kwargs)
        except ApiException:
            self.answered_at = time.monotonic()
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiException(
                status=0, reason=f"{type(exc).__name__} (no answer within {self._timeout:g} s)"
            ) from None
        self.answered_at = time.monotonic()
        return answer

    def read_namespaced_lease(self, name: str, namespace: str) -> Any:
        return self._call(self._api.read_namespaced_lease, name, namespace)

    def create_namespaced_lease(self, namespace: str, body: Any) -> Any:
        return self._call(self._api.create_namespaced_lease, namespace, body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any) -> Any:
        return self._call(self._api.replace_namespaced_lease, name=name, namespace=namespace, body=body)


class _FencedLock(LeaseLock):
    """A LeaseLock that records when this process last held the Lease, and writes nothing after
    :meth:`release` (so a renewal in flight cannot take back a released Lease)."""

    def __init__(self, settings: LeaseSettings, api: client.CoordinationV1Api) -> None:
        super().__init__(settings.name, settings.namespace, settings.identity)  # type: ignore[no-untyped-call]
        self.timed = _TimedLeases(api, settings.request_timeout_s)
        self.api_instance = self.timed  # type: ignore[assignment]
        self.held_at: float | None = None
        self.released = threading.Event()

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        if self.released.is_set():
            return False
        ok = bool(super().create(name, namespace, election_record))  # type: ignore[no-untyped-call]
        if ok:
            self.held_at = time.monotonic()
        return ok

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        if self.released.is_set():
            return False
        ok = bool(super().update(name, namespace, updated_record))  # type: ignore[no-untyped-call]
        if ok and updated_record.holder_identity == self.identity:
            self.held_at = time.monotonic()
        return ok


def _exit_handed_over() -> None:
    log.info("stopping: the Lease was handed over, so this process writes nothing more")
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(0)


def _exit_now(reason: str) -> None:
    log.critical("leadership lost (%s): exiting so that no other process acts alongside this one", reason)
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(70)


class Leadership:
    """One candidate: :meth:`acquire` blocks until this process leads, :meth:`keep` renews in the
    background and ends the process when it can no longer prove it leads, :meth:`release` hands
    the Lease over on a clean shutdown."""

    def __init__(
        self,
        settings: LeaseSettings,
        api_client: client.ApiClient | None = None,
        on_lost: Callable[[str], None] = _exit_now,
        on_handed_over: Callable[[], None] = _exit_handed_over,
    ) -> None:
        problems = settings.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.settings = settings
        self._api = client.CoordinationV1Api(api_client or client.ApiClient())
        self._lock = _FencedLock(settings, self._api)
        self._on_lost = on_lost
        self._on_handed_over = on_handed_over
        self._elector = leaderelection.LeaderElection(  # type: ignore[no-untyped-call]
            electionconfig.Config(  # type: ignore[no-untyped-call]
                self._lock,
                settings.duration_s,
                settings.renew_deadline_s,
                settings.retry_period_s,
                onstarted_leading=lambda: None,  # not used: acquire/keep drive the election
                onstopped_leading=None,
            )
        )

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Stand by until this process holds the Lease (True), or until ``stop`` is set (False)."""
        s = self.settings
        seen: str | None = None
        log.info("leader election: Lease %s/%s, identity %s", s.namespace, s.name, s.identity)
        while stop is None or not stop.is_set():
            try:
                won = bool(self._elector.try_acquire_or_renew())  # type: ignore[no-untyped-call]
            except Exception as exc:  # any failure is "not now": the loop retries
                log.warning("leader election: %s", type(exc).__name__)
                won = False
            if won:
                log.info("leading: this process (%s) holds Lease %s/%s", s.identity, s.namespace, s.name)
                return True
            observed = self._elector.observed_record
            holder = getattr(observed, "holder_identity", None)
            if holder != seen:
                seen = holder
                log.info("standing by: Lease %s/%s is held by %s", s.namespace, s.name, holder)
            if stop is None:
                time.sleep(s.retry_period_s)
            else:
                stop.wait(s.retry_period_s)
        log.info("stopped while standing by: Lease %s/%s left to its holder", s.namespace, s.name)
        return False

    def can_take_over(self) -> bool:
        """A standby's readiness: the API server answered its last Lease poll within the lease
        duration, so it would see the Lease free and take it."""
        answered = self._lock.timed.answered_at
        return answered is not None and time.monotonic() - answered <= self.settings.duration_s

    def keep(self) -> None:
        """Renew in the background; the watchdog ends the process when renewal stops working."""
        threading.Thread(target=self._renew, name="lease-renew", daemon=True).start()
        threading.Thread(target=self._watch, name="lease-watchdog", daemon=True).start()

    def _renew(self) -> None:
        try:
            self._elector.renew_loop()  # type: ignore[no-untyped-call]
        except Exception as exc:  # the watchdog decides; this only reports
            log.warning("lease renewal failed: %s", type(exc).__name__)
        if not self._lock.released.is_set():
            self._on_lost("the Lease could not be renewed")

    def _watch(self) -> None:
        while not self._lock.released.is_set():
            reason = self._stale()
            if reason is not None and not self._lock.released.is_set():
                self._on_lost(reason)
                return
            time.sleep(0.25)

    def ensure(self) -> None:
        """Return when this process still leads (renewed within the renew deadline); otherwise
        end it (``on_lost``). Called before every write (:mod:`connectops.fence`). After a
        :meth:`release` (a clean shutdown) the process ends quietly instead (``on_handed_over``):
        the successor may already act."""
        if self._lock.released.is_set():
            self._on_handed_over()
            return
        reason = self._stale()
        if reason is not None:
            self._on_lost(reason)

    def _stale(self) -> str | None:
        if self._lock.released.is_set():
            return "the Lease was released"
        deadline = self.settings.renew_deadline_s
        held_at = self._lock.held_at
        if held_at is None or time.monotonic() - held_at > deadline:
            return f"not renewed for {deadline} s"
        return None

    def release(self) -> None:
        """Give the Lease up (clean shutdown only): a standby takes over at its next poll. Once
        called, every later write ends the process (:meth:`ensure`); calling it again does nothing."""
        if self._lock.released.is_set():
            return
        self._lock.released.set()
        s = self.settings
        try:
            lease = self._api.read_namespaced_lease(s.name, s.namespace, _request_timeout=s.request_timeout_s)
            if lease.spec is None or lease.spec.holder_identity != s.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            self._api.replace_namespaced_lease(s.name, s.namespace, lease, _request_timeout=s.request_timeout_s)
            log.info("released Lease %s/%s", s.namespace, s.name)
        except (ApiException, OSError) as exc:
            log.warning("could not release Lease %s/%s (%s); it expires by itself", s.namespace, s.name, exc)


class _StandbyHealth(http.server.BaseHTTPRequestHandler):
    """``GET <path>``: alive (200). ``GET <path>?ready``: 200 while the standby could take over,
    else 503. The same path serves kopf's health once this process leads; kopf ignores the query,
    so one path holds liveness and readiness on the leader and on a standby alike."""

    ready: Callable[[], bool] = staticmethod(lambda: True)

    def do_GET(self) -> None:
        asks_ready = "ready" in parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        ok = not asks_ready or type(self).ready()
        body = b'{"standby": true, "ready": %s}' % (b"true" if ok else b"false")
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def standby_health(url: str, ready: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """Answer the liveness URL while standing by (kopf serves it only once it runs): a standby is
    healthy, and a probe failing on it would have the kubelet restart it in a loop. With
    ``?ready`` it answers ``ready()`` (:meth:`Leadership.can_take_over`)."""
    if not url:
        yield
        return
    parts = urlsplit(url)
    handler = type("StandbyHealth", (_StandbyHealth,), {"ready": staticmethod(ready)})
    server = http.server.ThreadingHTTPServer((parts.hostname or "0.0.0.0", parts.port or 80), handler)
    thread = threading.Thread(target=server.serve_forever, name="standby-health", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
