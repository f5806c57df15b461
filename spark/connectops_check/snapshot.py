"""The inputs of a check, as plain typed data that can be saved to JSON and replayed.

Why a separate layer: collection talks to a broker and a Connect worker, which tests and
benchmarks do not have (or cannot make misbehave on purpose). Everything downstream of
collection reads only a :class:`Snapshot`, so a saved or generated snapshot exercises exactly
the code a live run does.

Offsets keep the meaning they have at their source, so a snapshot file can be checked against
the broker by hand: ``committed`` is a consumer group's committed offset (the NEXT offset to
read), ``stored`` is MirrorMaker 2's stored source offset (the LAST offset replicated; the task
resumes at ``stored + 1``). The metrics layer normalises both to a "position". A MirrorMaker 2
checkpoint row keeps the group's committed offset on the source cluster in ``log_end`` and its
latest checkpoint's ``upstreamOffset`` (also a next-to-read offset) in ``committed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from connectops_check.worker_metrics import TaskFigures

SNAPSHOT_VERSION = 1


class ConnectorKind(StrEnum):
    """What kind of lag a connector has, which decides what can be measured.

    - ``sink``: a consumer group (``connect-<name>`` unless overridden) reads the topics; lag is
      log-end minus committed offset, as any consumer-group lag tool sees it.
    - ``mirror-source``: MirrorMaker 2's source connector reads the SOURCE cluster with no
      consumer group; lag is source log-end minus (stored offset + 1).
    - ``mirror-checkpoint``: MirrorMaker 2's checkpoint connector; one row per (consumer group,
      upstream topic, partition), named ``<group>:<topic>`` (a topic name cannot hold ``:``).
      Its "log-end" is the group's committed offset on the SOURCE cluster and its position the
      ``upstreamOffset`` of the group's latest checkpoint: the lag is how much of the group's
      progress a failover to the target would not know about (``collect`` says more).
    - ``source``: any other source connector; its offsets are connector-defined positions (a
      file offset, a binlog position) with no broker-side end to compare with.
    """

    SINK = "sink"
    SOURCE = "source"
    MIRROR_SOURCE = "mirror-source"
    MIRROR_CHECKPOINT = "mirror-checkpoint"


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(slots=True)
class PartitionSample:
    """One partition at one sample time.

    ``log_end`` is the high watermark of the partition being read (the source cluster's for
    MirrorMaker 2). ``log_start`` is the earliest offset still in the log; it is the lag basis
    when nothing was committed yet, because Connect sinks and MirrorMaker 2 both start from
    ``earliest`` when they have no offset.
    """

    topic: str
    partition: int
    log_end: int
    committed: int | None = None
    stored: int | None = None
    log_start: int | None = None


@dataclass(slots=True)
class Sample:
    ts_ms: int
    partitions: list[PartitionSample]


@dataclass(slots=True)
class WindowStartOffset:
    """The first offset at or after the traffic window's start (ListOffsets by timestamp)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class FailoverReread:
    """What a consumer of a group failing over to the target now would read again on one
    partition of a MirrorMaker 2 checkpoint row (``row`` as the lag rows name it).

    ``target_offset`` is the group's latest checkpoint's downstream offset (where the consumer
    starts on the target); ``target_position`` the target offset of the group's committed offset
    on the source (where it had got to), capped at the target's log-end; ``reread`` the records
    between. Both None when no offset sync translates the committed offset (``offset_syncs``)."""

    row: str
    partition: int
    target_offset: int
    target_position: int | None
    reread: int | None


@dataclass(slots=True)
class Member:
    """A consumer that owns partitions: a consumer-group member, or a MirrorMaker 2 task.

    ``task_id`` links the member to a Connect task when it can be worked out (a sink task's
    consumer has client id ``connector-consumer-<connector>-<task>``), so that a member whose
    task is PAUSED or FAILED does not count as a live owner.
    """

    member_id: str
    client_id: str
    assignment: list[TopicPartition]
    task_id: int | None = None
    host: str = ""


@dataclass(slots=True)
class TaskInfo:
    task_id: int
    worker_id: str
    state: str
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class Scrape:
    """One scrape of the workers' metrics: the figures of this connector's tasks at ``ts_ms``."""

    ts_ms: int
    tasks: list[TaskFigures]


#: ``producer.override.*`` settings the diagnosis reads; nothing else of the config is kept,
#: since other overrides may hold credentials (``sasl.jaas.config``)
PRODUCER_SETTINGS = (
    "batch.size",
    "linger.ms",
    "buffer.memory",
    "max.request.size",
    "max.in.flight.requests.per.connection",
)


