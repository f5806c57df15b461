"""The verdict document's typed parts.

The verdict is built as these objects (``verdict``, ``producer_check``) and turned into JSON in
one place, ``serialize.to_json``: the ConfigMap the operator reads (``connectops.planning.checks``
parses it) has the shape these classes declare, field by field and in their order (so a field
with a default comes where its key comes: the classes are keyword-only).

Why ``Settings`` lives here: it is part of the document (its ``settings`` block) as well as the
verdict's input; ``verdict`` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from connectops_check import pressure
from connectops_check.results import MemberLoad, PartitionLag, PartitionStatus
from connectops_check.serialize import EMPTY_NONE, OMIT_NONE, Doc, key
from connectops_check.snapshot import ConnectorKind
from connectops_check.worker_metrics import TaskFigures
from connectops_rules import connect, thresholds

SCHEMA: Final = "connectops.check/v1"


class Severity(StrEnum):
    INFO = "INFO"
    DEGRADED = "DEGRADED"
    UNHEALTHY = "UNHEALTHY"


class Level(StrEnum):
    """The verdict: worst reason wins (``verdict``'s docstring), or what the connector is meant
    to be doing (PAUSED, STOPPED, CATCHING_UP), or NOT_APPLICABLE."""

    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"
    UNHEALTHY = "UNHEALTHY"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    CATCHING_UP = "CATCHING_UP"


DESIRED_STATES = frozenset({"running", "paused", "stopped"})


#: each threshold's field in Settings (the CR's and the JSON's name is the threshold's own)
_THRESHOLD_FIELDS: Final = (
    (thresholds.MAX_LAG, "max_lag"),
    (thresholds.MAX_SKEW, "max_skew"),
    (thresholds.MAX_GINI, "max_gini"),
    (thresholds.ASSIGNMENT_THRESHOLD, "assignment_threshold"),
    (thresholds.MIN_TRAFFIC, "min_traffic"),
    (thresholds.WINDOW, "window"),
    (thresholds.TOP_N, "top_n"),
    (thresholds.ALLOWED_LAG, "allowed_lag"),
    (thresholds.MINIMUM_COMPLETE, "minimum_complete"),
    (thresholds.MAX_LAG_WHILE_PAUSED, "max_lag_while_paused"),
    (thresholds.MAX_TIME_LAG_WHILE_PAUSED, "max_time_lag_while_paused_s"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(Doc):
    """Thresholds and evaluation knobs (their defaults and bounds: ``connectops_rules.thresholds``).

    ``min_traffic``: a topic's balance is judged only when it received at least this many
    records in the window, because a handful of records says nothing about skew.
    ``window``: Burrow's ring size (Burrow's ``intervals``, default 10); ``allowed_lag`` and
    ``minimum_complete``: Burrow's evaluator settings of the same names (defaults 0 and 0.0).
    ``top_n`` bounds per-partition lists.
    """

    max_lag: int = field(default=thresholds.MAX_LAG.default, metadata=key(thresholds.MAX_LAG.name))
    max_skew: float = field(default=thresholds.MAX_SKEW.default, metadata=key(thresholds.MAX_SKEW.name))
    max_gini: float = field(default=thresholds.MAX_GINI.default, metadata=key(thresholds.MAX_GINI.name))
    assignment_threshold: float = field(
        default=thresholds.ASSIGNMENT_THRESHOLD.default, metadata=key(thresholds.ASSIGNMENT_THRESHOLD.name)
    )
    min_traffic: int = field(default=thresholds.MIN_TRAFFIC.default, metadata=key(thresholds.MIN_TRAFFIC.name))
    window: int = field(default=thresholds.WINDOW.default, metadata=key(thresholds.WINDOW.name))
    top_n: int = field(default=thresholds.TOP_N.default, metadata=key(thresholds.TOP_N.name))
    allowed_lag: int = field(default=thresholds.ALLOWED_LAG.default, metadata=key(thresholds.ALLOWED_LAG.name))
    minimum_complete: float = field(
        default=thresholds.MINIMUM_COMPLETE.default, metadata=key(thresholds.MINIMUM_COMPLETE.name)
    )
    desired_state: str = "running"
    reset_in_progress: bool = False
    after_reset: str | None = None
    max_lag_while_paused: int | None = field(
        default=thresholds.MAX_LAG_WHILE_PAUSED.default, metadata=key(thresholds.MAX_LAG_WHILE_PAUSED.name)
    )
    max_time_lag_while_paused_s: float | None = field(
        default=thresholds.MAX_TIME_LAG_WHILE_PAUSED.default, metadata=key(thresholds.MAX_TIME_LAG_WHILE_PAUSED.name)
    )
    offset_flush_timeout_ms: int = connect.OFFSET_FLUSH_TIMEOUT_MS
    offset_flush_interval_ms: int = connect.OFFSET_FLUSH_INTERVAL_MS

    def __post_init__(self) -> None:
        for threshold, name in _THRESHOLD_FIELDS:
            problem = threshold.problem(getattr(self, name), name)
            if problem is not None:
                raise ValueError(problem)
        if self.desired_state not in DESIRED_STATES:
            raise ValueError(f"desired_state must be one of {sorted(DESIRED_STATES)}")

    @property
    def intent_not_running(self) -> Level | None:
        """``PAUSED`` / ``STOPPED`` when the connector is not meant to consume now, else None."""
        if self.reset_in_progress:
            return Level.STOPPED
        return None if self.desired_state == "running" else Level(self.desired_state.upper())


@dataclass(slots=True, kw_only=True)
class Reason(Doc):
    """Why the verdict is what it is: the operator acts on ``code``, a human reads ``message``.
    Mutable: a reason that does not count now is demoted to INFO with why (``verdict``)."""

    severity: Severity
    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Spread(Doc):
    """Total, mean and max over the members; max/mean None when the total is 0."""

    total: int
    mean: float
    max: int
    max_over_mean: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentBalance(Doc):
    """Partitions per member against Cruise Control's count-goal bounds (``verdict``)."""

    members: int
    assigned_partitions: int
    mean: float
    max: int
    min: int
    max_over_mean: float | None
    upper_limit: int
    lower_limit: int
    balanced: bool
    top_members: int
    top_members_share: float
    range_assignor_pattern: bool
    traffic: Spread
    lag: Spread
    per_member: list[MemberLoad]
    #: partitions nobody holds (None: not known); set by the verdict, not by the counts
    unassigned_partitions: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficEntry(Doc):
    """One topic's traffic (``"*"``: all of them) and whether its balance was judged."""

    topic: str
    partitions: int
    total: int
    mean: float
    max: int
    min: int
    max_over_mean: float | None
    cv: float | None
    gini: float | None
    evaluated: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic(Doc):
    window_start_ms: int | None
    overall: TrafficEntry | None
    topics: list[TrafficEntry]


