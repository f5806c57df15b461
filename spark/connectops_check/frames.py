"""A snapshot as columnar Arrow tables: the one input shape both metric engines read.

Why Arrow and not pandas in between: PySpark 4 builds a DataFrame from a ``pyarrow.Table``
directly (no per-row Python objects, no pandas-version caveats), and the pandas reference gets
the same columns with ``Table.to_pandas``. Both engines therefore see identical data, which
is what makes the Spark vs pandas cross-check and the benchmark fair.

Normalisation done here, once:
- ``position`` is the next offset the connector will read: a sink's committed offset, or
  MirrorMaker 2's stored offset + 1 (MM2 stores the LAST replicated offset).
- a member ``alive`` flag: a member linked to a Connect task is alive only while that task is
  RUNNING (a PAUSED sink task keeps its group membership and its partitions but reads nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa  # pyarrow ships no type information

from connectops_check.snapshot import ConnectorKind, Snapshot

SAMPLES_SCHEMA = pa.schema(
    [
        pa.field("sample_idx", pa.int32(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("log_end", pa.int64(), nullable=False),
        pa.field("position", pa.int64()),
        pa.field("log_start", pa.int64()),
    ]
)
WINDOW_START_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("ws_offset", pa.int64(), nullable=False),
    ]
)
ASSIGNMENTS_SCHEMA = pa.schema(
    [
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
    ]
)
MEMBERS_SCHEMA = pa.schema(
    [
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("client_id", pa.string(), nullable=False),
        pa.field("task_id", pa.int32()),
        pa.field("alive", pa.bool_(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class Tables:
    """The snapshot's data, column-wise. ``now_ms`` is the evaluation time (last sample).

    ``owners_known`` is False when the snapshot has no member information at all; the
    engines then treat every partition as having no live owner (see ``metrics``).
    """

    samples: pa.Table
    window_start: pa.Table
    assignments: pa.Table
    members: pa.Table
    owners_known: bool
    #: each sample's time, by ``sample_idx``
    sample_ts: tuple[int, ...]

    @property
    def n_samples(self) -> int:
        return len(self.sample_ts)

    @property
    def now_ms(self) -> int:
        return self.sample_ts[-1] if self.sample_ts else 0


def snapshot_tables(snapshot: Snapshot) -> Tables:
    samples = sorted(snapshot.samples, key=lambda s: s.ts_ms)
    mirror = snapshot.kind is ConnectorKind.MIRROR_SOURCE
    idx: list[int] = []
    ts: list[int] = []
    topic: list[str] = []
    partition: list[int] = []
    log_end: list[int] = []
    position: list[int | None] = []
    log_start: list[int | None] = []
    for i, sample in enumerate(samples):
        parts = sample.partitions
        idx.extend([i] * len(parts))
        ts.extend([sample.ts_ms] * len(parts))
        topic.extend([p.topic for p in parts])
        partition.extend([p.partition for p in parts])
        log_end.extend([p.log_end for p in parts])
        log_start.extend([p.log_start for p in parts])
        if mirror:
            position.extend([None if p.stored is None else p.stored + 1 for p in parts])
        else:
            position.extend([p.committed for p in parts])
    samples_table = pa.Table.from_arrays(
        [
            pa.array(idx, pa.int32()),
            pa.array(ts, pa.int64()),
            pa.array(topic, pa.string()),
            pa.array(partition, pa.int32()),
            pa.array(log_end, pa.int64()),
            pa.array(position, pa.int64()),
            pa.array(log_start, pa.int64()),
        ],
        schema=SAMPLES_SCHEMA,
    )
    ws = snapshot.window_start_offsets
    window_start = pa.Table.from_arrays(
        [
            pa.array([w.topic for w in ws], pa.string()),
            pa.array([w.partition for w in ws], pa.int32()),
            pa.array([w.offset for w in ws], pa.int64()),
        ],
        schema=WINDOW_START_SCHEMA,
    )
    members = snapshot.members or []
    task_state = {t.task_id: t.state for t in snapshot.tasks}
    alive = [m.task_id is None or task_state.get(m.task_id) == "RUNNING" for m in members]
    members_table = pa.Table.from_arrays(
        [
            pa.array([m.member_id for m in members], pa.string()),
            pa.array([m.client_id for m in members], pa.string()),
            pa.array([m.task_id for m in members], pa.int32()),
            pa.array(alive, pa.bool_()),
        ],
        schema=MEMBERS_SCHEMA,
    )
    assignments_table = pa.Table.from_arrays(
        [
            pa.array([m.member_id for m in members for _ in m.assignment], pa.string()),
            pa.array([tp.topic for m in members for tp in m.assignment], pa.string()),
            pa.array([tp.partition for m in members for tp in m.assignment], pa.int32()),
        ],
        schema=ASSIGNMENTS_SCHEMA,
    )
    return Tables(
        samples=samples_table,
        window_start=window_start,
        assignments=assignments_table,
        members=members_table,
        owners_known=snapshot.members is not None,
        sample_ts=tuple(s.ts_ms for s in samples),
    )
