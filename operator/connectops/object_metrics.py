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

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from connectops.models.base import Condition
from connectops.models.connector import ConnectorStatus
from connectops.models.offset_reset import OffsetResetStatus, ResetPhase

DESIRED_STATES = ("running", "paused", "stopped")
CONNECT_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING", "UNKNOWN")
VERDICTS = ("HEALTHY", "DEGRADED", "UNHEALTHY", "PAUSED", "STOPPED", "CATCHING_UP", "NOT_APPLICABLE", "NONE")
PHASES = tuple(str(phase) for phase in ResetPhase)
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
    mirror_records_lost: float | None = None


@dataclass
class ResetView:
    phase: str = str(ResetPhase.PENDING)
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
            loss = published.mirror_loss
            view.mirror_records_lost = None if loss is None else float(loss.records_lost)

    def observe_reset(self, namespace: str, name: str, status: Mapping[str, Any], *, uid: str) -> None:
        published = OffsetResetStatus.salvage(status)
        with self._lock:
            if uid in self._gone:
                return
            view = self.resets.setdefault((namespace, name), ResetView())
            view.phase = _one_of(str(published.phase or ResetPhase.PENDING), PHASES, str(ResetPhase.PENDING))
            view.step = published.current_step if view.phase == ResetPhase.RUNNING else None
            starts = [t for t in (_epoch(s.started_at) for s in published.steps) if t is not None]
            ends = [t for t in (_epoch(s.finished_at) for s in published.steps) if t is not None]
            view.started_at = min(starts) if starts else None
            view.finished_at = max(ends) if ends and view.phase in (ResetPhase.SUCCEEDED, ResetPhase.FAILED) else None

    def forget(self, kind: str, namespace: str, name: str, *, uid: str) -> None:
        with self._lock:
            (self.connectors if kind == "Connector" else self.resets).pop((namespace, name), None)
            self._gone[uid] = None
            self._gone.move_to_end(uid)
            while len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)

    def _snapshot(self) -> tuple[list[tuple[tuple[str, str], ConnectorView]], list[tuple[tuple[str, str], ResetView]]]:
        with self._lock:
            connectors = list(self.connectors.items())
            resets = list(self.resets.items())
        return sorted(connectors, key=lambda item: item[0]), sorted(resets, key=lambda item: item[0])

    def _families(self) -> Iterator[tuple[Family, Iterator[tuple[tuple[str, str], Series]]]]:
        """Each family and, per object in (namespace, name) order, its series. Lazy: an object's
        series are made only as they are read, and a family's only once the one before is read."""
        connectors, resets = self._snapshot()
        for family, series in CONNECTOR_FAMILIES:
            yield family, _rows(connectors, series)
        now = time.time()
        for family, reset_series in RESET_FAMILIES:
            yield family, _rows(resets, functools.partial(_at, reset_series, now=now))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges as prometheus_client's Collector (what ``render`` writes, made of its objects)."""
        for family, objects in self._families():
            gauge = GaugeMetricFamily(
                family.name, family.help, labels=["namespace", "name", *([family.label] if family.label else [])]
            )
            for (ns, name), series in objects:
                for label, value in series:
                    gauge.add_metric([ns, name] if family.label is None else [ns, name, label or ""], value)
            yield gauge

    def render(self, names: Set[str] | None = None, *, chunk: int = 1000) -> Iterator[bytes]:
        """The gauges in Prometheus' text format (0.0.4), written as prometheus_client writes
        them (``tests/unit/test_metrics_server.py`` compares the two), ``chunk`` objects at a
        time: at 10,000 Connectors prometheus_client's own rendering built every series' sample
        and line at once: 92 MiB of RSS added per scrape (benchmarks/scrape_bench.py).
        ``names``: only these families, and only if they have a series (prometheus_client's
        ``name[]`` filter)."""
        for family, objects in self._families():
            if names is not None and family.name not in names:
                continue
            header = f"# HELP {family.name} {_escape_help(family.help)}\n# TYPE {family.name} gauge\n"
            written = names is None  # the header: always, or (filtered) before its first series
            lines = [header] if written else []
            for done, ((ns, name), series) in enumerate(objects, start=1):
                labels = f'name="{_escape(name)}",namespace="{_escape(ns)}"'
                for label, value in series:
                    if not written:
                        lines.append(header)
                        written = True
                    own = f',{family.label}="{_escape(label)}"' if family.label and label is not None else ""
                    lines.append(f"{family.name}{{{labels}{own}}} {_number_text(value)}\n")
                if done % chunk == 0 and lines:
                    yield "".join(lines).encode()
                    lines = []
            if lines:
                yield "".join(lines).encode()


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    #: the family's own label (a state, a verdict, ...) besides namespace and name
    label: str | None = None


