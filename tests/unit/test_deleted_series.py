"""A deleted object's per-object series go with it, whatever was still at work on it.

CI49 left a deleted Connector's series behind: its delete handler forgot the series, and the
periodic resync that held the object meanwhile observed it once more as it let go. The collector
refuses observations of a uid it was told is deleted. (The handlers pass the uids; the e2e test
tests/e2e/test_object_metrics.py reads the exposition after real deletions. connectops.handlers
is not imported here: its settings and timer intervals are fixed at import, and a unit test in the
same worker would fix them before the e2e operator's are set.)
"""

from __future__ import annotations

from connectops.object_metrics import GONE_REMEMBERED, ObjectMetrics

NS = "team-a"


def test_a_resync_that_observes_a_deleted_connector_brings_no_series_back() -> None:
    metrics = ObjectMetrics()
    metrics.observe_connector(NS, "orders", {"state": "running"}, {}, uid="u1")
    metrics.forget("Connector", NS, "orders", uid="u1")  # the delete handler
    metrics.observe_connector(NS, "orders", {"state": "running"}, {}, uid="u1")  # the resync, letting go
    assert (NS, "orders") not in metrics.connectors
    # made again under the same name: a new object, observed
    metrics.observe_connector(NS, "orders", {"state": "running"}, {}, uid="u2")
    assert (NS, "orders") in metrics.connectors


def test_a_check_timer_tick_after_a_reset_is_deleted_brings_no_series_back() -> None:
    metrics = ObjectMetrics()
    metrics.observe_reset(NS, "r", {"phase": "Succeeded"}, uid="u1")
    assert metrics.resets[(NS, "r")].phase == "Succeeded"
    metrics.forget("OffsetReset", NS, "r", uid="u1")
    metrics.observe_reset(NS, "r", {"phase": "Succeeded"}, uid="u1")  # the body it was handed before
    assert (NS, "r") not in metrics.resets


def test_the_deleted_uids_remembered_are_bounded() -> None:
    metrics = ObjectMetrics()
    for i in range(GONE_REMEMBERED + 1):
        metrics.forget("OffsetReset", NS, f"r{i}", uid=f"u{i}")
    metrics.observe_reset(NS, "r0", {"phase": "Running"}, uid="u0")  # the oldest, no longer remembered
    metrics.observe_reset(NS, "r1", {"phase": "Running"}, uid="u1")
    assert set(metrics.resets) == {(NS, "r0")}