@dataclass(slots=True)
class Snapshot:
    """Everything one check needs, collected on the driver.

    ``members`` is ``None`` when ownership could not be observed (group description not
    supported, or not collected), which differs from an empty list (a group with no members).
    ``not_applicable_reason`` is set when the connector has no broker-side lag to measure.
    ``notes`` records every fallback the collector took, so that the verdict can say which
    numbers rest on weaker data.
    """

    connector: str
    kind: ConnectorKind
    connector_class: str = ""
    connector_state: str = ""
    tasks: list[TaskInfo] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    window_start_ms: int | None = None
    window_start_offsets: list[WindowStartOffset] = field(default_factory=list)
    members: list[Member] | None = None
    group_id: str | None = None
    notes: list[str] = field(default_factory=list)
    not_applicable_reason: str | None = None
    worker_version: str | None = None
    producer_overrides: dict[str, str] = field(default_factory=dict)
    scrapes: list[Scrape] = field(default_factory=list)
    #: MirrorMaker 2 checkpoint rows at the last sample (empty for any other kind)
    failover: list[FailoverReread] = field(default_factory=list)
    version: int = SNAPSHOT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; sample partitions are written as short rows to keep files small."""
        return {
            "version": self.version,
            "connector": self.connector,
            "kind": self.kind.value,
            "connector_class": self.connector_class,
            "connector_state": self.connector_state,
            "tasks": [
                {"task_id": t.task_id, "worker_id": t.worker_id, "state": t.state, "trace": t.trace} for t in self.tasks
            ],
            "samples": [
                {
                    "ts_ms": s.ts_ms,
                    "partitions": [
                        [p.topic, p.partition, p.log_end, p.committed, p.stored, p.log_start] for p in s.partitions
                    ],
                }
                for s in self.samples
            ],
            "window_start_ms": self.window_start_ms,
            "window_start_offsets": [[w.topic, w.partition, w.offset] for w in self.window_start_offsets],
            "members": None
            if self.members is None
            else [
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "task_id": m.task_id,
                    "assignment": [[tp.topic, tp.partition] for tp in m.assignment],
                }
                for m in self.members
            ],
            "group_id": self.group_id,
            "notes": list(self.notes),
            "not_applicable_reason": self.not_applicable_reason,
            "worker_version": self.worker_version,
            "producer_overrides": dict(self.producer_overrides),
            "scrapes": [{"ts_ms": sc.ts_ms, "tasks": [figures_to_dict(t) for t in sc.tasks]} for sc in self.scrapes],
            "failover": [[f.row, f.partition, f.target_offset, f.target_position, f.reread] for f in self.failover],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        version = int(data.get("version", SNAPSHOT_VERSION))
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported snapshot version {version} (expected {SNAPSHOT_VERSION})")
        members_raw = data.get("members")
        return cls(
            connector=str(data["connector"]),
            kind=ConnectorKind(data["kind"]),
            connector_class=str(data.get("connector_class", "")),
            connector_state=str(data.get("connector_state", "")),
            tasks=[
                TaskInfo(
                    task_id=int(t["task_id"]),
                    worker_id=str(t.get("worker_id", "")),
                    state=str(t["state"]),
                    trace=t.get("trace"),
                )
                for t in data.get("tasks", [])
            ],
            samples=[
                Sample(
                    ts_ms=int(s["ts_ms"]),
                    partitions=[
                        PartitionSample(
                            topic=str(row[0]),
                            partition=int(row[1]),
                            log_end=int(row[2]),
                            committed=_opt_int(row[3]),
                            stored=_opt_int(row[4]),
                            log_start=_opt_int(row[5]),
                        )
                        for row in s["partitions"]
                    ],
                )
                for s in data.get("samples", [])
            ],
            window_start_ms=_opt_int(data.get("window_start_ms")),
            window_start_offsets=[
                WindowStartOffset(topic=str(w[0]), partition=int(w[1]), offset=int(w[2]))
                for w in data.get("window_start_offsets", [])
            ],
            members=None
            if members_raw is None
            else [
                Member(
                    member_id=str(m["member_id"]),
                    client_id=str(m.get("client_id", "")),
                    host=str(m.get("host", "")),
                    task_id=_opt_int(m.get("task_id")),
                    assignment=[TopicPartition(str(a[0]), int(a[1])) for a in m.get("assignment", [])],
                )
                for m in members_raw
            ],
            group_id=data.get("group_id"),
            notes=[str(n) for n in data.get("notes", [])],
            not_applicable_reason=data.get("not_applicable_reason"),
            worker_version=data.get("worker_version"),
            producer_overrides={
                str(k): str(v) for k, v in (data.get("producer_overrides") or {}).items() if k in PRODUCER_SETTINGS
            },
            scrapes=[
                Scrape(ts_ms=int(sc["ts_ms"]), tasks=[figures_from_dict(t) for t in sc.get("tasks", [])])
                for sc in data.get("scrapes", [])
            ],
            # absent from snapshots written before it was collected: nothing known
            failover=[
                FailoverReread(
                    row=str(f[0]),
                    partition=int(f[1]),
                    target_offset=int(f[2]),
                    target_position=_opt_int(f[3]),
                    reread=_opt_int(f[4]),
                )
                for f in data.get("failover", [])
            ],
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), separators=(",", ":")) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Snapshot:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"{path}: a snapshot file holds a JSON object")
        return cls.from_dict(data)


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise TypeError(f"expected an integer or null, got {value!r}")
    return int(value)


def figures_to_dict(figures: TaskFigures) -> dict[str, Any]:
    return {f.name: getattr(figures, f.name) for f in fields(figures)}


def figures_from_dict(data: Any) -> TaskFigures:
    """A ``TaskFigures`` from its JSON form; numbers checked, unknown keys refused."""
    if not isinstance(data, dict):
        raise TypeError(f"task figures must be an object, got {type(data).__name__}")
    known = {f.name for f in fields(TaskFigures)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown task figures {sorted(unknown)}")
    values: dict[str, Any] = {"connector": str(data["connector"]), "task": int(data["task"])}
    for name in known - {"connector", "task"}:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"{name}: expected a number or null, got {value!r}")
        values[name] = None if value is None else float(value)
    return TaskFigures(**values)