@dataclass(frozen=True, slots=True, kw_only=True)
class Balance(Doc):
    traffic: Traffic
    assignment: AssignmentBalance | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicLagEntry(Doc):
    """One topic's lag, rates and ETA, and why there is no ETA when there is none."""

    topic: str
    partitions: int
    lag: int
    time_lag_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    eta_seconds: float | None
    eta_reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LagPoint(Doc):
    ts_ms: int
    total_lag: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Burrow(Doc):
    """The Burrow-style evaluation: the group's status and its partitions' statuses."""

    status: str
    worst_partition_status: PartitionStatus
    status_counts: dict[str, int]
    complete: float
    non_ok_partitions: list[PartitionLag]
    non_ok_truncated: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Lag(Doc):
    total: int
    max_partition: int
    time_lag_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    eta_seconds: float | None
    eta_reason: str | None
    topics: list[TopicLagEntry]
    series: list[LagPoint]
    basis_counts: dict[str, int]
    top_partitions: list[PartitionLag]
    burrow: Burrow


@dataclass(frozen=True, slots=True, kw_only=True)
class Headline(Doc):
    """The numbers the operator copies into ``status.lastCheck.headline``."""

    total_lag: int
    max_partition_lag: int
    burrow_status: str
    worst_partition_status: PartitionStatus
    partitions: int
    max_traffic_skew: float | None
    max_gini: float | None
    assignment_max_over_mean: float | None
    members: int | None
    time_lag_seconds: float | None
    consume_rate: float | None
    produce_rate: float | None
    eta_seconds: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEntry(Doc):
    task_id: int
    worker_id: str
    state: str
    trace: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Tasks(Doc):
    connector_state: str
    tasks: list[TaskEntry]


