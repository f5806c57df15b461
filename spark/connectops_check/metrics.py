"""Lag, Burrow status and balance as Spark DataFrame transformations.

Why ~500 lines in one module: it is the whole Spark side of the job, kept beside its
definitions (this docstring), which ``reference`` follows step by step in pandas.

Every per-partition computation is a window function or an aggregation keyed by
``(topic, partition)``; nothing loops over partitions in Python, so the work scales with
partitions x samples across executors. Only bounded summaries (top N lists, per-topic stats,
per-member counts) come back to the driver. ``reference`` computes the same numbers with
pandas; tests hold the two equal.

Lag
    ``lag = max(log_end - position, 0)`` per partition per sample, where ``position`` is the
    next offset the connector reads (sink: committed offset; MirrorMaker 2: stored offset + 1,
    hence MM2 lag = source log-end - (stored + 1)). The floor at 0 absorbs a commit observed
    a moment after the log-end it is compared with. Without a position the basis falls back to
    log-start, then window-start offset, then 0 (see ``LagBasis``).

Burrow status (linkedin/Burrow ``core/internal/evaluator/caching.go`` at ced55ba, v1.9.5)
    Burrow keeps per partition a ring of the last ``intervals`` offset commits (offset,
    commit time, lag at commit) and a ring of the last ``intervals`` broker log-end offsets.
    Here both rings are the last ``window`` samples: a sample is a commit entry when it holds
    a position (samples without one are skipped like Burrow's nil slots and only lower
    ``complete`` = entries / window), and every sample's log-end is a broker offset. ``current
    lag`` is the lag at the last sample; ``now`` is the last sample's time. In Burrow's order
    (``evaluatePartitionStatus``, ``calculatePartitionStatus``):

    0. OK when there are no entries, or ``complete < minimum-complete`` (not judged).
    1. OK when ``current lag <= allowed-lag``.
    2. STOP when ``now - last commit > last commit - first commit``, unless some broker
       log-end in the ring is ``<=`` the last committed offset (``checkIfRecentLagZero``: the
       consumer was caught up recently).
    3. REWIND when an offset is lower than the one before it (the first such drop) and no
       later entry is back at the offset before the drop (``checkIfRewindRecovered``).
    4. OK when any entry's lag is ``<= allowed-lag`` (rule 1); nil lags are skipped.
    5. STALL when every entry has the same offset.
    6. WARN when no (non-nil) lag is lower than the previous non-nil lag.
    7. otherwise OK.

    The group status is the worst partition, STOP/STALL/REWIND reported as ERR; the group's
    ``complete`` is the share of partitions whose ring is full (``results``, ``verdict``).
    ``burrow_status`` is that evaluation alone, on explicit rings: tests run Burrow's own test
    table (``caching_test.go``) through it on both engines.

    Where this differs from Burrow: Kafka does not return commit times with the committed
    offsets, and the collection only knows what it sampled, so "commit time" is derived
    (``commit_ring``). A partition whose owner is alive (a group member, or MM2 task, holding
    it, whose Connect task is RUNNING) is taken to commit at every sample: its commit times
    are the sample times, so it can STALL but never STOP. Otherwise a commit time is the first
    sample at which the current offset was seen, because nothing re-commits an unchanged
    offset (Connect's sink task skips a commit when its offsets did not change, and a
    partition with no live owner has no one to commit). Two consequences, each shown by a
    test: (a) an offset unchanged since before the first sample has a commit span of 0, so a
    silent unowned partition is STOP at once, where Burrow, remembering commits from before,
    waits until the silence exceeds its ring's span; (b) a live member that keeps its
    partitions but no longer commits reads STALL here where Burrow, seeing the old commit
    times, would say STOP. Without ownership data (the test broker lists no members) every
    partition takes the second rule.

Traffic and balance
    ``traffic = max(last log_end - window-start offset, 0)`` per partition; window-start is
    the ListOffsets-by-timestamp answer, or the first sample's log-end when there is none.
    Per topic and overall (``"*"``): max/mean, coefficient of variation (population standard
    deviation / mean), and Gini ``G = 2*sum(i*x_i) / (n*sum(x)) - (n+1)/n`` over values sorted
    ascending with ``i`` from 1; ratios are null when the traffic is 0.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from connectops_check.frames import Tables
from connectops_check.results import (
    SEVERITY,
    LagBasis,
    MemberLoad,
    MetricResults,
    PartitionLag,
    PartitionStatus,
    TopicLag,
    TrafficStats,
)

TP = ["topic", "partition"]
ALL_TOPICS = "*"


def load(spark: SparkSession, tables: Tables) -> dict[str, DataFrame]:
    """Spark DataFrames straight from the Arrow tables (no pandas, no Python rows)."""
    return {
        "samples": spark.createDataFrame(tables.samples),
        "window_start": spark.createDataFrame(tables.window_start),
        "assignments": spark.createDataFrame(tables.assignments),
        "members": spark.createDataFrame(tables.members),
    }


def with_lag(samples: DataFrame, window_start: DataFrame) -> DataFrame:
    """Adds ``ws_offset``, ``start`` (where the connector reads next, per ``basis``), ``lag``
    and ``basis`` to every (partition, sample) row."""
    pos, log_start, ws = F.col("position"), F.col("log_start"), F.col("ws_offset")
    basis = (
        F.when(pos.isNotNull(), LagBasis.COMMITTED.value)
        .when(log_start.isNotNull(), LagBasis.EARLIEST.value)
        .when(ws.isNotNull(), LagBasis.WINDOW_START.value)
        .otherwise(LagBasis.OFFSET_ZERO.value)
    )
    start = F.coalesce(pos, log_start, ws, F.lit(0).cast("long"))
    return (
        samples.join(window_start, TP, "left")
        .withColumn("start", start)
        .withColumn("lag", F.greatest(F.col("log_end") - start, F.lit(0).cast("long")))
        .withColumn("basis", basis)
    )


def live_owners(assignments: DataFrame, members: DataFrame) -> DataFrame:
    """``(topic, partition, live)``: whether some alive member holds the partition."""
    return (
        assignments.join(members.select("member_id", "alive"), "member_id")
        .groupBy(*TP)
        .agg(F.bool_or("alive").alias("live"))
    )


def commit_ring(lagged: DataFrame, owners: DataFrame, n_samples: int, window: int) -> DataFrame:
    """Burrow's ring of offset commits, derived from the samples: ``(topic, partition, slot,
    offset, ts_ms, lag)``, one row per sample of the last ``window`` that holds a position.

    The commit time is derived (see the module docstring): the sample time for a partition a
    live member holds, else the first sample at which the current offset was seen.
    """
    w = Window.partitionBy(*TP).orderBy("sample_idx")
    pos, ts = F.col("position"), F.col("ts_ms")
    prev_row_pos = F.lag(pos).over(w)
    changed = pos.isNotNull() & (prev_row_pos.isNull() | (pos != prev_row_pos))
    live = F.coalesce(F.col("live"), F.lit(False))
    rows = lagged.join(F.broadcast(owners), TP, "left").withColumn("run_start", F.max(F.when(changed, ts)).over(w))
    entry = (F.col("sample_idx") >= F.lit(max(n_samples - window, 0))) & pos.isNotNull()
    return rows.filter(entry).select(
        *TP,
        F.col("sample_idx").alias("slot"),
        pos.alias("offset"),
        F.when(live, ts).otherwise(F.col("run_start")).alias("ts_ms"),
        F.col("lag"),
    )


def broker_ring(lagged: DataFrame, n_samples: int, window: int) -> DataFrame:
    """Burrow's ring of broker log-end offsets: the last ``window`` samples' ``(topic, partition, log_end)``."""
    return lagged.filter(F.col("sample_idx") >= F.lit(max(n_samples - window, 0))).select(*TP, "log_end")


def burrow_status(
    entries: DataFrame,
    broker: DataFrame,
    current: DataFrame,
    now_ms: int,
    window: int,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> DataFrame:
    """Burrow's ``evaluatePartitionStatus`` + ``calculatePartitionStatus`` for every partition.

    ``entries``: ``(topic, partition, slot, offset, ts_ms, lag)`` commits in ring order (``lag``
    may be null, skipped as Burrow skips nil lags); ``broker``: ``(topic, partition,
    log_end)``; ``current``: ``(topic, partition, current_lag)``, one row per partition to
    judge. Returns ``(topic, partition, status, complete)`` for every row of ``current``.
    """
    w = Window.partitionBy(*TP).orderBy("slot")
    w_all = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    w_before = w.rowsBetween(Window.unboundedPreceding, -1)
    off, lag, ts, slot = F.col("offset"), F.col("lag"), F.col("ts_ms"), F.col("slot")
    rows = entries.withColumn("prev_off", F.lag(off).over(w)).withColumn(
        "prev_lag", F.last(lag, ignorenulls=True).over(w_before)
    )
    rows = rows.withColumn("rewind_slot", F.min(F.when(off < F.col("prev_off"), slot)).over(w_all))

    def any_of(cond: Column) -> Column:
        return F.coalesce(F.bool_or(cond), F.lit(False))

    ring = rows.groupBy(*TP).agg(
        F.count(F.lit(1)).alias("n_entries"),
        F.min_by(ts, slot).alias("first_ts"),
        F.max_by(ts, slot).alias("last_ts"),
        F.max_by(off, slot).alias("last_off"),
        F.min(off).alias("min_off"),
        F.max(off).alias("max_off"),
        any_of(lag <= F.lit(allowed_lag)).alias("lag_allowed_seen"),
        any_of(lag < F.col("prev_lag")).alias("lag_decreased"),
        F.max("rewind_slot").alias("rewind_slot"),
        F.max(F.when(slot == F.col("rewind_slot"), F.col("prev_off"))).alias("before_rewind"),
        F.max(F.when(slot >= F.col("rewind_slot"), off)).alias("after_rewind_max"),
    )
    lowest_broker = broker.groupBy(*TP).agg(F.min("log_end").alias("min_broker"))
    judged = current.join(ring, TP, "left").join(lowest_broker, TP, "left")
    n = F.coalesce(F.col("n_entries"), F.lit(0))
    complete = n / F.lit(float(window))
    last_ts, first_ts = F.col("last_ts"), F.col("first_ts")
    stopped = (F.lit(now_ms) - last_ts) > (last_ts - first_ts)
    recent_lag_zero = F.coalesce(F.col("min_broker") <= F.col("last_off"), F.lit(False))
    unrecovered = F.col("rewind_slot").isNotNull() & ~(F.col("after_rewind_max") >= F.col("before_rewind"))
    always_lagging = ~F.col("lag_allowed_seen")
    status = (
        F.when((n == 0) | (complete < F.lit(minimum_complete)), PartitionStatus.OK.value)
        .when(F.col("current_lag") <= F.lit(allowed_lag), PartitionStatus.OK.value)
        .when(stopped & ~recent_lag_zero, PartitionStatus.STOP.value)
        .when(unrecovered, PartitionStatus.REWIND.value)
        .when(always_lagging & (F.col("min_off") == F.col("max_off")), PartitionStatus.STALL.value)
        .when(always_lagging & ~F.col("lag_decreased"), PartitionStatus.WARN.value)
        .otherwise(PartitionStatus.OK.value)
    )
    return judged.select(*TP, status.alias("status"), complete.alias("complete"))


def partition_table(
    lagged: DataFrame,
    owners: DataFrame,
    n_samples: int,
    window: int,
    now_ms: int,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> DataFrame:
    """One row per partition: current lag, basis, Burrow status, completeness, traffic, owned,
    time lag, consume and produce rates, and the catch-up ETA."""
    w = Window.partitionBy(*TP).orderBy("sample_idx")
    w_all = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    # the offset the connector reads next, on the lag's basis (a sink without commits starts at
    # the log-start): what the time lag looks up and the consume rate follows
    pos, le, ts, idx = F.col("start"), F.col("log_end"), F.col("ts_ms"), F.col("sample_idx")
    rows = (
        lagged.withColumn("prev_le", F.lag(le).over(w))
        .withColumn("prev_ts", F.lag(ts).over(w))
        .withColumn("c", F.last(pos).over(w_all))
    )
    # the newest (previous, this) log-end segment that holds the last committed offset
    holds = F.when((F.col("prev_le") <= F.col("c")) & (F.col("c") <= le), idx)
    per_partition = rows.groupBy(*TP).agg(
        F.max_by("lag", "sample_idx").alias("lag"),
        F.max_by("basis", "sample_idx").alias("basis"),
        F.max_by(le, "sample_idx").alias("last_log_end"),
        F.min_by(le, "sample_idx").alias("first_log_end"),
        F.max("ws_offset").alias("ws_offset"),
        F.count(F.lit(1)).alias("n_points"),
        F.min(ts).alias("first_ts"),
        F.max(ts).alias("last_ts"),
        F.max("c").alias("c"),
        F.max_by("prev_le", holds).alias("l_le"),
        F.max_by("prev_ts", holds).alias("l_ts"),
        F.max_by(le, holds).alias("r_le"),
        F.max_by(ts, holds).alias("r_ts"),
        F.min_by(pos, F.when(pos.isNotNull(), idx)).alias("first_pos"),
        F.max_by(pos, F.when(pos.isNotNull(), idx)).alias("last_pos"),
        F.min(F.when(pos.isNotNull(), ts)).alias("first_pos_ts"),
        F.max(F.when(pos.isNotNull(), ts)).alias("last_pos_ts"),
    )
    statuses = burrow_status(
        commit_ring(lagged, owners, n_samples, window),
        broker_ring(lagged, n_samples, window),
        per_partition.select(*TP, F.col("lag").alias("current_lag")),
        now_ms,
        window,
        allowed_lag,
        minimum_complete,
    )
    start = F.coalesce(F.col("ws_offset"), F.col("first_log_end"))
    return (
        per_partition.join(statuses, TP)
        .join(owners, TP, "left")
        .select(
            *TP,
            "lag",
            "basis",
            "status",
            "complete",
            F.greatest(F.col("last_log_end") - start, F.lit(0).cast("long")).alias("traffic"),
            F.col("live").isNotNull().alias("owned"),
            *_time_lag_and_rates(now_ms),
        )
    )


def _time_lag_and_rates(now_ms: int) -> list[Column]:
    """Kafka Lag Exporter's time lag, the rates and the ETA, from ``partition_table``'s aggregates.

    Time lag: the offset the connector reads next ``c`` (its committed offset, else the lag's
    basis: log-start, where a sink without commits starts) looked up on the (log-end, sample
    time) points; interpolated on the newest segment that holds it, else extrapolated along
    the first and last points (``LookupTable.lookup``); ``now - predicted time``, floored at 0.
    Zero when ``c`` is at or past the last log-end; unknown (null) with fewer than two points
    or when the log-end never moved (nothing to extrapolate along). The consume rate follows
    ``c`` over the samples, so a connector that does not commit consumes at 0 records/s.
    """
    c, last_le = F.col("c"), F.col("last_log_end")
    found = F.col("r_le").isNotNull()
    l_le = F.when(found, F.col("l_le")).otherwise(F.col("first_log_end"))
    l_ts = F.when(found, F.col("l_ts")).otherwise(F.col("first_ts"))
    r_le = F.when(found, F.col("r_le")).otherwise(last_le)
    r_ts = F.when(found, F.col("r_ts")).otherwise(F.col("last_ts"))
    dy = (r_le - l_le).cast("double")
    predicted = r_ts - (r_le - c).cast("double") * (r_ts - l_ts).cast("double") / dy
    time_lag = (
        F.when(c.isNull(), F.lit(None).cast("double"))
        .when(c >= last_le, F.lit(0.0))
        .when((F.col("n_points") < 2) | (dy == 0), F.lit(None).cast("double"))
        .otherwise(F.greatest((F.lit(float(now_ms)) - predicted) / 1000.0, F.lit(0.0)))
    )
    span_s = (F.col("last_ts") - F.col("first_ts")).cast("double") / 1000.0
    produce = F.when(span_s > 0, (last_le - F.col("first_log_end")).cast("double") / span_s)
    pos_span_s = (F.col("last_pos_ts") - F.col("first_pos_ts")).cast("double") / 1000.0
    consume = F.when(pos_span_s > 0, (F.col("last_pos") - F.col("first_pos")).cast("double") / pos_span_s)
    return [
        time_lag.alias("time_lag_s"),
        consume.alias("consume_rate"),
        produce.alias("produce_rate"),
        eta_seconds(F.col("lag"), consume, produce).alias("eta_s"),
    ]


def eta_seconds(lag: Column, consume: Column, produce: Column) -> Column:
    """Time to catch up: 0 without lag, ``lag / (consume - produce)`` while the consumer gains,
    else null (it is not catching up, or the rates are unknown)."""
    return F.when(lag == 0, F.lit(0.0)).when(consume > produce, lag.cast("double") / (consume - produce))


def traffic_stats(partitions: DataFrame) -> DataFrame:
    """Per-topic traffic statistics, plus one row for all partitions together (``"*"``)."""
    traffic = partitions.select("topic", "traffic")
    both = traffic.unionByName(traffic.withColumn("topic", F.lit(ALL_TOPICS)))
    rank = F.row_number().over(Window.partitionBy("topic").orderBy("traffic"))
    x = F.col("traffic").cast("double")
    agg = (
        both.withColumn("rank", rank)
        .groupBy("topic")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("traffic").alias("total"),
            F.max("traffic").alias("max"),
            F.min("traffic").alias("min"),
            F.stddev_pop(x).alias("std"),
            F.sum(F.col("rank").cast("double") * x).alias("sum_ix"),
        )
    )
    n, total = F.col("n").cast("double"), F.col("total").cast("double")
    mean = total / n
    has_traffic = F.col("total") > 0
    return agg.select(
        "topic",
        "n",
        "total",
        mean.alias("mean"),
        "max",
        "min",
        F.when(has_traffic, F.col("max") / mean).alias("max_over_mean"),
        F.when(has_traffic, F.col("std") / mean).alias("cv"),
        F.when(has_traffic, 2.0 * F.col("sum_ix") / (n * total) - (n + 1.0) / n).alias("gini"),
    )


def topic_lag_table(partitions: DataFrame) -> DataFrame:
    """Per-topic lag, time lag, rates and ETA, plus one row for the connector (``"*"``)."""
    cols = partitions.select("topic", "lag", "time_lag_s", "consume_rate", "produce_rate")
    both = cols.unionByName(cols.withColumn("topic", F.lit(ALL_TOPICS)))
    n = F.count(F.lit(1))

    def all_known(name: str) -> Column:
        return F.when(F.count(name) == n, F.sum(name))

    agg = both.groupBy("topic").agg(
        n.alias("n"),
        F.sum("lag").alias("lag"),
        F.max("time_lag_s").alias("time_lag_s"),
        all_known("consume_rate").alias("consume_rate"),
        all_known("produce_rate").alias("produce_rate"),
    )
    return agg.withColumn("eta_s", eta_seconds(F.col("lag"), F.col("consume_rate"), F.col("produce_rate")))


def member_loads(assignments: DataFrame, members: DataFrame, parts: DataFrame) -> DataFrame:
    """Partitions, current lag and window traffic per member, members holding nothing included
    (they count in the mean): equal partition counts can still hide one member holding the hot
    partitions, which only the lag and traffic per member show."""
    measured = parts.select(*TP, "lag", "traffic")
    counts = (
        assignments.join(measured, TP, "left")
        .groupBy("member_id")
        .agg(
            F.count(F.lit(1)).alias("partitions"),
            F.coalesce(F.sum("lag"), F.lit(0)).alias("lag"),
            F.coalesce(F.sum("traffic"), F.lit(0)).alias("traffic"),
        )
    )
    zero = F.lit(0).cast("long")
    return members.join(counts, "member_id", "left").select(
        "member_id",
        "client_id",
        "task_id",
        *[F.coalesce(F.col(c), zero).alias(c) for c in ("partitions", "lag", "traffic")],
    )


def partition_frame(
    spark: SparkSession, tables: Tables, window: int = 10, allowed_lag: int = 0, minimum_complete: float = 0.0
) -> DataFrame:
    """The per-partition table alone (what tests compare row by row with the reference)."""
    frames = load(spark, tables)
    lagged = with_lag(frames["samples"], frames["window_start"])
    owners = live_owners(frames["assignments"], frames["members"])
    return partition_table(lagged, owners, tables.n_samples, window, tables.now_ms, allowed_lag, minimum_complete)


def compute(
    spark: SparkSession,
    tables: Tables,
    window: int = 10,
    top_n: int = 20,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> MetricResults:
    """Runs every metric on Spark and collects the bounded summaries."""
    frames = load(spark, tables)
    lagged = with_lag(frames["samples"], frames["window_start"])
    owners = live_owners(frames["assignments"], frames["members"])
    parts = partition_table(
        lagged, owners, tables.n_samples, window, tables.now_ms, allowed_lag, minimum_complete
    ).cache()
    try:
        return _collect(lagged, parts, frames, tables, top_n)
    finally:
        parts.unpersist()


def _collect(
    lagged: DataFrame, parts: DataFrame, frames: dict[str, DataFrame], tables: Tables, top_n: int
) -> MetricResults:
    """Six small Spark jobs; counts share one aggregation because each job has a fixed cost."""

    def count_where(cond: Column) -> Column:
        return F.count(F.when(cond, 1))

    bases = [b.value for b in LagBasis]
    statuses = [s.value for s in PartitionStatus]
    totals = parts.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("lag").alias("total"),
        F.max("lag").alias("max"),
        count_where(~F.col("owned")).alias("unowned"),
        count_where(F.col("complete") >= F.lit(1.0)).alias("complete"),
        *[count_where(F.col("basis") == b).alias(f"basis_{b}") for b in bases],
        *[count_where(F.col("status") == s).alias(f"status_{s}") for s in statuses],
    ).first()
    assert totals is not None  # a global aggregation always yields one row
    series = lagged.groupBy("sample_idx", "ts_ms").agg(F.sum("lag").alias("lag")).orderBy("sample_idx")
    severity = F.create_map(*[F.lit(x) for kv in SEVERITY.items() for x in kv])[F.col("status")]
    top_lag = parts.orderBy(F.desc("lag"), "topic", "partition").limit(top_n)
    non_ok = (
        parts.filter(F.col("status") != PartitionStatus.OK.value)
        .orderBy(severity.desc(), F.desc("lag"), "topic", "partition")
        .limit(top_n)
    )
    stats = [_traffic(r) for r in traffic_stats(parts).collect()]
    topic_lags = [_topic_lag(r) for r in topic_lag_table(parts).collect()]
    members: list[MemberLoad] = []
    if tables.owners_known:
        loads = member_loads(frames["assignments"], frames["members"], parts).orderBy(F.desc("partitions"), "member_id")
        members = [
            MemberLoad(
                member_id=r["member_id"],
                client_id=r["client_id"],
                task_id=r["task_id"],
                partitions=int(r["partitions"]),
                lag=int(r["lag"]),
                traffic=int(r["traffic"]),
            )
            for r in loads.collect()
        ]
    return MetricResults(
        partitions=int(totals["n"]),
        samples=tables.n_samples,
        total_lag=int(totals["total"] or 0),
        max_partition_lag=int(totals["max"] or 0),
        lag_series=[(int(r["ts_ms"]), int(r["lag"])) for r in series.collect()],
        basis_counts={b: int(totals[f"basis_{b}"]) for b in bases if totals[f"basis_{b}"]},
        status_counts={s: int(totals[f"status_{s}"]) for s in statuses if totals[f"status_{s}"]},
        top_lag=[_partition_lag(r) for r in top_lag.collect()],
        non_ok=[_partition_lag(r) for r in non_ok.collect()],
        traffic_topics=sorted((s for s in stats if s.topic != ALL_TOPICS), key=lambda s: s.topic),
        traffic_overall=next((s for s in stats if s.topic == ALL_TOPICS), None),
        members=members,
        unassigned_partitions=int(totals["unowned"]) if tables.owners_known else None,
        complete_partitions=int(totals["complete"]),
        topic_lags=sorted((t for t in topic_lags if t.topic != ALL_TOPICS), key=lambda t: t.topic),
        overall_lag=next((t for t in topic_lags if t.topic == ALL_TOPICS), None),
    )


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def _partition_lag(row: Any) -> PartitionLag:
    return PartitionLag(
        topic=row["topic"],
        partition=int(row["partition"]),
        lag=int(row["lag"]),
        basis=row["basis"],
        status=row["status"],
        complete=float(row["complete"]),
        time_lag_s=_opt(row["time_lag_s"]),
        consume_rate=_opt(row["consume_rate"]),
        produce_rate=_opt(row["produce_rate"]),
        eta_s=_opt(row["eta_s"]),
    )


def _topic_lag(row: Any) -> TopicLag:
    return TopicLag(
        topic=row["topic"],
        partitions=int(row["n"]),
        lag=int(row["lag"]),
        time_lag_s=_opt(row["time_lag_s"]),
        consume_rate=_opt(row["consume_rate"]),
        produce_rate=_opt(row["produce_rate"]),
        eta_s=_opt(row["eta_s"]),
    )


def _traffic(row: Any) -> TrafficStats:
    def opt(value: Any) -> float | None:
        return None if value is None else float(value)

    return TrafficStats(
        topic=row["topic"],
        partitions=int(row["n"]),
        total=int(row["total"]),
        mean=float(row["mean"]),
        max=int(row["max"]),
        min=int(row["min"]),
        max_over_mean=opt(row["max_over_mean"]),
        cv=opt(row["cv"]),
        gini=opt(row["gini"]),
    )
