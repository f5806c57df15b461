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
