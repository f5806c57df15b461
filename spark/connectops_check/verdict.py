"""Thresholds applied to the metric results: the verdict document the operator reads back.

Why ~500 lines in one module: every rule that turns numbers into a level lives here, so the
levels, their precedence and the reasons they give can be read (and changed) in one place.

Why thresholds live here and not in the engines: they apply to small summaries (per topic,
per member), so one Python implementation serves the Spark job and the pandas reference alike.

Verdict levels, worst reason wins:
- ``UNHEALTHY``: Burrow rolls the connector up to ERR (a partition is STOP, STALL or REWIND),
  or the connector or one of its tasks is FAILED.
- ``DEGRADED``: Burrow WARN; total lag above ``maxLag``; a topic's traffic skew (max/mean)
  above ``maxSkew`` or Gini above ``maxGini``; members outside the assignment bounds; the
  RangeAssignor pattern; partitions nobody holds while the group has members.
- ``HEALTHY``: none of the above. ``INFO`` reasons never change the level.
- ``NOT_APPLICABLE``: nothing broker-side to measure (a non-MirrorMaker source connector, a
  connector with no partitions, or a collection that could not read the offsets).

What the connector is meant to do changes what counts as a failure:
- ``PAUSED`` / ``STOPPED``: the spec pauses or stops it (or a reset is in progress). Not
  consuming is the intent, so Burrow's status and ``maxLag`` are reported as INFO with the lag
  accumulated; it becomes ``UNHEALTHY`` only past ``maxLagWhilePaused`` (records) or
  ``maxTimeLagWhilePausedSeconds``, or when a task FAILED. Balance reasons stay as they are
  (they concern the producers) and reach the PartitionsBalanced condition.
- ``CATCHING_UP``: the check follows a reset that rewinds (``toEarliest``, ``toTimestamp``,
  ``alter``...), the consumer is gaining on the producer, and the only complaints are the size
  of the lag (``maxLag``, Burrow WARN): large lag is what the reset asked for. The ETA says
  when it will be done. A consumer not gaining stays DEGRADED with ``NOT_CATCHING_UP``; Burrow
  ERR (STOP, STALL, REWIND) stays UNHEALTHY.

Every reason is ``{"severity", "code", "message"}`` so the operator can act on codes and a
human can read messages.

The verdict is built typed (``document``'s classes) and becomes JSON only in
``serialize.to_json``; nothing here writes a key or reads one back.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Final

from connectops_check.document import (
    SCHEMA,
    AssignmentBalance,
    Balance,
    Burrow,
    Collection,
    Failover,
    FailoverPartition,
    Headline,
    Lag,
    LagPoint,
    Level,
    Loss,
    LostPartition,
    Reason,
    Settings,
    Severity,
    Spread,
    TaskEntry,
    Tasks,
    TopicLagEntry,
    Traffic,
    TrafficEntry,
    Verdict,
)
from connectops_check.producer_check import producer_block
from connectops_check.results import MemberLoad, MetricResults, TopicLag, TrafficStats, rollup
from connectops_check.snapshot import ConnectorKind, Scrape, Snapshot

__all__ = ["SCHEMA", "Settings", "Verdict", "assignment_balance", "build", "failover_block", "mirror_loss"]

#: Share of members that counts as "a minority" for the RangeAssignor pattern, and the share
#: of partitions that minority must hold to be flagged.
RANGE_MEMBER_SHARE = 0.2
RANGE_PARTITION_SHARE = 0.5

#: resets after which a large, shrinking lag is the expected outcome (toLatest skips ahead)
REWINDING_RESETS = frozenset({"reset", "toEarliest", "toTimestamp", "alter", "restore"})
#: reasons about how much lag there is, not about the consumer misbehaving
SIZE_OF_LAG = frozenset({"LAG_ABOVE_MAX", "BURROW_WARN"})
#: reasons that follow from not consuming, expected while paused or stopped on purpose
NOT_CONSUMING = frozenset({"LAG_ABOVE_MAX", "BURROW_WARN", "BURROW_ERR", "CONNECTOR_NOT_RUNNING"})


class _Reasons:
    def __init__(self) -> None:
        self.items: list[Reason] = []

    def add(self, severity: Severity, code: str, message: str) -> None:
        self.items.append(Reason(severity=severity, code=code, message=message))

    def level(self) -> Level:
        severities = {r.severity for r in self.items}
        if Severity.UNHEALTHY in severities:
            return Level.UNHEALTHY
        if Severity.DEGRADED in severities:
            return Level.DEGRADED
        return Level.HEALTHY

    def demote(self, codes: frozenset[str], why: str) -> None:
        """Keeps the reasons, as INFO, saying why they do not count now."""
        for r in self.items:
            if r.code in codes and r.severity is not Severity.INFO:
                r.severity = Severity.INFO
                r.message = f"{r.message} ({why})"


def assignment_balance(members: list[MemberLoad], threshold: float) -> AssignmentBalance:
    """Partitions per member against Cruise Control's count-goal bounds.

    Cruise Control calls a count balanced while every broker lies within
    ``[floor(mean * (2 - t)), ceil(mean * t)]``; integer bounds matter, since 10 partitions
    over 3 members cannot do better than 4/3/3 (max/mean 1.2) and must not be flagged. A tiny
    epsilon keeps ``10 * 1.1`` from rounding up to 12.

    RangeAssignor pattern: with at least 2 members, an unbalanced assignment where the top
    ``ceil(20%)`` of members hold more than half of the partitions. RangeAssignor deals each
    topic's partitions out in member order, so across topics whose partition counts are not
    multiples of the member count the same first members keep receiving the extras.
    """
    n = len(members)
    counts = sorted((m.partitions for m in members), reverse=True)
    total = sum(counts)
    mean = total / n if n else 0.0
    upper = math.ceil(mean * threshold - 1e-9)
    lower = max(0, math.floor(mean * (2.0 - threshold) + 1e-9))
    balanced = all(lower <= c <= upper for c in counts)
    top_k = math.ceil(RANGE_MEMBER_SHARE * n)
    top_share = sum(counts[:top_k]) / total if total else 0.0
    return AssignmentBalance(
        members=n,
        assigned_partitions=total,
        mean=mean,
        max=counts[0] if counts else 0,
        min=counts[-1] if counts else 0,
        max_over_mean=counts[0] / mean if mean else None,
        upper_limit=upper,
        lower_limit=lower,
        balanced=balanced,
        top_members=top_k,
        top_members_share=top_share,
        range_assignor_pattern=n >= 2 and not balanced and top_share > RANGE_PARTITION_SHARE,
        traffic=_member_spread([m.traffic for m in members]),
        lag=_member_spread([m.lag for m in members]),
        per_member=list(members),
    )


def _member_spread(values: list[int]) -> Spread:
    """Total, mean and max over the members (holders of nothing count: they are the idle side of
    an imbalance), max/mean null when the total is 0."""
    total = sum(values)
    mean = total / len(values) if values else 0.0
    top = max(values, default=0)
    return Spread(total=total, mean=mean, max=top, max_over_mean=top / mean if mean else None)


def build(
    snapshot: Snapshot, results: MetricResults | None, settings: Settings, baseline: list[Scrape] | None = None
) -> Verdict:
    """The verdict. ``results`` is None when there was nothing to compute.
    ``baseline``: the previous check's scrapes of the workers' metrics (the "before")."""
    reasons = _Reasons()
    _task_reasons(snapshot, reasons)
    loss = mirror_loss(snapshot, reasons)
    failover = failover_block(snapshot)
    producer = producer_block(
        snapshot, settings.offset_flush_timeout_ms, settings.offset_flush_interval_ms, baseline or [], reasons.add
    )
    verdict = Verdict(
        connector=snapshot.connector,
        kind=snapshot.kind,
        connector_class=snapshot.connector_class,
        verdict=Level.NOT_APPLICABLE,
        reasons=reasons.items,
        headline=None,
        lag=None,
        balance=None,
        tasks=Tasks(
            connector_state=snapshot.connector_state,
            tasks=[
                TaskEntry(task_id=t.task_id, worker_id=t.worker_id, state=t.state, trace=t.trace)
                for t in snapshot.tasks
            ],
        ),
        collection=Collection(
            samples=len(snapshot.samples),
            first_sample_ms=min((s.ts_ms for s in snapshot.samples), default=None),
            last_sample_ms=max((s.ts_ms for s in snapshot.samples), default=None),
            window_start_ms=snapshot.window_start_ms,
            group_id=snapshot.group_id,
            notes=list(snapshot.notes),
        ),
        settings=settings,
        producer=producer,
        loss=loss,
        failover=failover,
    )
    not_applicable = _not_applicable(snapshot, results)
    if not_applicable is not None:
        reasons.add(Severity.INFO, not_applicable[0], not_applicable[1])
        if producer is not None:
            # no lag to judge, but the producer was: the verdict is about it
            verdict.verdict = reasons.level()
        return verdict
    assert results is not None  # _not_applicable returns a reason when results is None
    lag = _lag_block(results, settings, reasons)
    balance = _balance_block(snapshot, results, settings, reasons)
    verdict.verdict = _intent(results, settings, reasons)
    verdict.lag, verdict.balance = lag, balance
    judged = [t for t in balance.traffic.topics if t.evaluated]
    assignment = balance.assignment
    verdict.headline = Headline(
        total_lag=results.total_lag,
        max_partition_lag=results.max_partition_lag,
        burrow_status=lag.burrow.status,
        worst_partition_status=lag.burrow.worst_partition_status,
        partitions=results.partitions,
        # judged topics have a max/mean and a Gini (``_traffic``)
        max_traffic_skew=max((t.max_over_mean for t in judged if t.max_over_mean is not None), default=None),
        max_gini=max((t.gini for t in judged if t.gini is not None), default=None),
        assignment_max_over_mean=None if assignment is None else assignment.max_over_mean,
        members=None if assignment is None else assignment.members,
        time_lag_seconds=lag.time_lag_seconds,
        consume_rate=lag.consume_rate,
        produce_rate=lag.produce_rate,
        eta_seconds=lag.eta_seconds,
    )
    return verdict


def _intent(results: MetricResults, settings: Settings, reasons: _Reasons) -> Level:
    """The level, given what the connector is meant to be doing (module docstring)."""
    overall = results.overall_lag
    time_lag = None if overall is None else overall.time_lag_s
    paused = settings.intent_not_running
    if paused is not None:
        why = f"{paused.lower()} on purpose" + (" by a reset in progress" if settings.reset_in_progress else "")
        reasons.demote(NOT_CONSUMING, why)
        accumulated = f"lag {results.total_lag} records" + ("" if time_lag is None else f", {time_lag:.0f}s behind")
        reasons.add(Severity.INFO, f"CONNECTOR_{paused}", f"connector is {why}: {accumulated} so far")
        limit, limit_s = settings.max_lag_while_paused, settings.max_time_lag_while_paused_s
        if limit is not None and results.total_lag > limit:
            reasons.add(
                Severity.UNHEALTHY,
                "LAG_WHILE_PAUSED_ABOVE_MAX",
                f"{paused.lower()} with lag {results.total_lag} records, above maxLagWhilePaused {limit}",
            )
        if limit_s is not None and time_lag is not None and time_lag > limit_s:
            reasons.add(
                Severity.UNHEALTHY,
                "LAG_WHILE_PAUSED_ABOVE_MAX",
                f"{paused.lower()} for {time_lag:.0f}s of records, above maxTimeLagWhilePausedSeconds {limit_s:g}",
            )
        return Level.UNHEALTHY if reasons.level() is Level.UNHEALTHY else paused
    if settings.after_reset in REWINDING_RESETS and results.total_lag > 0:
        complaints = {r.code for r in reasons.items if r.severity is not Severity.INFO}
        eta = None if overall is None else overall.eta_s
        if eta is not None and complaints and complaints <= SIZE_OF_LAG:
            reasons.demote(SIZE_OF_LAG, f"expected after {settings.after_reset}")
            reasons.add(
                Severity.INFO,
                "CATCHING_UP",
                f"catching up after {settings.after_reset}: lag {results.total_lag}, "
                f"ETA {eta:.0f}s at the current rates",
            )
            return Level.CATCHING_UP
        if eta is None:
            reasons.add(Severity.DEGRADED, "NOT_CATCHING_UP", f"after {settings.after_reset}: {_eta_reason(overall)}")
    return reasons.level()


def _not_applicable(snapshot: Snapshot, results: MetricResults | None) -> tuple[str, str] | None:
    if snapshot.kind is ConnectorKind.SOURCE:
        return (
            "SOURCE_CONNECTOR",
            snapshot.not_applicable_reason
            or f"{snapshot.connector_class or 'source connector'}: its offsets are connector-defined "
            "positions kept in the Connect offsets topic, with no broker-side log-end to measure lag against",
        )
    if snapshot.not_applicable_reason:
        return ("NOT_MEASURABLE", snapshot.not_applicable_reason)
    if results is None or results.partitions == 0:
        return ("NO_PARTITIONS", "no topic partitions were found for this connector, nothing to measure")
    return None


#: partitions named in the MIRROR_RECORDS_LOST message (the loss block lists them all)
MAX_LOSS_SHOWN: Final = 10


def mirror_loss(snapshot: Snapshot, reasons: _Reasons) -> Loss | None:
    """MirrorMaker 2 partitions whose source log-start passed where MM2 resumes (stored + 1):
    those records were deleted (retention, DeleteRecords) before MM2 replicated them. From the
    LAST sample only: a running MM2 resets to the log-start as soon as it sees the gap, so an
    earlier sample's gap may be closed (and its records lost) by the last one, and a loss is a
    fact, not a trend. A re-created topic needs the topic ID of an earlier look, which only the
    operator keeps (its MirrorComplete condition)."""
    if snapshot.kind is not ConnectorKind.MIRROR_SOURCE or not snapshot.samples:
        return None
    partitions = [
        LostPartition(
            topic=p.topic,
            partition=p.partition,
            first_lost=p.stored + 1,
            log_start=p.log_start,
            lost=p.log_start - (p.stored + 1),
        )
        for p in sorted(snapshot.samples[-1].partitions, key=lambda p: (p.topic, p.partition))
        if p.stored is not None and p.log_start is not None and p.stored + 1 < p.log_start
    ]
    total = sum(p.lost for p in partitions)
    if partitions:
        per = ", ".join(f"{p.topic}-{p.partition}: {p.lost}" for p in partitions[:MAX_LOSS_SHOWN])
        reasons.add(
            Severity.UNHEALTHY,
            "MIRROR_RECORDS_LOST",
            f"{total} records deleted at the source before MirrorMaker 2 replicated them ({per}"
            + (", ..." if len(partitions) > MAX_LOSS_SHOWN else "")
            + ")",
        )
    return Loss(total=total, partitions=partitions)


def failover_block(snapshot: Snapshot) -> Failover | None:
    """MirrorMaker 2 checkpoints: the records a consumer of each group failing over to the target
    now would read again, per partition (``offset_syncs``): the checkpoint lag plus MM2's
    translation rounding. ``total`` counts the partitions whose count is known, ``unknown`` the
    others (no offset sync translates the committed offset). A fact of the last sample, as the
    loss is; it judges nothing (the checkpoint lag does)."""
    if snapshot.kind is not ConnectorKind.MIRROR_CHECKPOINT or not snapshot.failover:
        return None
    rows = sorted(snapshot.failover, key=lambda f: (f.row, f.partition))
    return Failover(
        total=sum(f.reread for f in rows if f.reread is not None),
        unknown=sum(1 for f in rows if f.reread is None),
        partitions=[
            FailoverPartition(
                topic=f.row,
                partition=f.partition,
                target_offset=f.target_offset,
                target_position=f.target_position,
                reread=f.reread,
            )
            for f in rows
        ],
    )


def _task_reasons(snapshot: Snapshot, reasons: _Reasons) -> None:
    if snapshot.connector_state == "FAILED":
        reasons.add(Severity.UNHEALTHY, "CONNECTOR_FAILED", f"connector {snapshot.connector} is FAILED")
    failed = sorted(t.task_id for t in snapshot.tasks if t.state == "FAILED")
    if failed:
        reasons.add(Severity.UNHEALTHY, "TASK_FAILED", f"tasks {failed} are FAILED")
    if snapshot.connector_state in ("PAUSED", "STOPPED"):
        reasons.add(
            Severity.INFO,
            "CONNECTOR_NOT_RUNNING",
            f"connector is {snapshot.connector_state}: lag grows while it does not run",
        )


def _lag_block(results: MetricResults, settings: Settings, reasons: _Reasons) -> Lag:
    worst = results.worst_status
    status = rollup(worst)
    counts = {k: v for k, v in sorted(results.status_counts.items()) if v}
    if status == "ERR":
        bad = {k: v for k, v in counts.items() if k in ("STOP", "STALL", "REWIND")}
        reasons.add(Severity.UNHEALTHY, "BURROW_ERR", f"Burrow-style evaluation is ERR: partitions {bad}")
    elif status == "WARN":
        reasons.add(
            Severity.DEGRADED,
            "BURROW_WARN",
            f"lag never decreased over the window on {counts.get('WARN', 0)} partitions",
        )
    if results.total_lag > settings.max_lag:
        reasons.add(
            Severity.DEGRADED, "LAG_ABOVE_MAX", f"total lag {results.total_lag} exceeds maxLag {settings.max_lag}"
        )
    uncommitted = sum(v for k, v in results.basis_counts.items() if k != "committed")
    if uncommitted:
        reasons.add(
            Severity.INFO,
            "NO_COMMITTED_OFFSET",
            f"{uncommitted} partitions have no committed offset: their lag is measured from "
            f"{sorted(k for k in results.basis_counts if k != 'committed')}",
        )
    overall = results.overall_lag
    return Lag(
        total=results.total_lag,
        max_partition=results.max_partition_lag,
        time_lag_seconds=None if overall is None else overall.time_lag_s,
        consume_rate=None if overall is None else overall.consume_rate,
        produce_rate=None if overall is None else overall.produce_rate,
        eta_seconds=None if overall is None else overall.eta_s,
        eta_reason=_eta_reason(overall),
        topics=[_topic_lag(t) for t in results.topic_lags],
        series=[LagPoint(ts_ms=ts, total_lag=lag) for ts, lag in results.lag_series],
        basis_counts=dict(sorted(results.basis_counts.items())),
        top_partitions=list(results.top_lag),
        burrow=Burrow(
            status=status,
            worst_partition_status=worst,
            status_counts=counts,
            complete=results.complete_partitions / results.partitions if results.partitions else 0.0,
            non_ok_partitions=list(results.non_ok),
            non_ok_truncated=max(0, sum(v for k, v in counts.items() if k != "OK") - len(results.non_ok)),
        ),
    )


def _eta_reason(lag: TopicLag | None) -> str | None:
    """Why there is no ETA (None when there is one)."""
    if lag is not None and lag.eta_s is not None:
        return None
    if lag is None or lag.consume_rate is None or lag.produce_rate is None:
        return "rates unknown: fewer than two samples with a committed offset, or no time between them"
    return (
        f"the consumer is not gaining: it consumes {lag.consume_rate:.2f} records/s while "
        f"{lag.produce_rate:.2f} records/s are produced"
    )


def _topic_lag(t: TopicLag) -> TopicLagEntry:
    return TopicLagEntry(
        topic=t.topic,
        partitions=t.partitions,
        lag=t.lag,
        time_lag_seconds=t.time_lag_s,
        consume_rate=t.consume_rate,
        produce_rate=t.produce_rate,
        eta_seconds=t.eta_s,
        eta_reason=_eta_reason(t),
    )


def _traffic_reasons(topics: list[TrafficEntry], settings: Settings, reasons: _Reasons) -> None:
    for t in topics:
        if not t.evaluated:
            continue
        if t.max_over_mean is not None and t.max_over_mean > settings.max_skew:
            reasons.add(
                Severity.DEGRADED,
                "TRAFFIC_SKEW",
                f"topic {t.topic}: busiest partition carries {t.max_over_mean:.2f}x the mean "
                f"traffic (maxSkew {settings.max_skew})",
            )
        if t.gini is not None and t.gini > settings.max_gini:
            reasons.add(
                Severity.DEGRADED,
                "TRAFFIC_GINI",
                f"topic {t.topic}: traffic Gini {t.gini:.3f} exceeds maxGini {settings.max_gini}",
            )
    quiet = [t.topic for t in topics if not t.evaluated and t.partitions > 1]
    if quiet:
        reasons.add(
            Severity.INFO,
            "LOW_TRAFFIC",
            f"balance not judged for {len(quiet)} topics with fewer than {settings.min_traffic} records in the window",
        )


def _assignment_reasons(
    assignment: AssignmentBalance, results: MetricResults, settings: Settings, reasons: _Reasons
) -> None:
    if assignment.members == 0:
        reasons.add(Severity.INFO, "NO_MEMBERS", "no consumer holds any partition (no group members or tasks)")
        return
    if not assignment.balanced:
        reasons.add(
            Severity.DEGRADED,
            "ASSIGNMENT_UNBALANCED",
            f"partitions per member range {assignment.min}..{assignment.max}, outside "
            f"[{assignment.lower_limit}, {assignment.upper_limit}] "
            f"(mean {assignment.mean:.2f}, threshold {settings.assignment_threshold})",
        )
    if assignment.range_assignor_pattern:
        reasons.add(
            Severity.DEGRADED,
            "RANGE_ASSIGNOR_PATTERN",
            f"top {assignment.top_members} of {assignment.members} members hold "
            f"{assignment.top_members_share:.0%} of the partitions",
        )
    # only where the counts look fine: an uneven count is reported above, and its traffic
    # skew is that count again; equal counts with the hot partitions on one member are
    # the imbalance partition counts cannot show
    traffic = assignment.traffic
    if (
        assignment.balanced
        and assignment.members >= 2
        and traffic.total >= settings.min_traffic
        and traffic.max_over_mean is not None
        and traffic.max_over_mean > settings.max_skew
    ):
        busiest = max(results.members, key=lambda m: (m.traffic, m.member_id))
        reasons.add(
            Severity.DEGRADED,
            "MEMBER_TRAFFIC_SKEW",
            f"member {busiest.client_id or busiest.member_id} ({busiest.partitions} partitions) carries "
            f"{traffic.max_over_mean:.2f}x the mean traffic per member (maxSkew {settings.max_skew})",
        )
    if results.unassigned_partitions:
        reasons.add(
            Severity.DEGRADED,
            "UNASSIGNED_PARTITIONS",
            f"{results.unassigned_partitions} partitions are held by no member",
        )


def _balance_block(snapshot: Snapshot, results: MetricResults, settings: Settings, reasons: _Reasons) -> Balance:
    topics = [_traffic(t, settings) for t in results.traffic_topics]
    _traffic_reasons(topics, settings, reasons)
    assignment: AssignmentBalance | None = None
    if snapshot.members is None:
        reasons.add(
            Severity.INFO, "OWNERSHIP_UNKNOWN", "which member holds which partition is unknown; see collection notes"
        )
    else:
        counted = assignment_balance(results.members, settings.assignment_threshold)
        assignment = dataclasses.replace(counted, unassigned_partitions=results.unassigned_partitions)
        _assignment_reasons(assignment, results, settings, reasons)
    return Balance(
        traffic=Traffic(
            window_start_ms=snapshot.window_start_ms,
            overall=None if results.traffic_overall is None else _traffic(results.traffic_overall, settings),
            topics=topics,
        ),
        assignment=assignment,
    )


def _traffic(t: TrafficStats, settings: Settings) -> TrafficEntry:
    return TrafficEntry(
        topic=t.topic,
        partitions=t.partitions,
        total=t.total,
        mean=t.mean,
        max=t.max,
        min=t.min,
        max_over_mean=t.max_over_mean,
        cv=t.cv,
        gini=t.gini,
        evaluated=t.partitions > 1 and t.total >= settings.min_traffic and t.max_over_mean is not None,
    )
