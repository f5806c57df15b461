"""The check's verdict and time lag in the per-object metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from connectops.object_metrics import ObjectMetrics


def exposition(metrics: ObjectMetrics) -> str:
    registry = CollectorRegistry()
    registry.register(metrics)
    return generate_latest(registry).decode()


def test_paused_verdict_and_time_lag_are_exported() -> None:
    metrics = ObjectMetrics()
    status = {
        "lastCheck": {
            "application": "sink-g1",
            "verdict": "PAUSED",
            "headline": {"totalLag": 140, "timeLagSeconds": 139.5},
        }
    }
    metrics.observe_connector("ns", "sink", {"state": "paused"}, status, uid="u-sink")
    text = exposition(metrics)
    assert 'connectops_connector_check_verdict{name="sink",namespace="ns",verdict="PAUSED"} 1.0' in text
    assert 'connectops_connector_lag_seconds{name="sink",namespace="ns"} 139.5' in text
    assert 'connectops_connector_lag_records{name="sink",namespace="ns"} 140.0' in text


def test_unknown_time_lag_and_verdict_leave_no_value() -> None:
    metrics = ObjectMetrics()
    status = {
        "lastCheck": {
            "application": "sink-g1",
            "verdict": "SOMETHING_NEW",
            "headline": {"totalLag": 3, "timeLagSeconds": True},
        }
    }
    metrics.observe_connector("ns", "sink", {}, status, uid="u-sink")
    text = exposition(metrics)
    assert "connectops_connector_lag_seconds{" not in text  # a bool is not a number of seconds
    assert 'verdict="NONE"} 1.0' in text


def test_the_last_change_cost_is_exported_only_when_measured() -> None:
    metrics = ObjectMetrics()
    measured = {"cause": "ConfigUpdated", "connector": "c", "outcome": "Measured", "stoppedAt": "2026-11-25T10:00:00Z"}
    metrics.observe_connector("ns", "c", {}, {"lastInterruption": {**measured, "seconds": 2.25}}, uid="u-c")
    metrics.observe_connector("ns", "d", {}, {"lastInterruption": {**measured, "outcome": "NoStopSeen"}}, uid="u-d")
    text = exposition(metrics)
    assert 'connectops_connector_last_interruption_seconds{name="c",namespace="ns"} 2.25' in text
    assert 'connectops_connector_last_interruption_seconds{name="d"' not in text