#: one object's series of a family: (the value of the family's own label or None, value)
Series = Iterable[tuple[str | None, float]]
_V = TypeVar("_V")


def _rows(
    objects: list[tuple[tuple[str, str], _V]], series: Callable[[_V], Series]
) -> Iterator[tuple[tuple[str, str], Series]]:
    for key, view in objects:
        yield key, series(view)


def _at(series: Callable[[ResetView, float], Series], view: ResetView, *, now: float) -> Series:
    return series(view, now)


def _one_hot(chosen: str, vocabulary: tuple[str, ...]) -> list[tuple[str | None, float]]:
    return [(v, 1.0 if chosen == v else 0.0) for v in vocabulary]


def _maybe(value: float | None) -> list[tuple[str | None, float]]:
    return [] if value is None else [(None, value)]


#: the Connector gauges, in the order they are written: each family's name, help, own label, and
#: its series for one Connector
CONNECTOR_FAMILIES: tuple[tuple[Family, Callable[[ConnectorView], Series]], ...] = (
    (
        Family("connectops_connector_desired_state", "1 for the state the spec asks for", "state"),
        lambda v: _one_hot(v.desired, DESIRED_STATES),
    ),
    (
        Family("connectops_connector_state", "1 for the state Kafka Connect reports", "state"),
        lambda v: _one_hot(v.actual, CONNECT_STATES),
    ),
    (
        Family("connectops_connector_ready", "1 when the Ready condition is True"),
        lambda v: [(None, 1.0 if v.ready else 0.0)],
    ),
    (
        Family("connectops_connector_tasks", "Tasks by state", "state"),
        lambda v: [
            ("running", v.tasks_running),
            ("failed", v.tasks_failed),
            ("other", v.tasks_total - v.tasks_running - v.tasks_failed),
        ],
    ),
    (
        Family("connectops_connector_auto_restarts", "Automatic restarts since the last healthy period"),
        lambda v: [(None, v.auto_restarts)],
    ),
    (
        Family(
            "connectops_connector_last_reconcile_timestamp_seconds",
            "When the operator last finished a reconcile of the Connector",
        ),
        lambda v: [(None, v.reconciled_at)],
    ),
    (
        Family("connectops_connector_drift_corrections", "Drift corrections applied by this operator process"),
        lambda v: [(None, v.drift_corrections)],
    ),
    (
        Family("connectops_connector_check_verdict", "1 for the latest check's verdict", "verdict"),
        lambda v: _one_hot(v.verdict, VERDICTS),
    ),
    (Family("connectops_connector_lag_records", "Total lag at the latest check"), lambda v: _maybe(v.total_lag)),
    (
        Family(
            "connectops_connector_lag_seconds",
            "Age of the oldest unread record at the latest check (Kafka Lag Exporter's time lag)",
        ),
        lambda v: _maybe(v.time_lag_s),
    ),
    (
        Family(
            "connectops_connector_last_interruption_seconds",
            "What the last change that restarted running tasks cost: stop to first task RUNNING",
        ),
        lambda v: _maybe(v.interruption_s),
    ),
    (
        Family(
            "connectops_connector_mirror_records_lost",
            "MirrorMaker 2 source connectors: records the source lost before they were replicated "
            "(truncation, topic re-creation), found and not acknowledged",
        ),
        lambda v: _maybe(v.mirror_records_lost),
    ),
)
#: the OffsetReset gauges (their series also take the time of the scrape)
RESET_FAMILIES: tuple[tuple[Family, Callable[[ResetView, float], Series]], ...] = (
    (
        Family("connectops_offset_reset_phase", "1 for the reset's phase", "phase"),
        lambda r, _: _one_hot(r.phase, PHASES),
    ),
    (
        Family("connectops_offset_reset_step", "1 for the step a running reset is in", "step"),
        lambda r, _: [] if r.step is None else [(r.step, 1.0)],
    ),
    (
        Family(
            "connectops_offset_reset_duration_seconds",
            "Seconds since the reset's first step started (to its end, once finished)",
        ),
        lambda r, now: [] if r.started_at is None else [(None, (r.finished_at or now) - r.started_at)],
    ),
)


def _escape(value: str) -> str:
    # the text format's label-value escaping (what prometheus_client does)
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number_text(value: float) -> str:
    # prometheus_client's formatting of a value (Go's float formatting), untyped there
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


#: not in prometheus_client's registry: connectops.metrics_server writes it after the registry's
#: metrics, streamed (see ObjectMetrics.render)
OBJECTS = ObjectMetrics()


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
