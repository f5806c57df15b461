"""Lag, Burrow status, time lag and rates on Spark, as one SQL statement over the samples.

Why ~500 lines in one module: it is the whole Spark side of the job, kept beside its
definitions (this docstring), which ``reference`` follows step by step in pandas.

Every per-partition computation is a window function or an aggregation keyed by
``(topic, partition)``, over one shuffle and sort of the samples; nothing loops over
partitions in Python, so the work scales with partitions x samples across executors. One
action brings back one row per partition and the lag series, as Arrow; ``summaries`` reduces
them on the driver to the bounded figures (top N lists, per-topic stats, per-member counts).
``reference`` computes the same numbers with pandas; tests hold the two equal.

The plan is written as one SQL statement, assembled from the fragments below, not with the
Column API: every Column operation is a py4j round trip to the JVM, and the same plan built
that way took about 3,000 of them, 0.2-0.3 s of every check whatever its size.

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
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from connectops_check import summaries
from connectops_check.frames import Tables
from connectops_check.results import LagBasis, MetricResults, PartitionStatus

#: the partition key, as SQL (``partition`` and ``offset`` are SQL keywords: always quoted)
TP = "topic, `partition`"
#: the lag's basis travels as its index here: a string in the per-partition aggregation's
#: buffer makes Spark fall back from its generated hash aggregation to a sort-based one
BASES = list(LagBasis)
#: the per-partition table's columns, in order (with many samples ``compute`` unions the lag
#: series beside them)
PART_COLUMNS = (
    "topic",
    "partition",
    "lag",
    "basis",
    "status",
    "complete",
    "traffic",
    "owned",
    "time_lag_s",
    "consume_rate",
    "produce_rate",
    "eta_s",
)
#: the most samples whose lags the per-partition table carries for the lag series (``compute``)
SERIES_COLUMNS_MAX = 32

#: Spark's default Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch``)
ARROW_BATCH_ROWS_FLOOR = 10_000
BATCH_SIZE_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
LOCAL_RELATION_CONF = "spark.sql.execution.arrow.localRelationThreshold"


def _str(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _double(value: float) -> str:
    """A SQL double literal, exact (``0.5`` alone is a DECIMAL in Spark SQL)."""
    return f"CAST({_str(repr(float(value)))} AS DOUBLE)"


def _long(value: int) -> str:
    return f"CAST({int(value)} AS BIGINT)"


def load(spark: SparkSession, tables: Tables) -> dict[str, DataFrame]:
    """The samples as a Spark DataFrame straight from Arrow (no pandas, no Python rows), each
    row carrying its partition's ``ws_offset`` and ``live`` (``partition_info``).

    Those two are joined here, with Arrow, not in the statement: each is one row per partition,
    and as views of their own, at 100,000 partitions, each was broadcast to the samples' scan by
    a job of its own that the scan waited for (~0.1 s, Spark UI). Side by side with the plan
    that joined them, the whole check went 1.81 -> 1.62 s at 100,000 partitions and 0.72 ->
    0.46 s at 1,000 (median of 3); the Arrow join costs ~0.03 s at 100,000.

    Each Arrow batch becomes one Spark partition, and Spark's default batch (10,000 rows) cut
    a million samples into 100 tasks on two cores: every stage before the shuffle paid 100
    tasks' overhead (measured: the window pass at 100,000 partitions 1.9 s, 0.8 s with 5).
    The samples are cut into two batches per core instead, never smaller than the default.

    Below ``spark.sql.execution.arrow.localRelationThreshold`` (48 MiB) Spark keeps Arrow data
    as a local relation, and its optimizer then evaluates the projection over it row by row
    on the driver (``ConvertToLocalRelation``): at 10,000 partitions that optimisation alone
    took 0.4-0.5 s of a check, the whole check without it 0.38 s (side by side, median of 5).
    So the samples are always a distributed relation, whatever their size.
    """
    samples = tables.samples.join(partition_info(tables), ["topic", "partition"], join_type="left outer")
    slices = 2 * max(spark.sparkContext.defaultParallelism, 1)
    rows = max(ARROW_BATCH_ROWS_FLOOR, math.ceil(samples.num_rows / slices))
    settings = {BATCH_SIZE_CONF: str(rows), LOCAL_RELATION_CONF: "0"}
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        return {"samples": spark.createDataFrame(samples)}
    finally:
        for key, before in previous.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)


def partition_info(tables: Tables) -> pa.Table:
    """``(topic, partition, ws_offset, live)``, one row per partition with either: the
    window-start offset, and whether some alive member holds the partition (null when no
    member holds it at all: ``owned`` in ``_partition_sql`` is ``live`` being known)."""
    alive = tables.members.select(["member_id", "alive"])
    held = tables.assignments.join(alive, "member_id", join_type="inner")
    live = held.group_by(["topic", "partition"], use_threads=False).aggregate([("alive", "any")])
    owners = live.select(["topic", "partition", "alive_any"]).rename_columns(["topic", "partition", "live"])
    return tables.window_start.join(owners, ["topic", "partition"], join_type="full outer")


def _lagged_sql() -> str:
    """Every (partition, sample) row of ``{samples}`` (``load``'s, with ``ws_offset`` and
    ``live``) with ``start`` (where the connector reads next, per ``basis``), ``lag`` and
    ``basis`` (an index into ``BASES``)."""
    start = "coalesce(position, log_start, ws_offset, CAST(0 AS BIGINT))"
    basis = (
        f"CASE WHEN position IS NOT NULL THEN {BASES.index(LagBasis.COMMITTED)}"
        f" WHEN log_start IS NOT NULL THEN {BASES.index(LagBasis.EARLIEST)}"
        f" WHEN ws_offset IS NOT NULL THEN {BASES.index(LagBasis.WINDOW_START)}"
        f" ELSE {BASES.index(LagBasis.OFFSET_ZERO)} END"
    )
    return (
        f"SELECT *, {start} AS start, greatest(log_end - {start}, CAST(0 AS BIGINT)) AS lag, {basis} AS basis"
        " FROM {samples}"
    )


def _window(order: str, frame: str = "") -> str:
    return f"OVER (PARTITION BY {TP} ORDER BY {order} {frame})"


def _ring_window(order: str) -> list[str]:
    """Burrow's per-entry comparisons as window columns over rows where ``entry`` marks the
    ring's commits (other rows, samples outside the ring or broker offsets, sit between them
    and are skipped): ``prev_off`` (the previous entry's offset), ``prev_lag`` (the previous
    entry's non-nil lag) and ``prev_max`` (the highest entry offset before this row).

    None reads another window column, so Spark evaluates them, and ``partition_table``'s own,
    in one Window operator over one sort: each extra operator re-buffers every row. All three
    frames grow from the partition's first row, which Spark updates once per row; a frame
    that runs to the partition's end (``CURRENT ROW AND UNBOUNDED FOLLOWING``) is evaluated
    again from each row, quadratic in the samples (``_ring_aggregates`` says how REWIND's
    recovery is read without one).
    """
    before = _window(order, "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING")
    off = "CASE WHEN entry THEN `offset` END"
    return [
        f"CASE WHEN entry THEN last({off}, true) {before} END AS prev_off",
        f"CASE WHEN entry THEN last(CASE WHEN entry THEN lag END, true) {before} END AS prev_lag",
        f"max({off}) {before} AS prev_max",
    ]


def _ring_aggregates(order: str, allowed_lag: int) -> list[str]:
    """What Burrow's rules read of a ring, aggregated over ``_ring_window``'s rows (the first
    and last entry's commit times, ``first_commit_ts`` and ``last_commit_ts``, are the
    caller's: they are derived differently from samples).

    REWIND's recovery (Burrow: some entry from the first drop on is back at the offset before
    the drop) as ``last_high_slot``, the last entry at or above every entry before it: the
    entries before the first drop never decrease, so the offset before the drop is the
    highest one before it, and the first entry after the drop that reaches it is at or above
    every entry before it; conversely any such entry after the drop reaches it. So the ring
    recovered exactly when ``last_high_slot`` comes after ``rewind_slot``.
    """
    slot = f"CASE WHEN entry THEN {order} END"
    off = "CASE WHEN entry THEN `offset` END"
    # the first drop
    rewind_slot = f"CASE WHEN entry AND `offset` < prev_off THEN {order} END"
    high_slot = f"CASE WHEN entry AND (prev_max IS NULL OR `offset` >= prev_max) THEN {order} END"
    return [
        f"count({slot}) AS n_entries",
        f"max_by(`offset`, {slot}) AS last_off",
        f"min({off}) AS min_off",
        f"max({off}) AS max_off",
        f"coalesce(bool_or(entry AND lag <= {int(allowed_lag)}), false) AS lag_allowed_seen",
        "coalesce(bool_or(entry AND lag < prev_lag), false) AS lag_decreased",
        f"min({rewind_slot}) AS rewind_slot",
        f"max({high_slot}) AS last_high_slot",
        "min(broker_le) AS min_broker",
    ]


def _status(current_lag: str, now_ms: int, window: int, allowed_lag: int, minimum_complete: float) -> tuple[str, str]:
    """Burrow's status and ``complete`` from ``_ring_aggregates``' columns (null when a
    partition has no ring rows at all)."""
    n = "coalesce(n_entries, 0)"
    complete = f"({n} / {_double(window)})"
    stopped = f"({_long(now_ms)} - last_commit_ts) > (last_commit_ts - first_commit_ts)"
    recent_lag_zero = "coalesce(min_broker <= last_off, false)"
    unrecovered = "(rewind_slot IS NOT NULL AND NOT coalesce(last_high_slot > rewind_slot, false))"
    always_lagging = "NOT lag_allowed_seen"
    ok = _str(PartitionStatus.OK.value)
    status = (
        f"CASE WHEN {n} = 0 OR {complete} < {_double(minimum_complete)} THEN {ok}"
        f" WHEN {current_lag} <= {int(allowed_lag)} THEN {ok}"
        f" WHEN {stopped} AND NOT {recent_lag_zero} THEN {_str(PartitionStatus.STOP.value)}"
        f" WHEN {unrecovered} THEN {_str(PartitionStatus.REWIND.value)}"
        f" WHEN {always_lagging} AND min_off = max_off THEN {_str(PartitionStatus.STALL.value)}"
        f" WHEN {always_lagging} AND NOT lag_decreased THEN {_str(PartitionStatus.WARN.value)}"
        f" ELSE {ok} END"
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
    none = "CAST(NULL AS BIGINT)"
    slot = "CASE WHEN entry THEN slot END"
    status, complete = _status("c.current_lag", now_ms, window, allowed_lag, minimum_complete)
    query = (
        f"WITH ring_rows AS ("
        f"SELECT topic, `partition`, CAST(slot AS BIGINT) AS slot, true AS entry,"
        f" CAST(`offset` AS BIGINT) AS `offset`, CAST(ts_ms AS BIGINT) AS commit_ts,"
        f" CAST(lag AS BIGINT) AS lag, {none} AS broker_le FROM {{entries}}"
        f" UNION ALL SELECT topic, `partition`, CAST(-1 AS BIGINT), false, {none}, {none}, {none},"
        f" CAST(log_end AS BIGINT) FROM {{broker}}"
        f"), ring AS ("
        f"SELECT {TP}, min_by(commit_ts, {slot}) AS first_commit_ts, max_by(commit_ts, {slot}) AS last_commit_ts,"
        f" {', '.join(_ring_aggregates('slot', allowed_lag))}"
        f" FROM (SELECT *, {', '.join(_ring_window('slot'))} FROM ring_rows) GROUP BY {TP}"
        f") SELECT c.topic, c.`partition`, {status} AS status, {complete} AS complete"
        f" FROM {{current}} c LEFT JOIN ring ON c.topic = ring.topic AND c.`partition` = ring.`partition`"
    )
    return entries.sparkSession.sql(query, entries=entries, broker=broker, current=current)


def _partition_sql(
    n_samples: int,
    window: int,
    now_ms: int,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
    series: bool = False,
) -> str:
    """One row per partition of ``lagged`` (``_lagged_sql``'s rows, ``_query``'s CTE): current
    lag, basis, Burrow status, completeness, traffic, owned, time lag, consume and produce
    rates, and the catch-up ETA;
    with ``series``, also each sample's lag (``lag_at_<sample_idx>``, null where the partition
    has no row at that sample), from which ``compute`` sums the lag series.

    One pass: the samples are shuffled and sorted by partition once; every per-sample
    comparison is a window column over that order and every per-partition figure (Burrow's
    ring included) one aggregation over it, so Spark plans one exchange of the samples.

    Burrow's ring of commits (the commit time is derived, see the module docstring): the last
    ``window`` samples that hold a position, each an entry at the sample time for a partition
    a live member holds, else at the first sample at which the current offset was seen. Its
    ring of broker offsets: the last ``window`` samples' log-ends.
    """
    lo = max(n_samples - window, 0)
    in_ring = f"sample_idx >= {lo}"
    series_samples = range(n_samples) if series else range(0)
    rows = (
        f"SELECT {TP}, sample_idx, ts_ms, log_end, position, ws_offset, live, start, lag, basis,"
        f" ({in_ring} AND position IS NOT NULL) AS entry, position AS `offset`,"
        f" CASE WHEN {in_ring} THEN log_end END AS broker_le FROM lagged"
    )
    # the offset the connector reads next, on the lag's basis (a sink without commits starts at
    # the log-start): what the time lag looks up and the consume rate follows
    windowed = (
        f"SELECT *, lag(log_end) {_window('sample_idx')} AS prev_le,"
        f" lag(ts_ms) {_window('sample_idx')} AS prev_ts,"
        f" lag(position) {_window('sample_idx')} AS prev_pos,"
        f" last(start) {_window('sample_idx', 'ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING')} AS c,"
        f" {', '.join(_ring_window('sample_idx'))} FROM ({rows})"
    )
    # the newest (previous, this) log-end segment that holds the last committed offset
    holds = "CASE WHEN prev_le <= c AND c <= log_end THEN sample_idx END"
    # Derived commit times (module docstring): a live owner's entries commit at their samples;
    # otherwise an entry's commit is where its run of one unchanged offset began. Rows after
    # the last entry hold no offset, and rows between the ring's start and its first entry
    # neither, so the last entry's run began at the partition's last change, and the first
    # entry's at itself when it changed, else at the last change before the ring. Both forms
    # are aggregated, and the owner's liveness picks one per partition.
    changed = "(position IS NOT NULL AND (prev_pos IS NULL OR position != prev_pos))"
    entry_slot = "CASE WHEN entry THEN sample_idx END"
    aggregates = [
        "max_by(lag, sample_idx) AS lag",
        "max_by(basis, sample_idx) AS basis_code",
        "max_by(log_end, sample_idx) AS last_log_end",
        "min_by(log_end, sample_idx) AS first_log_end",
        "max(ws_offset) AS ws_offset",
        "coalesce(max(live), false) AS live",
        "count(live) > 0 AS owned",
        "count(1) AS n_points",
        "min(ts_ms) AS first_ts",
        "max(ts_ms) AS last_ts",
        "max(c) AS c",
        f"max_by(prev_le, {holds}) AS l_le",
        f"max_by(prev_ts, {holds}) AS l_ts",
        f"max_by(log_end, {holds}) AS r_le",
        f"max_by(ts_ms, {holds}) AS r_ts",
        "min_by(start, sample_idx) AS first_pos",
        f"min_by(ts_ms, {entry_slot}) AS first_entry_ts",
        f"max_by(ts_ms, {entry_slot}) AS last_entry_ts",
        f"coalesce(min_by(CASE WHEN {changed} THEN ts_ms END, {entry_slot}),"
        f" max_by(ts_ms, CASE WHEN {changed} AND sample_idx < {lo} THEN sample_idx END)) AS first_run_ts",
        f"max_by(ts_ms, CASE WHEN {changed} THEN sample_idx END) AS last_run_ts",
        *_ring_aggregates("sample_idx", allowed_lag),
        *(f"sum(CASE WHEN sample_idx = {i} THEN lag END) AS {_series_column(i)}" for i in series_samples),
    ]
    per_partition = f"SELECT {TP}, {', '.join(aggregates)} FROM ({windowed}) GROUP BY {TP}"
    joined = (
        "SELECT *,"
        " CASE WHEN live THEN first_entry_ts ELSE first_run_ts END AS first_commit_ts,"
        " CASE WHEN live THEN last_entry_ts ELSE last_run_ts END AS last_commit_ts"
        f" FROM ({per_partition})"
    )
    status, complete = _status("lag", now_ms, window, allowed_lag, minimum_complete)
    bases = ", ".join(_str(b.value) for b in BASES)
    return (
        f"SELECT {TP}, lag, element_at(array({bases}), basis_code + 1) AS basis, {status} AS status,"
        f" {complete} AS complete,"
        f" greatest(last_log_end - coalesce(ws_offset, first_log_end), CAST(0 AS BIGINT)) AS traffic, owned,"
        f" {', '.join(_time_lag_and_rates(now_ms))}"
        f"{''.join(f', {_series_column(i)}' for i in series_samples)} FROM ({joined})"
    )


def _series_column(sample_idx: int) -> str:
    return f"lag_at_{int(sample_idx)}"


def _time_lag_and_rates(now_ms: int) -> list[str]:
    """Kafka Lag Exporter's time lag, the rates and the ETA, from ``_partition_sql``'s aggregates.

    Time lag: the offset the connector reads next ``c`` (its committed offset, else the lag's
    basis: log-start, where a sink without commits starts) looked up on the (log-end, sample
    time) points; interpolated on the newest segment that holds it, else extrapolated along
    the first and last points (``LookupTable.lookup``); ``now - predicted time``, floored at 0.
    Zero when ``c`` is at or past the last log-end; unknown (null) with fewer than two points
    or when the log-end never moved (nothing to extrapolate along). The consume rate follows
    ``c`` over the samples, so a connector that does not commit consumes at 0 records/s.
    """

    def pick(found: str, otherwise: str) -> str:
        return f"(CASE WHEN r_le IS NOT NULL THEN {found} ELSE {otherwise} END)"

    l_le, l_ts = pick("l_le", "first_log_end"), pick("l_ts", "first_ts")
    r_le, r_ts = pick("r_le", "last_log_end"), pick("r_ts", "last_ts")
    dy = f"CAST({r_le} - {l_le} AS DOUBLE)"
    predicted = f"({r_ts} - CAST({r_le} - c AS DOUBLE) * CAST({r_ts} - {l_ts} AS DOUBLE) / {dy})"
    null = "CAST(NULL AS DOUBLE)"
    time_lag = (
        f"CASE WHEN c IS NULL THEN {null} WHEN c >= last_log_end THEN {_double(0.0)}"
        f" WHEN n_points < 2 OR {dy} = 0 THEN {null}"
        f" ELSE greatest(({_double(now_ms)} - {predicted}) / {_double(1000.0)}, {_double(0.0)}) END"
    )
    span_s = f"(CAST(last_ts - first_ts AS DOUBLE) / {_double(1000.0)})"
    produce = f"(CASE WHEN {span_s} > 0 THEN CAST(last_log_end - first_log_end AS DOUBLE) / {span_s} END)"
    # the position (``c`` at the last sample, ``first_pos`` at the first) is known at every
    # sample: the lag's basis never leaves it null
    consume = f"(CASE WHEN {span_s} > 0 THEN CAST(c - first_pos AS DOUBLE) / {span_s} END)"
    return [
        f"{time_lag} AS time_lag_s",
        f"{consume} AS consume_rate",
        f"{produce} AS produce_rate",
        f"{eta_seconds('lag', consume, produce)} AS eta_s",
    ]


def eta_seconds(lag: str, consume: str, produce: str) -> str:
    """Time to catch up: 0 without lag, ``lag / (consume - produce)`` while the consumer gains,
    else null (it is not catching up, or the rates are unknown)."""
    return (
        f"(CASE WHEN {lag} = 0 THEN {_double(0.0)}"
        f" WHEN {consume} > {produce} THEN CAST({lag} AS DOUBLE) / ({consume} - {produce}) END)"
    )


def _query(frames: dict[str, DataFrame], body: str) -> DataFrame:
    """``body`` over the lagged samples, as one SQL statement.

    Why SQL text and not the Column API: each Column operation is a py4j round trip, and this
    plan took about 3,000 of them (0.2-0.3 s of every check, whatever its size); the statement
    is one. Only numbers (forced through ``int``/``float``) and this module's own constants are
    written into the text; the data arrive as views.
    """
    spark = frames["samples"].sparkSession
    query = f"WITH lagged AS ({_lagged_sql()}) {body}"
    # typed loosely on purpose: spark.sql's second parameter is ``args``, and mypy checks a
    # ``**dict[str, DataFrame]`` against it although no key is named so
    views: dict[str, Any] = dict(frames)
    return spark.sql(query, **views)


def partition_frame(
    spark: SparkSession, tables: Tables, window: int = 10, allowed_lag: int = 0, minimum_complete: float = 0.0
) -> DataFrame:
    """The per-partition table alone (what tests compare row by row with the reference)."""
    frames = load(spark, tables)
    return _query(frames, _partition_sql(tables.n_samples, window, tables.now_ms, allowed_lag, minimum_complete))


def compute(
    spark: SparkSession,
    tables: Tables,
    window: int = 10,
    top_n: int = 20,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> MetricResults:
    """Runs every metric on Spark in one action and summarises its answer on the driver.

    The lag series (the sum of lag per sample) comes back with the per-partition table. Up to
    ``SERIES_COLUMNS_MAX`` samples, each row carries its partition's lag at every sample,
    summed here column by column; as an aggregation of its own the series read the samples a
    second time, joined the window-start offsets again and shuffled (~1 s at 100k partitions
    and 10 samples, ~3 s at 1M). Beyond that many samples the extra aggregates cost more
    than that pass (at 50k partitions: 1.7 vs 2.7 s with 24 samples, 3.1 vs 3.6 s with 48,
    12.6 vs 7.3 s with 120, where Spark stops generating code for the aggregation), so the
    series is that aggregation, unioned under the table and told apart by ``sample_idx``.
    Each further action would be another job with a fixed scheduling cost; the summaries
    (``summaries``) read at most one row per partition.
    """
    frames = load(spark, tables)
    in_table = tables.n_samples <= SERIES_COLUMNS_MAX
    parts = _partition_sql(tables.n_samples, window, tables.now_ms, allowed_lag, minimum_complete, series=in_table)
    if in_table:
        table = _query(frames, parts).toArrow()
        columns = [_series_column(i) for i in range(tables.n_samples)]
        series = []
        for ts_ms, column in zip(tables.sample_ts, columns, strict=True):
            total = pc.sum(table[column]).as_py()  # null: no partition has this sample
            if total is not None:
                series.append((int(ts_ms), int(total)))
        return summaries.summarize(table.drop_columns(columns), series, tables, top_n)
    columns_sql = ", ".join(f"`{c}`" for c in PART_COLUMNS)
    nulls = ", ".join(f"NULL AS `{c}`" if c != "lag" else "sum(lag) AS lag" for c in PART_COLUMNS)
    body = (
        f"SELECT {columns_sql}, CAST(NULL AS INT) AS sample_idx, CAST(NULL AS BIGINT) AS ts_ms FROM ({parts})"
        f" UNION ALL SELECT {nulls}, sample_idx, ts_ms FROM lagged GROUP BY sample_idx, ts_ms"
    )
    table = _query(frames, body).toArrow()
    is_series = pc.is_valid(table["sample_idx"])
    series_rows = table.filter(is_series).select(["sample_idx", "ts_ms", "lag"]).sort_by("sample_idx").to_pylist()
    partition_rows = table.filter(pc.invert(is_series)).drop_columns(["sample_idx", "ts_ms"])
    return summaries.summarize(partition_rows, [(int(r["ts_ms"]), int(r["lag"])) for r in series_rows], tables, top_n)
