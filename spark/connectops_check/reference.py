"""The same metrics as ``metrics``, written with pandas on one machine.

Why it exists: it is an independent second implementation (different engine, different
idioms: ``shift``/``ffill`` instead of window frames) that the tests compare the Spark job
with, and it is the single-machine baseline the benchmark measures Spark against. The
definitions are documented once, in ``metrics``; this module follows them step by step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa  # pyarrow ships no type information

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


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Nullable integer columns stay integers (``Int64``), so offsets above 2**53 stay exact."""
    mapping = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(), pa.bool_(): pd.BooleanDtype()}
    return table.to_pandas(types_mapper=mapping.get)


def with_lag(samples: pd.DataFrame, window_start: pd.DataFrame) -> pd.DataFrame:
    df = samples.merge(window_start, on=TP, how="left")
    start = df["position"].fillna(df["log_start"]).fillna(df["ws_offset"]).fillna(0)
    df["start"] = start
    df["lag"] = (df["log_end"] - start).clip(lower=0)
    df["basis"] = np.select(
        [df["position"].notna(), df["log_start"].notna(), df["ws_offset"].notna()],
        [LagBasis.COMMITTED.value, LagBasis.EARLIEST.value, LagBasis.WINDOW_START.value],
        default=LagBasis.OFFSET_ZERO.value,
    )
    return df


