"""Per-object gauges: what each Connector and OffsetReset looks like now, for dashboards and alerts.

Why a collector over a snapshot rather than gauges set in place: a gauge child per object must
disappear when the object does (or every deleted Connector's series lives until a restart), and
a state gauge must drop the old state's series when the state changes. Here each handler records
the object's latest status (:func:`observe`), deletion forgets it (:func:`forget`), and every
scrape renders exactly the objects known at that moment. A forgotten object's uid is remembered
(the last :data:`GONE_REMEMBERED`): a resync or timer already past its own check when the delete
handler ran observes the object once more as it finishes, and that would bring its series back for
good (CI49). A recreated object has a new uid, so it is observed again.

Labels are bounded: namespace and name (what the objects are), and fixed vocabularies (desired
state, Connect's states, task states, verdicts, phases, steps). No config value ever becomes a
label. The figures come from the status the operator itself publishes, so a metric never says
something ``kubectl describe`` does not.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from connectops.models.base import Condition
from connectops.models.connector import ConnectorStatus
from connectops.models.offset_reset import OffsetResetStatus

DESIRED_STATES = ("running", "paused", "stopped")
CONNECT_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING", "UNKNOWN")
VERDICTS = ("HEALTHY", "DEGRADED", "UNHEALTHY", "PAUSED", "STOPPED", "CATCHING_UP", "NOT_APPLICABLE", "NONE")
PHASES = ("Pending", "Planned", "Running", "Succeeded", "Failed")
#: uids of deleted objects kept to refuse late observations of them: a late observation comes
#: within one resync of the deletion, in which far fewer objects than this are deleted
GONE_REMEMBERED = 4096


@dataclass
class ConnectorView:
    desired: str = "running"
    actual: str = "UNKNOWN"
    ready: bool = False
    tasks_running: int = 0
    tasks_failed: int = 0
    tasks_total: int = 0
    auto_restarts: int = 0
    reconciled_at: float = 0.0
    drift_corrections: int = 0
    verdict: str = "NONE"
    total_lag: float | None = None
    time_lag_s: float | None = None
    interruption_s: float | None = None


@dataclass
class ResetView:
    phase: str = "Pending"
    step: str | None = None
    started_at: float | None = None
    finished_at: float | None = None


def _ready(conditions: list[Condition]) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _one_of(value: Any, allowed: tuple[str, ...], other: str) -> str:
    return value if isinstance(value, str) and value in allowed else other


@dataclass(eq=False)  # the registry keeps collectors in a set: identity hashing
class ObjectMetrics(Collector):
    """The latest view of every Connector and OffsetReset this process handles."""

    connectors: dict[tuple[str, str], ConnectorView] = field(default_factory=dict)
    resets: dict[tuple[str, str], ResetView] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _gone: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def observe_connector(
        self,
        namespace: str,
        name: str,
        spec: Mapping[str, Any],
        status: Mapping[str, Any],
        *,
        uid: str,
        drift: bool = False,
    ) -> None:
        published = ConnectorStatus.salvage(status)
        check = published.last_check
        headline = (check.headline if check is not None else None) or {}
        with self._lock:
            if uid in self._gone:
                return
            view = self.connectors.setdefault((namespace, name), ConnectorView())
            view.desired = _one_of(spec.get("state", "running"), DESIRED_STATES, "running")
            view.actual = _one_of(published.connector_state, CONNECT_STATES, "UNKNOWN")
            view.ready = _ready(published.conditions)
            view.tasks_total = len(published.tasks)
            view.tasks_running = sum(1 for t in published.tasks if t.state == "RUNNING")
            view.tasks_failed = sum(1 for t in published.tasks if t.state == "FAILED")
            view.auto_restarts = published.auto_restart.count
            view.reconciled_at = time.time()
            view.drift_corrections += 1 if drift else 0
            view.verdict = _one_of((check.verdict if check is not None else None) or "NONE", VERDICTS, "NONE")
            view.total_lag = _number(headline.get("totalLag"))
            view.time_lag_s = _number(headline.get("timeLagSeconds"))
            cost = published.last_interruption
            view.interruption_s = cost.seconds if cost is not None else None

    def observe_reset(self, namespace: str, name: str, status: Mapping[str, Any], *, uid: str) -> None:
        published = OffsetResetStatus.salvage(status)
        with self._lock:
            if uid in self._gone:
                return
            view = self.resets.setdefault((namespace, name), ResetView())
            view.phase = _one_of(published.phase or "Pending", PHASES, "Pending")
            view.step = published.current_step if view.phase == "Running" else None
            starts = [t for t in (_epoch(s.started_at) for s in published.steps) if t is not None]
            ends = [t for t in (_epoch(s.finished_at) for s in published.steps) if t is not None]
            view.started_at = min(starts) if starts else None
            view.finished_at = max(ends) if ends and view.phase in ("Succeeded", "Failed") else None

    def forget(self, kind: str, namespace: str, name: str, *, uid: str) -> None:
        with self._lock:
            (self.connectors if kind == "Connector" else self.resets).pop((namespace, name), None)
            self._gone[uid] = None
            self._gone.move_to_end(uid)
            while len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            connectors = dict(self.connectors)
            resets = dict(self.resets)
        labels = ["namespace", "name"]
        desired = GaugeMetricFamily(
            "connectops_connector_desired_state", "1 for the state the spec asks for", labels=[*labels, "state"]
        )
        actual = GaugeMetricFamily(
            "connectops_connector_state", "1 for the state Kafka Connect reports", labels=[*labels, "state"]
        )
        ready = GaugeMetricFamily("connectops_connector_ready", "1 when the Ready condition is True", labels=labels)
        tasks = GaugeMetricFamily("connectops_connector_tasks", "Tasks by state", labels=[*labels, "state"])
        restarts = GaugeMetricFamily(
            "connectops_connector_auto_restarts", "Automatic restarts since the last healthy period", labels=labels
        )
        reconciled = GaugeMetricFamily(
            "connectops_connector_last_reconcile_timestamp_seconds",
            "When the operator last finished a reconcile of the Connector",
            labels=labels,
        )
        drift = GaugeMetricFamily(
            "connectops_connector_drift_corrections",
            "Drift corrections applied by this operator process",
            labels=labels,
        )
        verdict = GaugeMetricFamily(
            "connectops_connector_check_verdict", "1 for the latest check's verdict", labels=[*labels, "verdict"]
        )
        lag = GaugeMetricFamily("connectops_connector_lag_records", "Total lag at the latest check", labels=labels)
        time_lag = GaugeMetricFamily(
            "connectops_connector_lag_seconds",
            "Age of the oldest unread record at the latest check (Kafka Lag Exporter's time lag)",
            labels=labels,
        )
        interruption = GaugeMetricFamily(
            "connectops_connector_last_interruption_seconds",
            "What the last change that restarted running tasks cost: stop to first task RUNNING",
            labels=labels,
        )
        for (ns, name), view in sorted(connectors.items()):
            for state in DESIRED_STATES:
                desired.add_metric([ns, name, state], 1.0 if view.desired == state else 0.0)
            for state in CONNECT_STATES:
                actual.add_metric([ns, name, state], 1.0 if view.actual == state else 0.0)
            ready.add_metric([ns, name], 1.0 if view.ready else 0.0)
            tasks.add_metric([ns, name, "running"], view.tasks_running)
            tasks.add_metric([ns, name, "failed"], view.tasks_failed)
            tasks.add_metric([ns, name, "other"], view.tasks_total - view.tasks_running - view.tasks_failed)
            restarts.add_metric([ns, name], view.auto_restarts)
            reconciled.add_metric([ns, name], view.reconciled_at)
            drift.add_metric([ns, name], view.drift_corrections)
            for v in VERDICTS:
                verdict.add_metric([ns, name, v], 1.0 if view.verdict == v else 0.0)
            if view.total_lag is not None:
                lag.add_metric([ns, name], view.total_lag)
            if view.time_lag_s is not None:
                time_lag.add_metric([ns, name], view.time_lag_s)
            if view.interruption_s is not None:
                interruption.add_metric([ns, name], view.interruption_s)
        phase = GaugeMetricFamily("connectops_offset_reset_phase", "1 for the reset's phase", labels=[*labels, "phase"])
        step = GaugeMetricFamily(
            "connectops_offset_reset_step", "1 for the step a running reset is in", labels=[*labels, "step"]
        )
        duration = GaugeMetricFamily(
            "connectops_offset_reset_duration_seconds",
            "Seconds since the reset's first step started (to its end, once finished)",
            labels=labels,
        )
        now = time.time()
        for (ns, name), reset in sorted(resets.items()):
            for p in PHASES:
                phase.add_metric([ns, name, p], 1.0 if reset.phase == p else 0.0)
            if reset.step is not None:
                step.add_metric([ns, name, reset.step], 1.0)
            if reset.started_at is not None:
                duration.add_metric([ns, name], (reset.finished_at or now) - reset.started_at)
        yield from (desired, actual, ready, tasks, restarts, reconciled, drift, verdict, lag, time_lag, interruption)
        yield from (phase, step, duration)


OBJECTS = ObjectMetrics()
REGISTRY.register(OBJECTS)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
