"""What a metric engine hands back: small, driver-side numbers, the same for Spark and pandas.

Why a shared result type: the verdict is built from these numbers only, so the Spark job and
the pandas reference can be compared field by field, and thresholds are applied in one place
(``verdict``) instead of twice.

Per-partition detail is bounded (top N by lag, top N non-OK partitions): a verdict travels in
a ConfigMap (1 MiB) and must stay small at 100k partitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from connectops_check.serialize import Doc, key


class PartitionStatus(StrEnum):
    """Burrow's partition statuses, in Burrow's order of severity (``protocol.StatusConstant``)."""

    OK = "OK"
    WARN = "WARN"
    STOP = "STOP"
    STALL = "STALL"
    REWIND = "REWIND"


#: Severity as Burrow numbers its constants (OK=1, WARN=2, ERR=3, STOP=4, STALL=5, REWIND=6);
#: "worst partition" means highest number.
SEVERITY: dict[str, int] = {"OK": 1, "WARN": 2, "STOP": 4, "STALL": 5, "REWIND": 6}


def rollup(worst: PartitionStatus) -> str:
    """Group status from its worst partition, as Burrow does: anything above WARN is ERR."""
    if worst is PartitionStatus.OK:
        return "OK"
    if worst is PartitionStatus.WARN:
        return "WARN"
    return "ERR"


class LagBasis(StrEnum):
    """What the lag of a partition was measured against.

    ``committed``: the connector's own offset (a sink's committed offset, MM2's stored
    offset + 1). Without one, the connector will start from ``earliest`` (Connect's sink
    default, and MM2's behaviour), so the log-start offset is the honest basis; the traffic
    window's start offset and finally offset 0 are fallbacks when log-start was not collected.
    """

    COMMITTED = "committed"
    EARLIEST = "earliest"
    WINDOW_START = "window_start"
    OFFSET_ZERO = "offset_zero"


@dataclass(frozen=True, slots=True)
class PartitionLag(Doc):
    """One partition. Rates are records per second over the samples; ``time_lag_s`` is Kafka
    Lag Exporter's time lag; ``eta_s`` is None when the consumer is not gaining on the producer
    (or a rate is unknown), 0 without lag. A part of the verdict document as it is."""

    topic: str
    partition: int
    lag: int
    basis: str
    status: str
    complete: float
    time_lag_s: float | None = field(default=None, metadata=key("timeLagSeconds"))
    consume_rate: float | None = None
    produce_rate: float | None = None
    eta_s: float | None = field(default=None, metadata=key("etaSeconds"))


@dataclass(frozen=True, slots=True)
class TopicLag:
    """Lag, rates and ETA of one topic, or of the whole connector (``topic == "*"``).

    Lags and rates are sums over the partitions; a rate is None when some partition's is
    unknown, because a partial sum would make the ETA look better than it is. ``time_lag_s``
    is the largest partition time lag (the oldest unread record)."""

    topic: str
    partitions: int
    lag: int
    time_lag_s: float | None
    consume_rate: float | None
    produce_rate: float | None
    eta_s: float | None


@dataclass(frozen=True, slots=True)
class TrafficStats:
    """Records appended per partition during the traffic window, summarised for one topic.

    ``topic`` is ``"*"`` for all partitions of all topics together. Ratios are ``None`` when
    the topic had no traffic at all (nothing to be unbalanced about).
    """

    topic: str
    partitions: int
    total: int
    mean: float
    max: int
    min: int
    max_over_mean: float | None
    cv: float | None
    gini: float | None


@dataclass(frozen=True, slots=True)
class MemberLoad(Doc):
    """What one group member holds: partitions counted over its whole assignment; ``lag`` and
    ``traffic`` summed over those of its partitions the check measured (a partition outside the
    connector's topics adds nothing to either). A part of the verdict document as it is."""

    member_id: str
    client_id: str
    task_id: int | None
    partitions: int
    lag: int = 0
    traffic: int = 0


@dataclass(slots=True)
class MetricResults:
    partitions: int
    samples: int
    total_lag: int
    max_partition_lag: int
    lag_series: list[tuple[int, int]]
    basis_counts: dict[str, int]
    status_counts: dict[str, int]
    top_lag: list[PartitionLag]
    non_ok: list[PartitionLag]
    traffic_topics: list[TrafficStats]
    traffic_overall: TrafficStats | None
    members: list[MemberLoad] = field(default_factory=list)
    unassigned_partitions: int | None = None
    #: partitions whose ring was full (Burrow's group ``complete`` is this over ``partitions``)
    complete_partitions: int = 0
    topic_lags: list[TopicLag] = field(default_factory=list)
    overall_lag: TopicLag | None = None

    @property
    def worst_status(self) -> PartitionStatus:
        present = [PartitionStatus(s) for s, n in self.status_counts.items() if n > 0]
        return max(present, key=lambda s: SEVERITY[s.value], default=PartitionStatus.OK)
