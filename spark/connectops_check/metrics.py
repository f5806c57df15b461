"""Lag, Burrow status and balance as Spark DataFrame transformations.

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

Burrow status (``core/internal/evaluator/caching.go``, rule order kept)
    Burrow evaluates a ring of the last ``window`` offset commits per partition; here the
    ring is the last ``window`` samples, and a sample is an entry when it holds a position.
    Samples without one are skipped like Burrow's empty (nil) ring slots and only lower
    ``complete`` (entries / window); in Burrow they can only lead the ring, here a gap can
    also follow a deleted offset. ``current lag`` is the lag at the last sample; ``now`` is
    the last sample's time.

    0. OK when ``current lag == 0``, or when there are no entries (nothing to judge).
    1. OK when the lag was 0 at any entry (Burrow's rule 1, the "allowance").
    2. REWIND when any entry's offset is lower than the previous entry's.
    3. STOP when ``now - last commit > last commit - first commit`` (the consumer stopped
       committing for longer than the span its commits covered).
    4. STALL when every entry has the same offset (committing, but not moving).
    5. WARN when the lag never decreased from one entry to the next.
    6. otherwise OK.

    Kafka does not expose commit times, so "commit time" is derived from ownership.
    A partition whose owner is alive (a group member, or MM2 task, holding it, whose Connect
    task is RUNNING) is treated as committing at every sample: its commit times are the sample
    times, so it can STALL but never STOP. Otherwise, a commit time is the first sample at
    which the current offset was seen (looking back over all samples, not only the window),
    because nothing re-commits an unchanged offset: Connect's sink task skips a commit when
    offsets did not change, and a partition with no live owner has no one to commit. So a
    paused or dead consumer is STOP, a live one that does not move is STALL, as Burrow would
    see them. Without ownership data every partition takes the second rule (what Burrow
    itself sees for a Connect sink).

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
    """Adds ``ws_offset``, ``lag`` and ``basis`` to every (partition, sample) row."""
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


def partition_table(lagged: DataFrame, owners: DataFrame, n_samples: int, window: int, now_ms: int) -> DataFrame:
    """One row per partition: current lag, basis, Burrow status, completeness, traffic, owned.

    A single window pass over the full history and a single aggregation: the run-start
    (first time the current offset was seen) needs all samples; every Burrow rule only
    looks at entries inside the window, which the ``entry`` flag selects.
    """
    w = Window.partitionBy(*TP).orderBy("sample_idx")
    w_before = w.rowsBetween(Window.unboundedPreceding, -1)
    pos, lag, ts = F.col("position"), F.col("lag"), F.col("ts_ms")
    prev_row_pos = F.lag(pos).over(w)
    changed = pos.isNotNull() & (prev_row_pos.isNull() | (pos != prev_row_pos))
    entry = (F.col("sample_idx") >= F.lit(max(n_samples - window, 0))) & pos.isNotNull()
    rows = (
        lagged.withColumn("entry", entry)
        .withColumn("run_start", F.max(F.when(changed, ts)).over(w))
        .withColumn("prev_pos", F.last(F.when(F.col("entry"), pos), ignorenulls=True).over(w_before))
        .withColumn("prev_lag", F.last(F.when(F.col("entry"), lag), ignorenulls=True).over(w_before))
    )
    is_entry = F.col("entry")

    def any_entry(cond: Column) -> Column:
        return F.coalesce(F.bool_or(is_entry & cond), F.lit(False))

    per_partition = rows.groupBy(*TP).agg(
        F.max_by(lag, "sample_idx").alias("lag"),
        F.max_by("basis", "sample_idx").alias("basis"),
        F.count(F.when(is_entry, 1)).alias("n_entries"),
        any_entry(lag == 0).alias("lag_was_zero"),
        any_entry(pos < F.col("prev_pos")).alias("rewound"),
        any_entry(pos != F.col("prev_pos")).alias("moved"),
        any_entry(lag < F.col("prev_lag")).alias("lag_decreased"),
        F.min(F.when(is_entry, ts)).alias("first_ts"),
        F.max(F.when(is_entry, ts)).alias("last_ts"),
        F.min(F.when(is_entry, F.col("run_start"))).alias("first_run"),
        F.max(F.when(is_entry, F.col("run_start"))).alias("last_run"),
        F.max_by("log_end", "sample_idx").alias("last_log_end"),
        F.min_by("log_end", "sample_idx").alias("first_log_end"),
        F.max("ws_offset").alias("ws_offset"),
    )
    live = F.coalesce(F.col("live"), F.lit(False))
    first_commit = F.when(live, F.col("first_ts")).otherwise(F.col("first_run"))
    last_commit = F.when(live, F.col("last_ts")).otherwise(F.col("last_run"))
    stopped = (F.lit(now_ms) - last_commit) > (last_commit - first_commit)
    judged = (F.col("lag") > 0) & (F.col("n_entries") > 0) & ~F.col("lag_was_zero")
    status = F.when(
        judged,
        F.when(F.col("rewound"), PartitionStatus.REWIND.value)
        .when(stopped, PartitionStatus.STOP.value)
        .when(~F.col("moved"), PartitionStatus.STALL.value)
        .when(~F.col("lag_decreased"), PartitionStatus.WARN.value)
        .otherwise(PartitionStatus.OK.value),
    ).otherwise(PartitionStatus.OK.value)
    start = F.coalesce(F.col("ws_offset"), F.col("first_log_end"))
    return per_partition.join(owners, TP, "left").select(
        *TP,
        "lag",
        "basis",
        status.alias("status"),
        (F.col("n_entries") / F.lit(float(window))).alias("complete"),
        F.greatest(F.col("last_log_end") - start, F.lit(0).cast("long")).alias("traffic"),
        F.col("live").isNotNull().alias("owned"),
    )


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


def member_loads(assignments: DataFrame, members: DataFrame) -> DataFrame:
    """Partitions held per member, members holding nothing included (they count in the mean)."""
    counts = assignments.groupBy("member_id").agg(F.count(F.lit(1)).alias("partitions"))
    return members.join(counts, "member_id", "left").select(
        "member_id", "client_id", "task_id", F.coalesce(F.col("partitions"), F.lit(0)).alias("partitions")
    )


def partition_frame(spark: SparkSession, tables: Tables, window: int = 10) -> DataFrame:
    """The per-partition table alone (what tests compare row by row with the reference)."""
    frames = load(spark, tables)
    lagged = with_lag(frames["samples"], frames["window_start"])
    owners = live_owners(frames["assignments"], frames["members"])
    return partition_table(lagged, owners, tables.n_samples, window, tables.now_ms)


def compute(spark: SparkSession, tables: Tables, window: int = 10, top_n: int = 20) -> MetricResults:
    """Runs every metric on Spark and collects the bounded summaries."""
    frames = load(spark, tables)
    lagged = with_lag(frames["samples"], frames["window_start"])
    owners = live_owners(frames["assignments"], frames["members"])
    parts = partition_table(lagged, owners, tables.n_samples, window, tables.now_ms).cache()
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
    members: list[MemberLoad] = []
    if tables.owners_known:
        loads = member_loads(frames["assignments"], frames["members"]).orderBy(F.desc("partitions"), "member_id")
        members = [
            MemberLoad(
                member_id=r["member_id"],
                client_id=r["client_id"],
                task_id=r["task_id"],
                partitions=int(r["partitions"]),
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
    )


def _partition_lag(row: Any) -> PartitionLag:
    return PartitionLag(
        topic=row["topic"],
        partition=int(row["partition"]),
        lag=int(row["lag"]),
        basis=row["basis"],
        status=row["status"],
        complete=float(row["complete"]),
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
