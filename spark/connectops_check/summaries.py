"""The check's bounded summaries, read from the per-partition table with Arrow's kernels.

Why here and not as more Spark jobs: the Spark side (``metrics``) does everything whose size is
partitions x samples (lag per sample, Burrow's rings, time lag) and hands back one row per
partition, and the lag series, in a single Arrow collection. Every figure below reads that
table once on the driver, in Arrow's C++ kernels and numpy. Each one as its own Spark action
cost a job's fixed scheduling (six jobs: about 3 s of a 1,000-partition check on two cores)
to aggregate rows the driver was about to hold anyway. ``reference`` computes the same numbers
with pandas, independently; tests hold the two equal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
#: statuses by ascending severity, so a status's index in it orders like its severity
_BY_SEVERITY = pa.array(sorted(SEVERITY, key=SEVERITY.__getitem__), pa.string())


def summarize(parts: pa.Table, series: list[tuple[int, int]], tables: Tables, top_n: int) -> MetricResults:
    """``parts``: ``metrics.partition_table``'s columns, one row per partition."""
    parts = parts.cast(_narrow_strings(parts.schema))
    n = parts.num_rows
    lag = parts["lag"]
    owned = int(pc.sum(parts["owned"].cast(pa.int64())).as_py() or 0)
    return MetricResults(
        partitions=n,
        samples=tables.n_samples,
        total_lag=int(pc.sum(lag).as_py() or 0),
        max_partition_lag=int(pc.max(lag).as_py() or 0),
        lag_series=series,
        basis_counts=_counts(parts["basis"], [b.value for b in LagBasis]),
        status_counts=_counts(parts["status"], [s.value for s in PartitionStatus]),
        top_lag=_top(parts, top_n, [("lag", "descending"), ("topic", "ascending"), ("partition", "ascending")]),
        non_ok=_top(
            _with_severity(parts.filter(pc.not_equal(parts["status"], PartitionStatus.OK.value))),
            top_n,
            [("severity", "descending"), ("lag", "descending"), ("topic", "ascending"), ("partition", "ascending")],
        ),
        traffic_topics=traffic_stats(parts["topic"], parts["traffic"]),
        traffic_overall=_traffic(ALL_TOPICS, np.asarray(parts["traffic"], dtype=np.int64)) if n else None,
        members=member_loads(tables, parts) if tables.owners_known else [],
        unassigned_partitions=n - owned if tables.owners_known else None,
        complete_partitions=int(pc.sum(pc.greater_equal(parts["complete"], 1.0).cast(pa.int64())).as_py() or 0),
        topic_lags=topic_lags(parts),
        overall_lag=_topic_lag(ALL_TOPICS, parts) if n else None,
    )


def _narrow_strings(schema: pa.Schema) -> pa.Schema:
    """Spark may hand strings over as ``large_string``; joins with the input tables want ``string``."""
    return pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(f.type) else f for f in schema])


def _counts(column: pa.ChunkedArray, order: list[str]) -> dict[str, int]:
    found = {v["values"]: v["counts"] for v in pc.value_counts(column).to_pylist()}
    return {k: int(found[k]) for k in order if found.get(k)}


def _with_severity(parts: pa.Table) -> pa.Table:
    return parts.append_column("severity", pc.index_in(parts["status"], value_set=_BY_SEVERITY))


def _top(parts: pa.Table, k: int, keys: list[tuple[str, str]]) -> list[PartitionLag]:
    """The first ``k`` rows by ``keys`` (topic and partition among them: no two rows tie)."""
    if k <= 0 or parts.num_rows == 0:
        return []
    top = parts.take(pc.select_k_unstable(parts, k=min(k, parts.num_rows), sort_keys=keys))
    top = top.take(pc.sort_indices(top, sort_keys=keys))
    return [_partition_lag(r) for r in top.to_pylist()]


def traffic_stats(topic: pa.ChunkedArray, traffic: pa.ChunkedArray) -> list[TrafficStats]:
    """Per topic, by topic name (see ``metrics``' docstring for the figures)."""
    if len(topic) == 0:
        return []
    by = pa.table({"topic": topic, "traffic": traffic})
    by = by.take(pc.sort_indices(by, sort_keys=[("topic", "ascending"), ("traffic", "ascending")]))
    names = by["topic"].combine_chunks()
    values = np.asarray(by["traffic"], dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, np.asarray(pc.not_equal(names[1:], names[:-1]))])
    ends = np.r_[starts[1:], len(values)]
    return [_traffic(names[s].as_py(), values[s:e]) for s, e in zip(starts, ends, strict=True)]


