"""Generated snapshots: a known mix of healthy and broken partitions at any size.

Why in the package: the tests' randomised Spark-vs-pandas cross-check and the benchmark need
the same generator, and ``connectops-check --snapshot`` can replay its output for a demo
without a cluster. Every partition follows one scripted behaviour, so each Burrow status,
missing commits, rewinds, skewed traffic and uneven assignments all occur in one snapshot.
"""

from __future__ import annotations

import numpy as np

from connectops_check.snapshot import (
    ConnectorKind,
    Member,
    PartitionSample,
    Sample,
    Snapshot,
    TaskInfo,
    TopicPartition,
    WindowStartOffset,
)

#: Scripted partition behaviours; see ``random_snapshot``.
BEHAVIOURS = ("caught_up", "catching_up", "falling_behind", "stuck", "rewind", "no_commit", "late_commit")


def random_snapshot(
    partitions: int,
    samples: int = 10,
    *,
    seed: int = 0,
    kind: ConnectorKind = ConnectorKind.SINK,
    interval_ms: int = 10_000,
    members: int | None = None,
) -> Snapshot:
    """A snapshot of ``partitions`` partitions over ``samples`` samples.

    Behaviours (drawn per partition): ``caught_up`` (lag often 0), ``catching_up`` (reads
    faster than the producer), ``falling_behind`` (reads slower: WARN), ``stuck`` (offset never
    moves: STALL or STOP depending on its owner), ``rewind`` (offset jumps back once),
    ``no_commit`` (never committed) and ``late_commit`` (first commit mid-way). Traffic per
    partition is log-normal, so the balance metrics have a long tail to measure.
    """
    rng = np.random.default_rng(seed)
    n_topics = max(1, min(50, partitions // 200))
    topic_of = np.sort(rng.integers(0, n_topics, size=partitions))
    numbers = np.zeros(partitions, dtype=np.int64)
    for t in range(n_topics):
        idx = np.flatnonzero(topic_of == t)
        numbers[idx] = np.arange(idx.size)
    names = [f"topic-{t:03d}" for t in range(n_topics)]

    rate = rng.lognormal(mean=3.0, sigma=1.0, size=partitions).astype(np.int64)
    growth = rng.poisson(lam=np.maximum(rate, 0)[:, None], size=(partitions, samples))
    base = rng.integers(0, 1_000_000, size=partitions)
    log_end = base[:, None] + np.cumsum(growth, axis=1)
    behaviour = rng.integers(0, len(BEHAVIOURS), size=partitions)

    lag0 = rng.integers(0, 500, size=partitions)
    pos = np.empty((partitions, samples), dtype=np.float64)  # NaN: nothing committed
    start = (log_end[:, 0] - lag0).astype(np.float64)
    step = np.arange(samples, dtype=np.float64)[None, :]
    # caught_up: 0-2 records behind, exactly 0 about half of the time
    pos[:] = log_end - rng.integers(0, 3, size=(partitions, samples)) * (rng.random((partitions, samples)) < 0.5)
    b = behaviour[:, None]
    pos = np.where(b == 1, np.minimum(start[:, None] + step * (rate[:, None] * 3 + 50), log_end), pos)
    pos = np.where(b == 2, start[:, None] + step * (rate[:, None] // 3), pos)
    pos = np.where(b == 3, start[:, None], pos)
    rewind_at = rng.integers(1, max(samples, 2), size=partitions)[:, None]
    rewound = start[:, None] + step * 5 - np.where(step >= rewind_at, 200.0, 0.0)
    pos = np.where(b == 4, rewound, pos)
    pos = np.where(b == 5, np.nan, pos)
    late = rng.integers(1, max(samples, 2), size=partitions)[:, None]
    pos = np.where((b == 6) & (step < late), np.nan, pos)
    pos = np.where(np.isnan(pos), np.nan, np.maximum(pos, 0))

    log_start = np.where(rng.random(partitions) < 0.9, base // 2, -1)  # -1: not collected
    mirror = kind is ConnectorKind.MIRROR_SOURCE
    ts0 = 1_700_000_000_000
    topic_names = [names[t] for t in topic_of.tolist()]
    number_list = numbers.tolist()
    log_start_list = [None if v < 0 else v for v in log_start.tolist()]
    out_samples: list[Sample] = []
    for s in range(samples):
        ends = log_end[:, s].tolist()
        column = pos[:, s].tolist()
        parts = []
        for i in range(partitions):
            value = None if column[i] != column[i] else int(column[i])
            if mirror:
                stored = None if value is None else value - 1
                parts.append(
                    PartitionSample(topic_names[i], number_list[i], ends[i], stored=stored, log_start=log_start_list[i])
                )
            else:
                parts.append(
                    PartitionSample(
                        topic_names[i], number_list[i], ends[i], committed=value, log_start=log_start_list[i]
                    )
                )
        out_samples.append(Sample(ts_ms=ts0 + s * interval_ms, partitions=parts))

    has_ws = rng.random(partitions) < 0.8
    ws_offset = log_end[:, 0] - growth[:, 0]
    window_start = [
        WindowStartOffset(topic_names[i], number_list[i], int(ws_offset[i])) for i in np.flatnonzero(has_ws).tolist()
    ]

    n_members = members if members is not None else max(1, partitions // 50)
    owner = rng.integers(-1, n_members, size=partitions)  # -1: unassigned
    # a third of the partitions crowd onto the first fifth of the members
    owner = np.where((rng.random(partitions) < 0.3) & (owner >= 0), owner % max(1, n_members // 5), owner)
    assignment: list[list[TopicPartition]] = [[] for _ in range(n_members)]
    for i, m in enumerate(owner.tolist()):
        if m >= 0:
            assignment[m].append(TopicPartition(topic_names[i], number_list[i]))
    states = rng.choice(["RUNNING", "RUNNING", "RUNNING", "PAUSED"], size=n_members).tolist()
    return Snapshot(
        connector="synthetic",
        kind=kind,
        connector_class="org.example.SyntheticConnector",
        connector_state="RUNNING",
        tasks=[TaskInfo(task_id=m, worker_id="worker:8083", state=states[m]) for m in range(n_members)],
        samples=out_samples,
        window_start_ms=ts0,
        window_start_offsets=window_start,
        members=[
            Member(
                member_id=f"member-{m}",
                client_id=f"connector-consumer-synthetic-{m}",
                task_id=m if m % 4 else None,
                assignment=assignment[m],
            )
            for m in range(n_members)
        ],
        group_id="connect-synthetic",
    )
