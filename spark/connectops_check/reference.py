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


def partition_table(
    lagged: pd.DataFrame, owners: pd.DataFrame, n_samples: int, window: int, now_ms: int
) -> pd.DataFrame:
    df = lagged.sort_values([*TP, "sample_idx"], kind="stable").reset_index(drop=True)
    by_tp = df.groupby(TP, sort=False)
    pos = df["position"]
    prev_row_pos = by_tp["position"].shift(1)
    changed = (pos.notna() & (prev_row_pos.isna() | (pos != prev_row_pos))).fillna(False).astype(bool)
    df["run_start"] = df["ts_ms"].where(changed).groupby([df["topic"], df["partition"]]).ffill()
    df["entry"] = (df["sample_idx"] >= max(n_samples - window, 0)) & pos.notna()

    last = by_tp.nth(-1).set_index(TP)[["lag", "basis", "log_end"]].rename(columns={"log_end": "last_log_end"})
    first = by_tp.nth(0).set_index(TP)[["log_end"]].rename(columns={"log_end": "first_log_end"})
    ws = by_tp["ws_offset"].max()

    e = df[df["entry"]].copy()
    by_e = e.groupby(TP, sort=False)
    prev_pos = by_e["position"].shift(1)
    prev_lag = by_e["lag"].shift(1)
    e["lag_zero"] = e["lag"] == 0
    e["rewound"] = (e["position"] < prev_pos).fillna(False).astype(bool)
    e["moved"] = (e["position"] != prev_pos).fillna(False).astype(bool)
    e["lag_decreased"] = (e["lag"] < prev_lag).fillna(False).astype(bool)
    judged = e.groupby(TP).agg(
        n_entries=("entry", "size"),
        lag_was_zero=("lag_zero", "any"),
        rewound=("rewound", "any"),
        moved=("moved", "any"),
        lag_decreased=("lag_decreased", "any"),
        first_ts=("ts_ms", "min"),
        last_ts=("ts_ms", "max"),
        first_run=("run_start", "min"),
        last_run=("run_start", "max"),
    )
    out = last.join(first).join(ws).join(judged, how="left").reset_index()
    out["n_entries"] = out["n_entries"].fillna(0).astype("int64")
    for col in ("lag_was_zero", "rewound", "moved", "lag_decreased"):
        out[col] = out[col].fillna(False).astype(bool)
    out = out.merge(owners, on=TP, how="left")
    live = out["live"].fillna(False).astype(bool)
    first_commit = out["first_ts"].where(live, out["first_run"])
    last_commit = out["last_ts"].where(live, out["last_run"])
    stopped = ((now_ms - last_commit) > (last_commit - first_commit)).fillna(False).astype(bool)
    judge = (out["lag"] > 0) & (out["n_entries"] > 0) & ~out["lag_was_zero"]
    out["status"] = np.select(
        [
            ~judge,
            out["rewound"],
            stopped,
            ~out["moved"],
            ~out["lag_decreased"],
        ],
        [
            PartitionStatus.OK.value,
            PartitionStatus.REWIND.value,
            PartitionStatus.STOP.value,
            PartitionStatus.STALL.value,
            PartitionStatus.WARN.value,
        ],
        default=PartitionStatus.OK.value,
    )
    out["complete"] = out["n_entries"] / float(window)
    start = out["ws_offset"].fillna(out["first_log_end"])
    out["traffic"] = (out["last_log_end"] - start).clip(lower=0).astype("int64")
    out["lag"] = out["lag"].astype("int64")
    return out[[*TP, "lag", "basis", "status", "complete", "traffic"]]


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


def member_loads(assignments: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    counts = assignments.groupby("member_id").size().rename("partitions")
    out = members.merge(counts, left_on="member_id", right_index=True, how="left")
    out["partitions"] = out["partitions"].fillna(0).astype("int64")
    return out[["member_id", "client_id", "task_id", "partitions"]]


def partition_frame(tables: Tables, window: int = 10) -> pd.DataFrame:
    """The per-partition table alone (what tests compare row by row with Spark's)."""
    lagged = with_lag(to_pandas(tables.samples), to_pandas(tables.window_start))
    owners = live_owners(to_pandas(tables.assignments), to_pandas(tables.members))
    return partition_table(lagged, owners, tables.n_samples, window, tables.now_ms)


def compute(tables: Tables, window: int = 10, top_n: int = 20) -> MetricResults:
    samples = to_pandas(tables.samples)
    assignments = to_pandas(tables.assignments)
    members = to_pandas(tables.members)
    lagged = with_lag(samples, to_pandas(tables.window_start))
    parts = partition_table(lagged, live_owners(assignments, members), tables.n_samples, window, tables.now_ms)
    series = lagged.groupby(["sample_idx", "ts_ms"], as_index=False)["lag"].sum().sort_values("sample_idx")
    top_lag = parts.sort_values(["lag", "topic", "partition"], ascending=[False, True, True]).head(top_n)
    bad = parts[parts["status"] != PartitionStatus.OK.value].assign(severity=lambda d: d["status"].map(SEVERITY))
    non_ok = bad.sort_values(["severity", "lag", "topic", "partition"], ascending=[False, False, True, True]).head(
        top_n
    )
    stats = [_traffic(r) for r in traffic_stats(parts).to_dict("records")]
    members_out: list[MemberLoad] = []
    unassigned: int | None = None
    if tables.owners_known:
        loads = member_loads(assignments, members).sort_values(["partitions", "member_id"], ascending=[False, True])
        members_out = [
            MemberLoad(
                member_id=str(r["member_id"]),
                client_id=str(r["client_id"]),
                task_id=None if pd.isna(r["task_id"]) else int(r["task_id"]),
                partitions=int(r["partitions"]),
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
    )


def _partition_lag(row: dict[str, Any]) -> PartitionLag:
    return PartitionLag(
        topic=str(row["topic"]),
        partition=int(row["partition"]),
        lag=int(row["lag"]),
        basis=str(row["basis"]),
        status=str(row["status"]),
        complete=float(row["complete"]),
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
