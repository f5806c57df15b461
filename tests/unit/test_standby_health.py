"""A standby's probes: alive always; ready only while the API server answers its Lease polls.

The chart's readiness probe asks ``/healthz?ready`` (a rolling update stops the old leader only
once its successor is ready); the end-to-end rollout is tests/e2e/test_rollout.py. Here the
endpoint is served for real on a free port and the readiness is driven by what the Lease calls
got back: an answer (even a 404 or a 409) or none at all.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import urllib3
from kubernetes.client.exceptions import ApiException

from connectops.adapters.leadership import Leadership, LeaseSettings, standby_health
from tests.env.servers import free_port


class _Api:
    """CoordinationV1Api's Lease calls: ``mode`` says what the next call gets."""

    def __init__(self) -> None:
        self.mode = "404"

    def read_namespaced_lease(self, name: str, namespace: str, **_: Any) -> Any:
        if self.mode == "down":
            raise urllib3.exceptions.NewConnectionError(None, "connection refused")  # type: ignore[arg-type]
        raise ApiException(status=404, reason="Not Found")

    def create_namespaced_lease(self, namespace: str, body: Any, **_: Any) -> Any:
        raise ApiException(status=409, reason="Conflict")  # another candidate created it first

    def replace_namespaced_lease(self, **_: Any) -> Any:
        raise ApiException(status=409, reason="Conflict")


def _leadership(api: _Api) -> Leadership:
    settings = LeaseSettings(
        "ops", "l", "me", duration_s=3, renew_deadline_s=2, retry_period_s=1, request_timeout_s=0.5
    )
    leadership = Leadership(settings)
    leadership._lock.timed._api = api  # the Lease calls only; nothing else is asked
    return leadership


def test_ready_follows_the_api_servers_answers_and_liveness_does_not() -> None:
    api = _Api()
    leadership = _leadership(api)
    url = f"http://127.0.0.1:{free_port()}/healthz"
    stop = threading.Event()
    with standby_health(url, ready=leadership.can_take_over):
        assert httpx.get(url + "?ready").status_code == 503  # no poll answered yet
        poll = threading.Thread(target=leadership.acquire, args=(stop,), daemon=True)
        poll.start()
        try:
            # answered (a 404 and a 409 are answers): it would see the Lease free and take it
            deadline = 50
            while httpx.get(url + "?ready").status_code != 200 and deadline:
                stop.wait(0.1)
                deadline -= 1
            assert httpx.get(url + "?ready").json() == {"standby": True, "ready": True}
            # the API server stops answering: not ready once a lease duration has passed
            api.mode = "down"
            stop.wait(leadership.settings.duration_s + 1.5)
            assert httpx.get(url + "?ready").status_code == 503
            # liveness is another matter: a standby that cannot reach the API server is not stuck
            assert httpx.get(url).status_code == 200
        finally:
            stop.set()
            poll.join(5)
    assert not poll.is_alive()  # the stop flag ends the standby's wait (SIGTERM sets it)