@dataclass(frozen=True, slots=True, kw_only=True)
class Collection(Doc):
    """How the snapshot was collected, and what went wrong doing it (``notes``)."""

    samples: int
    first_sample_ms: int | None
    last_sample_ms: int | None
    window_start_ms: int | None
    group_id: str | None
    notes: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class LostPartition(Doc):
    topic: str
    partition: int
    first_lost: int
    log_start: int
    lost: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Loss(Doc):
    """MirrorMaker 2's records deleted at the source before it replicated them."""

    total: int
    partitions: list[LostPartition]


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverPartition(Doc):
    topic: str
    partition: int
    target_offset: int | None
    target_position: int | None
    reread: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Failover(Doc):
    """What consumers failing over to the target now would read again (MM2 checkpoints)."""

    total: int
    unknown: int
    partitions: list[FailoverPartition]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrapeEntry(Doc):
    """One scrape of the workers' metrics: the "before" of the next check (``baseline_scrapes``)."""

    ts_ms: int
    tasks: list[TaskFigures]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecommendationEntry(Doc):
    batch_size: int
    linger_ms: int | None
    capped: bool
    records_per_batch: float
    reasoning: list[str]
    #: ``producer.override.*`` -> value
    properties: dict[str, str]
    #: a merge patch of the Connector
    patch: dict[str, Any]
    #: field names as they are (not a Doc)
    alternatives: list[pressure.Alternative]


@dataclass(frozen=True, slots=True, kw_only=True)
class DiagnosisEntry(Doc):
    code: str = "ProducerPressure"
    form: pressure.CommitForm
    message: str
    evidence: list[str]
    recommendation: RecommendationEntry | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FigureChangeEntry(Doc):
    figure: str
    before: float | None
    after: float | None
    verdict: pressure.Verdict


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectEntry(Doc):
    verdict: pressure.Verdict
    message: str
    changes: list[FigureChangeEntry]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerTask(Doc):
    task: int
    producer_metrics_served: bool
    #: field names as they are (not a Doc)
    figures: pressure.PressureFigures
    diagnosis: DiagnosisEntry | None = None
    effect: EffectEntry | None = None


@dataclass(slots=True, kw_only=True)
class Producer(Doc):
    """Producer pressure on a source connector's tasks (``producer_check``)."""

    worker_version: str | None
    offset_flush_timeout_ms: int
    offset_flush_interval_ms: int
    scrapes: int
    tasks: list[ProducerTask]
    samples: list[ScrapeEntry]
    #: field names as they are (not a Doc); absent when the overrides were not understood
    producer_settings: pressure.ProducerSettings | None = field(default=None, metadata=OMIT_NONE)
    #: the "before" passed on when some task's producer could not be read
    carried_baseline: list[ScrapeEntry] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(slots=True, kw_only=True)
class Verdict(Doc):
    """The verdict document (``schema`` connectops.check/v1)."""

    schema: str = SCHEMA
    connector: str
    kind: ConnectorKind
    connector_class: str
    verdict: Level
    reasons: list[Reason]
    #: ``{}`` when there was nothing to measure
    headline: Headline | None = field(metadata=EMPTY_NONE)
    lag: Lag | None
    balance: Balance | None
    tasks: Tasks
    collection: Collection
    settings: Settings
    producer: Producer | None
    loss: Loss | None
    failover: Failover | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedCheck(Doc):
    """A member of an ``--each`` run whose check failed: its verdict says why."""

    connector: str | None
    verdict: None = None
    error: str