def live_owners(assignments: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    owned = assignments.merge(members[["member_id", "alive"]], on="member_id")
    return owned.groupby(TP, as_index=False)["alive"].any().rename(columns={"alive": "live"})


def commit_ring(lagged: pd.DataFrame, owners: pd.DataFrame, n_samples: int, window: int) -> pd.DataFrame:
    df = lagged.sort_values([*TP, "sample_idx"], kind="stable").reset_index(drop=True)
    pos = df["position"]
    prev_row_pos = df.groupby(TP, sort=False)["position"].shift(1)
    changed = (pos.notna() & (prev_row_pos.isna() | (pos != prev_row_pos))).fillna(False).astype(bool)
    df["run_start"] = df["ts_ms"].where(changed).groupby([df["topic"], df["partition"]]).ffill()
    df = df.merge(owners, on=TP, how="left")
    live = df["live"].fillna(False).astype(bool)
    entry = (df["sample_idx"] >= max(n_samples - window, 0)) & pos.notna()
    ring = df.loc[entry, [*TP, "sample_idx", "position", "lag"]].rename(
        columns={"sample_idx": "slot", "position": "offset"}
    )
    ring["ts_ms"] = df["ts_ms"].where(live, df["run_start"])[entry]
    return ring


def broker_ring(lagged: pd.DataFrame, n_samples: int, window: int) -> pd.DataFrame:
    return lagged.loc[lagged["sample_idx"] >= max(n_samples - window, 0), [*TP, "log_end"]]


def burrow_status(
    entries: pd.DataFrame,
    broker: pd.DataFrame,
    current: pd.DataFrame,
    now_ms: int,
    window: int,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> pd.DataFrame:
    """``metrics.burrow_status`` in pandas: the same inputs and outputs."""
    e = entries.sort_values([*TP, "slot"], kind="stable").reset_index(drop=True)
    keys = [e["topic"], e["partition"]]
    e["prev_off"] = e.groupby(keys, sort=False)["offset"].shift(1)
    e["prev_lag"] = e.groupby(keys, sort=False)["lag"].ffill().groupby(keys, sort=False).shift(1)
    e["rewound"] = (e["offset"] < e["prev_off"]).fillna(False).astype(bool)
    e["lag_allowed"] = (e["lag"] <= allowed_lag).fillna(False).astype(bool)
    e["lag_decreased"] = (e["lag"] < e["prev_lag"]).fillna(False).astype(bool)
    rewinds = e[e["rewound"]].groupby(TP).agg(rewind_slot=("slot", "min"))
    e = e.merge(rewinds, on=TP, how="left")
    e["before_rewind"] = e["prev_off"].where(e["slot"] == e["rewind_slot"])
    e["after_rewind"] = e["offset"].where(e["slot"] >= e["rewind_slot"])
    ring = e.groupby(TP).agg(
        n_entries=("slot", "size"),
        first_ts=("ts_ms", "first"),
        last_ts=("ts_ms", "last"),
        last_off=("offset", "last"),
        min_off=("offset", "min"),
        max_off=("offset", "max"),
        lag_allowed_seen=("lag_allowed", "any"),
        lag_decreased=("lag_decreased", "any"),
        rewind_slot=("rewind_slot", "max"),
        before_rewind=("before_rewind", "max"),
        after_rewind_max=("after_rewind", "max"),
    )
    lowest_broker = broker.groupby(TP).agg(min_broker=("log_end", "min"))
    out = current.merge(ring, on=TP, how="left").merge(lowest_broker, on=TP, how="left")
    n = out["n_entries"].fillna(0)
    out["complete"] = n / float(window)
    stopped = ((now_ms - out["last_ts"]) > (out["last_ts"] - out["first_ts"])).fillna(False).astype(bool)
    recent_lag_zero = (out["min_broker"] <= out["last_off"]).fillna(False).astype(bool)
    unrecovered = out["rewind_slot"].notna() & ~(out["after_rewind_max"] >= out["before_rewind"]).fillna(False).astype(
        bool
    )
    always_lagging = ~out["lag_allowed_seen"].fillna(False).astype(bool)
    stalled = (out["min_off"] == out["max_off"]).fillna(False).astype(bool)
    not_decreasing = ~out["lag_decreased"].fillna(False).astype(bool)
    out["status"] = np.select(
        [
            (n == 0) | (out["complete"] < minimum_complete),
            out["current_lag"] <= allowed_lag,
            stopped & ~recent_lag_zero,
            unrecovered,
            always_lagging & stalled,
            always_lagging & not_decreasing,
        ],
        [
            PartitionStatus.OK.value,
            PartitionStatus.OK.value,
            PartitionStatus.STOP.value,
            PartitionStatus.REWIND.value,
            PartitionStatus.STALL.value,
            PartitionStatus.WARN.value,
        ],
        default=PartitionStatus.OK.value,
    )
    return out[[*TP, "status", "complete"]]


def partition_table(
    lagged: pd.DataFrame,
    owners: pd.DataFrame,
    n_samples: int,
    window: int,
    now_ms: int,
    allowed_lag: int = 0,
    minimum_complete: float = 0.0,
) -> pd.DataFrame:
    df = lagged.sort_values([*TP, "sample_idx"], kind="stable").reset_index(drop=True)
    by_tp = df.groupby(TP, sort=False)
    last = by_tp.nth(-1).set_index(TP)[["lag", "basis", "log_end", "start", "ts_ms"]]
    last = last.rename(columns={"log_end": "last_log_end", "start": "c", "ts_ms": "last_ts"})
    first = by_tp.nth(0).set_index(TP)[["log_end", "ts_ms"]]
    first = first.rename(columns={"log_end": "first_log_end", "ts_ms": "first_ts"})
    ws = by_tp["ws_offset"].max()
    out = last.join(first).join(ws).join(by_tp.size().rename("n_points")).reset_index()
    statuses = burrow_status(
        commit_ring(df, owners, n_samples, window),
        broker_ring(df, n_samples, window),
        out[[*TP, "lag"]].rename(columns={"lag": "current_lag"}),
        now_ms,
        window,
        allowed_lag,
        minimum_complete,
    )
    out = out.merge(statuses, on=TP, how="left")
    out = out.merge(_time_lag_and_rates(df, out, now_ms), on=TP, how="left")
    start = out["ws_offset"].fillna(out["first_log_end"])
    out["traffic"] = (out["last_log_end"] - start).clip(lower=0).astype("int64")
    out["lag"] = out["lag"].astype("int64")
    return out[
        [*TP, "lag", "basis", "status", "complete", "traffic", "time_lag_s", "consume_rate", "produce_rate", "eta_s"]
    ]


def _time_lag_and_rates(df: pd.DataFrame, parts: pd.DataFrame, now_ms: int) -> pd.DataFrame:
    """``metrics._time_lag_and_rates`` in pandas (Kafka Lag Exporter's lookup, rates, ETA)."""
    keys = [df["topic"], df["partition"]]
    seg = df[[*TP, "sample_idx", "log_end", "ts_ms"]].copy()
    seg["l_le"] = df.groupby(keys, sort=False)["log_end"].shift(1)
    seg["l_ts"] = df.groupby(keys, sort=False)["ts_ms"].shift(1)
    seg = seg.merge(parts[[*TP, "c"]], on=TP, how="left")
    holds = seg[((seg["l_le"] <= seg["c"]) & (seg["c"] <= seg["log_end"])).fillna(False).astype(bool)]
    newest = holds.sort_values([*TP, "sample_idx"]).groupby(TP).tail(1)
    newest = newest[[*TP, "l_le", "l_ts", "log_end", "ts_ms"]].rename(columns={"log_end": "r_le", "ts_ms": "r_ts"})
    out = parts.merge(newest, on=TP, how="left")
    found = out["r_le"].notna()
    l_le = out["l_le"].where(found, out["first_log_end"]).astype("float64")
    l_ts = out["l_ts"].where(found, out["first_ts"]).astype("float64")
    r_le = out["r_le"].where(found, out["last_log_end"]).astype("float64")
    r_ts = out["r_ts"].where(found, out["last_ts"]).astype("float64")
    c = out["c"].astype("float64")
    dy = r_le - l_le
    predicted = r_ts - (r_le - c) * (r_ts - l_ts) / dy
    extrapolable = (out["n_points"] >= 2) & (dy != 0)
    lag_s = ((now_ms - predicted) / 1000.0).clip(lower=0.0)
    out["time_lag_s"] = np.where(
        c.isna(), np.nan, np.where(c >= out["last_log_end"].astype("float64"), 0.0, lag_s.where(extrapolable))
    )
    span_s = (out["last_ts"] - out["first_ts"]).astype("float64") / 1000.0
    out["produce_rate"] = ((out["last_log_end"] - out["first_log_end"]).astype("float64") / span_s).where(span_s > 0)
    known = df[df["start"].notna()]
    by_known = known.groupby(TP)
    pos = pd.DataFrame(
        {
            "first_pos": by_known["start"].first(),
            "last_pos": by_known["start"].last(),
            "first_pos_ts": by_known["ts_ms"].first(),
            "last_pos_ts": by_known["ts_ms"].last(),
        }
    ).reset_index()
    out = out.merge(pos, on=TP, how="left")
    pos_span_s = (out["last_pos_ts"] - out["first_pos_ts"]).astype("float64") / 1000.0
    out["consume_rate"] = ((out["last_pos"] - out["first_pos"]).astype("float64") / pos_span_s).where(pos_span_s > 0)
    out["eta_s"] = eta_seconds(out["lag"].astype("float64"), out["consume_rate"], out["produce_rate"])
    return out[[*TP, "time_lag_s", "consume_rate", "produce_rate", "eta_s"]]


def eta_seconds(lag: pd.Series, consume: pd.Series, produce: pd.Series) -> pd.Series:
    gaining = (consume > produce).fillna(False).astype(bool)
    return pd.Series(np.where(lag == 0, 0.0, np.where(gaining, lag / (consume - produce), np.nan)), index=lag.index)


def topic_lag_table(parts: pd.DataFrame) -> pd.DataFrame:
    cols = parts[["topic", "lag", "time_lag_s", "consume_rate", "produce_rate"]]
    both = pd.concat([cols, cols.assign(topic=ALL_TOPICS)], ignore_index=True)
    agg = both.groupby("topic").agg(
        n=("lag", "size"),
        lag=("lag", "sum"),
        time_lag_s=("time_lag_s", "max"),
        consume_known=("consume_rate", "count"),
        consume_rate=("consume_rate", "sum"),
        produce_known=("produce_rate", "count"),
        produce_rate=("produce_rate", "sum"),
    )
    agg["consume_rate"] = agg["consume_rate"].where(agg["consume_known"] == agg["n"])
    agg["produce_rate"] = agg["produce_rate"].where(agg["produce_known"] == agg["n"])
    agg["eta_s"] = eta_seconds(agg["lag"].astype("float64"), agg["consume_rate"], agg["produce_rate"])
    return agg.reset_index()


def traffic_stats(partitions: pd.DataFrame) -> pd.DataFrame:
    traffic = partitions[["topic", "traffic"]]
    both = pd.concat([traffic, traffic.assign(topic=ALL_TOPICS)], ignore_index=True)
    both = both.sort_values(["topic", "traffic"], kind="stable")
    both["x"] = both["traffic"].astype("float64")
    both["ix"] = (both.groupby("topic").cumcount() + 1).astype("float64") * both["x"]
    agg = both.groupby("topic").agg(
        n=("x", "size"),
        total=("traffic", "sum"),
        max=("traffic", "max"),
        min=("traffic", "min"),
        std=("x", lambda s: s.std(ddof=0)),
        sum_ix=("ix", "sum"),
    )
    n = agg["n"].astype("float64")
    total = agg["total"].astype("float64")
    agg["mean"] = total / n
    has = agg["total"] > 0
    agg["max_over_mean"] = (agg["max"] / agg["mean"]).where(has)
    agg["cv"] = (agg["std"] / agg["mean"]).where(has)
    agg["gini"] = (2.0 * agg["sum_ix"] / (n * total) - (n + 1.0) / n).where(has)
    return agg.reset_index()


def member_loads(assignments: pd.DataFrame, members: pd.DataFrame, parts: pd.DataFrame) -> pd.DataFrame:
    held = assignments.merge(parts[[*TP, "lag", "traffic"]], on=TP, how="left")
    counts = held.groupby("member_id").agg(
        partitions=("member_id", "size"), lag=("lag", "sum"), traffic=("traffic", "sum")
    )
    out = members.merge(counts, left_on="member_id", right_index=True, how="left")
    for column in ("partitions", "lag", "traffic"):
        out[column] = out[column].fillna(0).astype("int64")
    return out[["member_id", "client_id", "task_id", "partitions", "lag", "traffic"]]


def partition_frame(
    tables: Tables, window: int = 10, allowed_lag: int = 0, minimum_complete: float = 0.0
) -> pd.DataFrame:
    """The per-partition table alone (what tests compare row by row with Spark's)."""
    lagged = with_lag(to_pandas(tables.samples), to_pandas(tables.window_start))
    owners = live_owners(to_pandas(tables.assignments), to_pandas(tables.members))
    return partition_table(lagged, owners, tables.n_samples, window, tables.now_ms, allowed_lag, minimum_complete)


def compute(
    tables: Tables, window: int = 10, top_n: int = 20, allowed_lag: int = 0, minimum_complete: float = 0.0
) -> MetricResults:
    samples = to_pandas(tables.samples)
    assignments = to_pandas(tables.assignments)
    members = to_pandas(tables.members)
    lagged = with_lag(samples, to_pandas(tables.window_start))
    parts = partition_table(
        lagged,
        live_owners(assignments, members),
        tables.n_samples,
        window,
        tables.now_ms,
        allowed_lag,
        minimum_complete,
    )
    series = lagged.groupby(["sample_idx", "ts_ms"], as_index=False)["lag"].sum().sort_values("sample_idx")
    top_lag = parts.sort_values(["lag", "topic", "partition"], ascending=[False, True, True]).head(top_n)
    bad = parts[parts["status"] != PartitionStatus.OK.value].assign(severity=lambda d: d["status"].map(SEVERITY))
    non_ok = bad.sort_values(["severity", "lag", "topic", "partition"], ascending=[False, False, True, True]).head(
        top_n
    )
    stats = [_traffic(r) for r in traffic_stats(parts).to_dict("records")]
    topic_lags = [_topic_lag(r) for r in topic_lag_table(parts).to_dict("records")]
    members_out: list[MemberLoad] = []
    unassigned: int | None = None
    if tables.owners_known:
        loads = member_loads(assignments, members, parts).sort_values(
            ["partitions", "member_id"], ascending=[False, True]
        )
        members_out = [
            MemberLoad(
                member_id=str(r["member_id"]),
                client_id=str(r["client_id"]),
                task_id=None if pd.isna(r["task_id"]) else int(r["task_id"]),
                partitions=int(r["partitions"]),
                lag=int(r["lag"]),
                traffic=int(r["traffic"]),
            )
            for r in loads.to_dict("records")
        ]
        assigned = pd.MultiIndex.from_frame(assignments[TP])
        unassigned = int((~pd.MultiIndex.from_frame(parts[TP]).isin(assigned)).sum())
    return MetricResults(
        partitions=len(parts),
        samples=tables.n_samples,
        total_lag=int(parts["lag"].sum()),
        max_partition_lag=int(parts["lag"].max()) if len(parts) else 0,
        lag_series=[(int(t), int(lag)) for t, lag in zip(series["ts_ms"], series["lag"], strict=True)],
        basis_counts={str(k): int(v) for k, v in parts["basis"].value_counts().items()},
        status_counts={str(k): int(v) for k, v in parts["status"].value_counts().items()},
        top_lag=[_partition_lag(r) for r in top_lag.to_dict("records")],
        non_ok=[_partition_lag(r) for r in non_ok.to_dict("records")],
        traffic_topics=sorted((s for s in stats if s.topic != ALL_TOPICS), key=lambda s: s.topic),
        traffic_overall=next((s for s in stats if s.topic == ALL_TOPICS), None),
        members=members_out,
        unassigned_partitions=unassigned,
        complete_partitions=int((parts["complete"] >= 1.0).sum()),
        topic_lags=sorted((t for t in topic_lags if t.topic != ALL_TOPICS), key=lambda t: t.topic),
        overall_lag=next((t for t in topic_lags if t.topic == ALL_TOPICS), None),
    )


def _opt(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _partition_lag(row: dict[str, Any]) -> PartitionLag:
    return PartitionLag(
        topic=str(row["topic"]),
        partition=int(row["partition"]),
        lag=int(row["lag"]),
        basis=str(row["basis"]),
        status=str(row["status"]),
        complete=float(row["complete"]),
        time_lag_s=_opt(row["time_lag_s"]),
        consume_rate=_opt(row["consume_rate"]),
        produce_rate=_opt(row["produce_rate"]),
        eta_s=_opt(row["eta_s"]),
    )


def _topic_lag(row: dict[str, Any]) -> TopicLag:
    return TopicLag(
        topic=str(row["topic"]),
        partitions=int(row["n"]),
        lag=int(row["lag"]),
        time_lag_s=_opt(row["time_lag_s"]),
        consume_rate=_opt(row["consume_rate"]),
        produce_rate=_opt(row["produce_rate"]),
        eta_s=_opt(row["eta_s"]),
    )


def _traffic(row: dict[str, Any]) -> TrafficStats:
    def opt(value: Any) -> float | None:
        return None if value is None or pd.isna(value) else float(value)

    return TrafficStats(
        topic=str(row["topic"]),
        partitions=int(row["n"]),
        total=int(row["total"]),
        mean=float(row["mean"]),
        max=int(row["max"]),
        min=int(row["min"]),
        max_over_mean=opt(row["max_over_mean"]),
        cv=opt(row["cv"]),
        gini=opt(row["gini"]),
    )
