"""Leader-election settings that cannot fence are refused before anything starts."""

from __future__ import annotations

import pytest

from connectops import cli, fence
from connectops.adapters.leadership import LeaseSettings


def settings(**kw: float) -> LeaseSettings:
    return LeaseSettings(namespace="ops", name="l", identity="me", **kw)  # type: ignore[arg-type]


def test_defaults_fence() -> None:
    assert settings().problems() == []


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"duration_s": 10, "renew_deadline_s": 10}, "longer than the renew deadline"),
        ({"renew_deadline_s": 3, "retry_period_s": 3}, "1.2 x the retry period"),
        ({"retry_period_s": 0}, "at least 1 s"),
        ({"request_timeout_s": 10}, "request timeout must be shorter"),
    ],
)
def test_settings_that_cannot_fence(values: dict[str, float], problem: str) -> None:
    assert any(problem in p for p in settings(**values).problems())


def test_run_without_a_namespace_for_the_lease_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONNECTOPS_NAMESPACE", raising=False)
    monkeypatch.setattr(cli, "SA_NAMESPACE", cli.Path("/nonexistent/namespace"))
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "--namespace", "x"])
    assert "--lease-namespace" in str(exited.value)
    assert "--standalone" in str(exited.value)


def test_run_refuses_lease_timings_that_cannot_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECTOPS_NAMESPACE", "ops")
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "--lease-duration", "5", "--renew-deadline", "5"])
    assert "longer than the renew deadline" in str(exited.value)


def test_fence_is_a_no_op_until_installed_then_asks_every_time() -> None:
    asked: list[int] = []
    fence.check()  # nothing installed: standalone and in-process tests
    fence.install(lambda: asked.append(1))
    try:
        fence.check()
        fence.check()
    finally:
        fence._ensure = None
    assert asked == [1, 1]


def test_a_lease_call_that_times_out_is_a_failure_the_election_retries() -> None:
    """The library catches only ApiException: a timeout must become one, not end the renew loop."""
    import urllib3
    from kubernetes.client.exceptions import ApiException
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    from connectops.adapters.leadership import _TimedLeases

    seen: dict[str, object] = {}

    class Hung:
        def read_namespaced_lease(self, name: str, namespace: str, **kw: object) -> None:
            seen.update(kw)
            raise urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out")  # type: ignore[arg-type]

    lock = LeaseLock("l", "ops", "me")
    lock.api_instance = _TimedLeases(Hung(), 2.5)
    found, error = lock.get("l", "ops")
    assert found is False
    assert isinstance(error, ApiException)
    assert "ReadTimeoutError" in str(error.reason)
    assert seen == {"_request_timeout": 2.5}
