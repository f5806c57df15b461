"""Prometheus metrics (served by ``connectops run --metrics-port``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RECONCILES = Counter("connectops_reconciles_total", "Reconciles run", ["kind", "trigger"])
RECONCILE_ERRORS = Counter(
    "connectops_reconcile_errors_total", "Reconciles that ended in a retryable error", ["kind", "error"]
)
RECONCILE_SECONDS = Histogram("connectops_reconcile_seconds", "Reconcile duration", ["kind"])
RESETS = Counter(
    "connectops_offset_resets_total", "OffsetResets that reached a final phase", ["action", "strategy", "phase"]
)
RESET_STEP_SECONDS = Histogram(
    "connectops_offset_reset_step_seconds", "Duration of one reset step attempt that succeeded", ["step"]
)
CHECKS = Counter("connectops_checks_total", "Lag/balance checks that finished", ["state", "verdict"])
INTERRUPTION_SECONDS = Histogram(
    "connectops_connector_interruption_seconds",
    "How long a change kept a connector from processing: the call that stopped its tasks to the first task "
    "seen RUNNING again (ConfigUpdated, DriftCorrected, Restarted, OffsetReset)",
    ["cause"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