def _traffic(topic: str, values: np.ndarray[Any, np.dtype[np.int64]]) -> TrafficStats:
    """One group's figures; ``values`` need not be sorted."""
    x = np.sort(values).astype(np.float64)
    n, total = len(x), int(values.sum())
    mean = total / n
    has_traffic = total > 0
    sum_ix = float(np.dot(np.arange(1, n + 1, dtype=np.float64), x))
    return TrafficStats(
        topic=topic,
        partitions=n,
        total=total,
        mean=mean,
        max=int(values.max()),
        min=int(values.min()),
        max_over_mean=float(values.max()) / mean if has_traffic else None,
        cv=float(x.std()) / mean if has_traffic else None,
        gini=2.0 * sum_ix / (n * total) - (n + 1.0) / n if has_traffic else None,
    )


def topic_lags(parts: pa.Table) -> list[TopicLag]:
    """Per topic, by topic name."""
    if parts.num_rows == 0:
        return []
    grouped = parts.group_by("topic").aggregate(
        [
            ("lag", "count"),
            ("lag", "sum"),
            ("time_lag_s", "max"),
            ("consume_rate", "count"),
            ("consume_rate", "sum"),
            ("produce_rate", "count"),
            ("produce_rate", "sum"),
        ]
    )
    rows = sorted(grouped.to_pylist(), key=lambda r: str(r["topic"]))
    return [
        _lag_figures(
            r["topic"],
            r["lag_count"],
            r["lag_sum"],
            r["time_lag_s_max"],
            (r["consume_rate_count"], r["consume_rate_sum"]),
            (r["produce_rate_count"], r["produce_rate_sum"]),
        )
        for r in rows
    ]


def _topic_lag(topic: str, parts: pa.Table) -> TopicLag:
    def rate(name: str) -> tuple[int, Any]:
        return int(pc.count(parts[name]).as_py()), pc.sum(parts[name]).as_py()

    return _lag_figures(
        topic,
        parts.num_rows,
        pc.sum(parts["lag"]).as_py(),
        pc.max(parts["time_lag_s"]).as_py(),
        rate("consume_rate"),
        rate("produce_rate"),
    )


def _lag_figures(
    topic: str, n: int, lag: Any, time_lag: Any, consume: tuple[int, Any], produce: tuple[int, Any]
) -> TopicLag:
    """A rate is summed only when every partition's is known (``TopicLag``)."""
    consume_rate = None if consume[0] != n or consume[1] is None else float(consume[1])
    produce_rate = None if produce[0] != n or produce[1] is None else float(produce[1])
    total = int(lag or 0)
    eta: float | None = None
    if total == 0:
        eta = 0.0
    elif consume_rate is not None and produce_rate is not None and consume_rate > produce_rate:
        eta = total / (consume_rate - produce_rate)
    return TopicLag(
        topic=topic,
        partitions=n,
        lag=total,
        time_lag_s=None if time_lag is None else float(time_lag),
        consume_rate=consume_rate,
        produce_rate=produce_rate,
        eta_s=eta,
    )


def member_loads(tables: Tables, parts: pa.Table) -> list[MemberLoad]:
    """Every member, holding something or not, most partitions first (``metrics``' docstring)."""
    held = tables.assignments.join(parts.select([*TP, "lag", "traffic"]), keys=TP, join_type="left outer")
    counts = {
        r["member_id"]: r
        for r in held.group_by("member_id")
        .aggregate([("member_id", "count"), ("lag", "sum"), ("traffic", "sum")])
        .to_pylist()
    }
    loads = []
    for m in tables.members.to_pylist():
        c = counts.get(m["member_id"], {})
        loads.append(
            MemberLoad(
                member_id=m["member_id"],
                client_id=m["client_id"],
                task_id=m["task_id"],
                partitions=int(c.get("member_id_count") or 0),
                lag=int(c.get("lag_sum") or 0),
                traffic=int(c.get("traffic_sum") or 0),
            )
        )
    return sorted(loads, key=lambda m: (-m.partitions, m.member_id))


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def _partition_lag(row: dict[str, Any]) -> PartitionLag:
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
