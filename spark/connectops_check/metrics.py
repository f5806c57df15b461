"""Lag, Burrow status, time lag and rates as Spark DataFrame transformations.

Why ~450 lines in one module: it is the whole Spark side of the job, kept beside its
definitions (this docstring), which ``reference`` follows step by step in pandas.

Every per-partition computation is a window function or an aggregation keyed by
``(topic, partition)``, over one shuffle and sort of the samples; nothing loops over
partitions in Python, so the work scales with partitions x samples across executors. One
action brings back one row per partition and the lag series, as Arrow; ``summaries`` reduces
them on the driver to the bounded figures (top N lists, per-topic stats, per-member counts).
``reference`` computes the same numbers with pandas; tests hold the two equal.

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
    (``partition_table``). A partition whose owner is alive (a group member, or MM2 task, holding
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

import math

import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from connectops_check import summaries
from connectops_check.frames import Tables
from connectops_check.results import LagBasis, MetricResults, PartitionStatus

TP = ["topic", "partition"]
#: the lag's basis travels as its index here: a string in the per-partition aggregation's
#: buffer makes Spark fall back from its generated hash aggregation to a sort-based one
BASES = list(LagBasis)


#: Spark's default Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch``)
ARROW_BATCH_ROWS_FLOOR = 10_000
BATCH_SIZE_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


def load(spark: SparkSession, tables: Tables) -> dict[str, DataFrame]:
    """Spark DataFrames straight from the Arrow tables (no pandas, no Python rows).

    Each Arrow batch becomes one Spark partition, and Spark's default batch (10,000 rows) cut
    a million samples into 100 tasks on two cores: every stage before the shuffle paid 100
    tasks' overhead (measured: the window pass at 100,000 partitions 1.9 s, 0.8 s with 5).
    The samples are cut into two batches per core instead, never smaller than the default.
    """
    slices = 2 * max(spark.sparkContext.defaultParallelism, 1)
    rows = max(ARROW_BATCH_ROWS_FLOOR, math.ceil(tables.samples.num_rows / slices))
    previous = spark.conf.get(BATCH_SIZE_CONF, str(ARROW_BATCH_ROWS_FLOOR))
    spark.conf.set(BATCH_SIZE_CONF, str(rows))
    try:
        samples = spark.createDataFrame(tables.samples)
    finally:
        spark.conf.set(BATCH_SIZE_CONF, previous or str(ARROW_BATCH_ROWS_FLOOR))
    return {
        "samples": samples,
        "window_start": spark.createDataFrame(tables.window_start),
        "assignments": spark.createDataFrame(tables.assignments),
        "members": spark.createDataFrame(tables.members),
    }


def with_lag(samples: DataFrame, window_start: DataFrame) -> DataFrame:
    """Adds ``ws_offset``, ``start`` (where the connector reads next, per ``basis``), ``lag``
    and ``basis`` to every (partition, sample) row."""
    pos, log_start, ws = F.col("position"), F.col("log_start"), F.col("ws_offset")
    basis = (
        F.when(pos.isNotNull(), BASES.index(LagBasis.COMMITTED))
        .when(log_start.isNotNull(), BASES.index(LagBasis.EARLIEST))
        .when(ws.isNotNull(), BASES.index(LagBasis.WINDOW_START))
        .otherwise(BASES.index(LagBasis.OFFSET_ZERO))
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


def _ring_window(order: str) -> list[Column]:
    """Burrow's per-entry comparisons as window columns over rows where ``entry`` marks the
    ring's commits (other rows, samples outside the ring or broker offsets, sit between them
    and are skipped): ``prev_off`` (the previous entry's offset), ``prev_lag`` (the previous
    entry's non-nil lag) and ``suffix_max`` (the highest entry offset from this row on).

    None reads another window column, so Spark evaluates them, and ``partition_table``'s own,
    in one Window operator over one sort: each extra operator re-buffers every row.
    """
    w = Window.partitionBy(*TP).orderBy(order)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    after = w.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    entry = F.col("entry")
    off = F.when(entry, F.col("offset"))
    return [
        F.when(entry, F.last(off, ignorenulls=True).over(before)).alias("prev_off"),
        F.when(entry, F.last(F.when(entry, F.col("lag")), ignorenulls=True).over(before)).alias("prev_lag"),
        F.max(off).over(after).alias("suffix_max"),
    ]


def _ring_aggregates(order: str, allowed_lag: int) -> list[Column]:
    """What Burrow's rules read of a ring, aggregated over ``_ring_window``'s rows (the first
    and last entry's commit times, ``first_commit_ts`` and ``last_commit_ts``, are the
    caller's: they are derived differently from samples)."""
    entry = F.col("entry")
    slot = F.when(entry, F.col(order))
    off = F.when(entry, F.col("offset"))
    lag = F.col("lag")
    # the first drop: everything REWIND needs is read at its row
    rewind_slot = F.when(entry & (F.col("offset") < F.col("prev_off")), F.col(order))

    def any_of(cond: Column) -> Column:
        return F.coalesce(F.bool_or(cond), F.lit(False))

    return [
        F.count(slot).alias("n_entries"),
        F.max_by("offset", slot).alias("last_off"),
        F.min(off).alias("min_off"),
        F.max(off).alias("max_off"),
        any_of(entry & (lag <= F.lit(allowed_lag))).alias("lag_allowed_seen"),
        any_of(entry & (lag < F.col("prev_lag"))).alias("lag_decreased"),
        F.min(rewind_slot).alias("rewind_slot"),
        F.min_by("prev_off", rewind_slot).alias("before_rewind"),
        F.min_by("suffix_max", rewind_slot).alias("after_rewind_max"),
        F.min("broker_le").alias("min_broker"),
    ]


def _status(
    current_lag: Column, now_ms: int, window: int, allowed_lag: int, minimum_complete: float
) -> tuple[Column, Column]:
    """Burrow's status and ``complete`` from ``_ring_aggregates``' columns (null when a
    partition has no ring rows at all)."""
    n = F.coalesce(F.col("n_entries"), F.lit(0))
    complete = n / F.lit(float(window))
    last_ts, first_ts = F.col("last_commit_ts"), F.col("first_commit_ts")
    stopped = (F.lit(now_ms) - last_ts) > (last_ts - first_ts)
    recent_lag_zero = F.coalesce(F.col("min_broker") <= F.col("last_off"), F.lit(False))
    unrecovered = F.col("rewind_slot").isNotNull() & ~(F.col("after_rewind_max") >= F.col("before_rewind"))
    always_lagging = ~F.col("lag_allowed_seen")
    status = (
        F.when((n == 0) | (complete < F.lit(minimum_complete)), PartitionStatus.OK.value)
        .when(current_lag <= F.lit(allowed_lag), PartitionStatus.OK.value)
        .when(stopped & ~recent_lag_zero, PartitionStatus.STOP.value)
        .when(unrecovered, PartitionStatus.REWIND.value)
        .when(always_lagging & (F.col("min_off") == F.col("max_off")), PartitionStatus.STALL.value)
        .when(always_lagging & ~F.col("lag_decreased"), PartitionStatus.WARN.value)
        .otherwise(PartitionStatus.OK.value)
    )
    return status, complete


def burrow_status(
    entries: DataFrame,
    broker: DataFrame,
    current: DataFrame,
    now_ms: int,
    window: int,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> DataFrame:
    """Burrow's ``evaluatePartitionStatus`` + ``calculatePartitionStatus`` for every partition,
    on explicit rings (Burrow's own test table runs through this), by the same window and
    aggregations ``partition_table`` applies to the samples.

    ``entries``: ``(topic, partition, slot, offset, ts_ms, lag)`` commits in ring order (``lag``
    may be null, skipped as Burrow skips nil lags); ``broker``: ``(topic, partition,
    log_end)``; ``current``: ``(topic, partition, current_lag)``, one row per partition to
    judge. Returns ``(topic, partition, status, complete)`` for every row of ``current``.
    """
    none = F.lit(None).cast("long")
    commits = entries.select(
        *TP,
        F.col("slot").cast("long").alias("slot"),
        F.lit(True).alias("entry"),
        F.col("offset").cast("long").alias("offset"),
        F.col("ts_ms").cast("long").alias("commit_ts"),
        F.col("lag").cast("long").alias("lag"),
        none.alias("broker_le"),
    )
    offsets = broker.select(
        *TP,
        F.lit(-1).cast("long").alias("slot"),
        F.lit(False).alias("entry"),
        none.alias("offset"),
        none.alias("commit_ts"),
        none.alias("lag"),
        F.col("log_end").cast("long").alias("broker_le"),
    )
    slot = F.when(F.col("entry"), F.col("slot"))
    ring = (
        commits.unionByName(offsets)
        .select("*", *_ring_window("slot"))
        .groupBy(*TP)
        .agg(
            F.min_by("commit_ts", slot).alias("first_commit_ts"),
            F.max_by("commit_ts", slot).alias("last_commit_ts"),
            *_ring_aggregates("slot", allowed_lag),
        )
    )
    status, complete = _status(F.col("current_lag"), now_ms, window, allowed_lag, minimum_complete)
    return current.join(ring, TP, "left").select(*TP, status.alias("status"), complete.alias("complete"))


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
    time lag, consume and produce rates, and the catch-up ETA.

    One pass: the samples are shuffled and sorted by partition once; every per-sample
    comparison is a window column over that order and every per-partition figure (Burrow's
    ring included) one aggregation over it, so Spark plans one exchange of the samples.

    Burrow's ring of commits (the commit time is derived, see the module docstring): the last
    ``window`` samples that hold a position, each an entry at the sample time for a partition
    a live member holds, else at the first sample at which the current offset was seen. Its
    ring of broker offsets: the last ``window`` samples' log-ends.
    """
    w = Window.partitionBy(*TP).orderBy("sample_idx")
    w_all = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    # the offset the connector reads next, on the lag's basis (a sink without commits starts at
    # the log-start): what the time lag looks up and the consume rate follows
    pos, le, ts, idx = F.col("start"), F.col("log_end"), F.col("ts_ms"), F.col("sample_idx")
    committed = F.col("position")
    lo = max(n_samples - window, 0)
    in_ring = idx >= F.lit(lo)
    rows = lagged.select(
        *TP,
        "sample_idx",
        "ts_ms",
        "log_end",
        "position",
        "ws_offset",
        "start",
        "lag",
        "basis",
        (in_ring & committed.isNotNull()).alias("entry"),
        committed.alias("offset"),
        F.when(in_ring, le).alias("broker_le"),
    ).select(
        "*",
        F.lag(le).over(w).alias("prev_le"),
        F.lag(ts).over(w).alias("prev_ts"),
        F.lag(committed).over(w).alias("prev_pos"),
        F.last(pos).over(w_all).alias("c"),
        *_ring_window("sample_idx"),
    )
    # the newest (previous, this) log-end segment that holds the last committed offset
    holds = F.when((F.col("prev_le") <= F.col("c")) & (F.col("c") <= le), idx)
    # Derived commit times (module docstring): a live owner's entries commit at their samples;
    # otherwise an entry's commit is where its run of one unchanged offset began. Rows after
    # the last entry hold no offset, and rows between the ring's start and its first entry
    # neither, so the last entry's run began at the partition's last change, and the first
    # entry's at itself when it changed, else at the last change before the ring. Both forms
    # are aggregated and the owners joined to the aggregate: one row per partition, not one per
    # sample.
    changed = committed.isNotNull() & (F.col("prev_pos").isNull() | (committed != F.col("prev_pos")))
    entry_slot = F.when(F.col("entry"), idx)
    per_partition = rows.groupBy(*TP).agg(
        F.max_by("lag", "sample_idx").alias("lag"),
        F.max_by("basis", "sample_idx").alias("basis_code"),
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
        F.min_by(pos, idx).alias("first_pos"),
        F.min_by(ts, entry_slot).alias("first_entry_ts"),
        F.max_by(ts, entry_slot).alias("last_entry_ts"),
        F.coalesce(
            F.min_by(F.when(changed, ts), entry_slot), F.max_by(ts, F.when(changed & (idx < F.lit(lo)), idx))
        ).alias("first_run_ts"),
        F.max_by(ts, F.when(changed, idx)).alias("last_run_ts"),
        *_ring_aggregates("sample_idx", allowed_lag),
    )
    live = F.coalesce(F.col("live"), F.lit(False))
    per_partition = per_partition.join(owners, TP, "left").select(
        "*",
        F.col("live").isNotNull().alias("owned"),
        F.when(live, F.col("first_entry_ts")).otherwise(F.col("first_run_ts")).alias("first_commit_ts"),
        F.when(live, F.col("last_entry_ts")).otherwise(F.col("last_run_ts")).alias("last_commit_ts"),
    )
    status, complete = _status(F.col("lag"), now_ms, window, allowed_lag, minimum_complete)
    start = F.coalesce(F.col("ws_offset"), F.col("first_log_end"))
    return per_partition.select(
        *TP,
        "lag",
        F.element_at(F.array(*[F.lit(b.value) for b in BASES]), F.col("basis_code") + 1).alias("basis"),
        status.alias("status"),
        complete.alias("complete"),
        F.greatest(F.col("last_log_end") - start, F.lit(0).cast("long")).alias("traffic"),
        "owned",
        *_time_lag_and_rates(now_ms),
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
    # the position (``c`` at the last sample, ``first_pos`` at the first) is known at every
    # sample: the lag's basis never leaves it null
    consume = F.when(span_s > 0, (c - F.col("first_pos")).cast("double") / span_s)
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
    """Runs every metric on Spark in one action and summarises its answer on the driver.

    The per-partition table and the lag series (the sum of lag per sample) come back as one
    Arrow collection: a union of the two, told apart by ``sample_idx`` (null on partition
    rows). Each further action would be another job with a fixed scheduling cost; the
    summaries (``summaries``) read at most one row per partition.
    """
    frames = load(spark, tables)
    lagged = with_lag(frames["samples"], frames["window_start"])
    owners = live_owners(frames["assignments"], frames["members"])
    parts = partition_table(lagged, owners, tables.n_samples, window, tables.now_ms, allowed_lag, minimum_complete)
    series = lagged.groupBy("sample_idx", "ts_ms").agg(F.sum("lag").alias("lag"))
    table = parts.unionByName(series, allowMissingColumns=True).toArrow()
    is_series = pc.is_valid(table["sample_idx"])
    series_rows = table.filter(is_series).select(["sample_idx", "ts_ms", "lag"]).sort_by("sample_idx").to_pylist()
    partition_rows = table.filter(pc.invert(is_series)).drop_columns(["sample_idx", "ts_ms"])
    return summaries.summarize(partition_rows, [(int(r["ts_ms"]), int(r["lag"])) for r in series_rows], tables, top_n)
