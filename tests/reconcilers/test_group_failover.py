"""The GroupFailover reconciler's order of work, with fast doubles for Kafka, Connect and the API
server: what is written when, and what a retried pass keeps. The same paths on real MM2, real
brokers and a real API server: tests/e2e/test_group_failover.py (these add what real MM2 cannot
be made to do on cue: a member joining between the check and the write, a read-back that
disagrees, a retried pass after the backup)."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from connectops.adapters.kafka import GroupActive, TopicRecord
from connectops.adapters.kube import KubeObjectMissing
from connectops.planning.group_failover import CHECKPOINT_CLASS
from connectops.reconcilers.group_failover import GroupFailoverReconciler

TP = tuple[str, int]


def _s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


class Kafka:
    def __init__(
        self, offsets: dict[TP, int] | None = None, topics: dict[str, list[TopicRecord]] | None = None
    ) -> None:
        self.offsets = dict(offsets or {})
        self.topics = topics or {}
        self.members: list[str] = []
        self.writes: list[dict[TP, int]] = []
        self.join_before_write = False
        self.drop_on_write: TP | None = None
        self.counted: list[tuple[str, dict[int, tuple[int, int]]]] = []

    def group_offsets(self, group: str) -> dict[TP, int]:
        return dict(self.offsets)

    def group_members(self, group: str) -> list[str] | None:
        return list(self.members)

    def alter_group_offsets(self, group: str, offsets: Mapping[TP, int]) -> None:
        if self.join_before_write:
            raise GroupActive(f"alter offsets of group {group!r}: group {group!r} still has members (late@h)")
        self.writes.append(dict(offsets))
        self.offsets.update(offsets)
        if self.drop_on_write is not None:
            self.offsets.pop(self.drop_on_write, None)

    def delete_group(self, group: str) -> bool:
        self.offsets.clear()
        return True

    def read_topic(self, topic: str) -> list[TopicRecord] | None:
        return self.topics.get(topic)

    def count_records(self, topic: str, ranges: Mapping[int, tuple[int, int]]) -> dict[int, int]:
        # KafkaOffsets.count_records: the records there (a transaction marker's offset holds none)
        self.counted.append((topic, dict(ranges)))
        held = self.topics.get(topic) or []
        return {p: sum(r.partition == p and a <= r.offset < z for r in held) for p, (a, z) in ranges.items()}

    def watermarks(self, topic: str, *, read_committed: bool = False) -> dict[int, tuple[int, int]]:
        return {0: (0, 20)}


class Kube:
    def __init__(self) -> None:
        self.config_maps: dict[str, Any] = {}
        self.statuses: list[dict[str, Any]] = []

    async def create_config_map(self, namespace: str, name: str, **kw: Any) -> bool:
        if name in self.config_maps:
            return False
        self.config_maps[name] = SimpleNamespace(
            data=kw["data"], metadata=SimpleNamespace(annotations=kw["annotations"])
        )
        return True

    async def config_map(self, namespace: str, name: str) -> Any:
        if name not in self.config_maps:
            raise KubeObjectMissing(name)
        return self.config_maps[name]

    async def patch_status(self, namespace: str, plural: str, name: str, status: dict[str, Any]) -> None:
        self.statuses.append(status)

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        return "s3cret"


class Connect:
    def __init__(self, configs: dict[str, dict[str, str]]) -> None:
        self.configs = configs

    async def get_config(self, name: str) -> dict[str, str] | None:
        return self.configs.get(name)

    async def list_connectors(self) -> list[str]:
        return sorted(self.configs)


class Clusters:
    def __init__(self, connect: Connect) -> None:
        self.connect = connect

    async def resolve(self, namespace: str, name: str, **_: Any) -> Any:
        return SimpleNamespace(client=self.connect)


CHECKPOINT = {
    "connector.class": CHECKPOINT_CLASS,
    "source.cluster.alias": "a",
    "target.cluster.alias": "b",
    "sync.group.offsets.enabled": "false",
}


def world(now_ms: int) -> tuple[Kafka, Kafka, Kube, Connect]:
    checkpoint = TopicRecord(
        0, 0, _s("g") + _s("a.orders") + struct.pack(">i", 0), struct.pack(">hqq", 0, 6, 1) + _s(""), now_ms
    )
    sync = TopicRecord(0, 0, _s("orders") + struct.pack(">i", 0), struct.pack(">qq", 0, 0), now_ms)
    source = Kafka({("orders", 0): 6}, {"mm2-offset-syncs.b.internal": [sync]})
    target = Kafka({("a.orders", 0): 2}, {"a.checkpoints.internal": [checkpoint]})
    return source, target, Kube(), Connect({"cp": dict(CHECKPOINT)})


def body(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "team", "name": "move", "uid": "u1", "generation": 1},
        "spec": {
            "group": "g",
            "clusterRef": {"name": "mm2"},
            "checkpointConnector": "cp",
            "sourceCluster": {"bootstrapServers": "a:9092"},
            "targetCluster": {"bootstrapServers": "b:9092", "configFrom": {"sasl.password": {"name": "s", "key": "k"}}},
            **spec,
        },
        "status": status or {},
    }


def run(rec: GroupFailoverReconciler, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    events: list[tuple[str, str, str]] = []
    asyncio.run(rec.run(obj, lambda *e: events.append(e)))
    return events


def reconciler(
    source: Kafka, target: Kafka, kube: Kube, connect: Connect, allow: str | None = None
) -> GroupFailoverReconciler:
    factories = {"a:9092": source, "b:9092": target}
    return GroupFailoverReconciler(
        kube,  # type: ignore[arg-type]
        Clusters(connect),  # type: ignore[arg-type]
        kafka_factory=lambda bootstrap, config: factories[bootstrap],
        allowlist=lambda: allow if allow is not None else json.dumps({"team": ["g"]}),
    )


@pytest.fixture
def now_ms() -> int:
    import time

    return int(time.time() * 1000)


def test_failover_backs_up_then_writes_and_a_retried_pass_keeps_the_first_backup(now_ms: int) -> None:
    source, target, kube, connect = world(now_ms)
    events = run(reconciler(source, target, kube, connect), body())
    status = kube.statuses[-1]
    assert status["phase"] == "Succeeded", status
    assert target.writes == [{("a.orders", 0): 1}]
    assert status["plan"]["rereadTotal"] == 5
    (name,) = kube.config_maps
    doc = json.loads(kube.config_maps[name].data["backup.json"])
    assert doc["offsets"] == [{"topic": "a.orders", "partition": 0, "offset": 2}]
    assert events[-1][1] == "FailedOver"
    # the same object again, its status lost (a pass that wrote but could not store its status):
    # the backup taken before the write is kept, not replaced by the offsets written
    run(reconciler(source, target, kube, connect), body())
    assert json.loads(kube.config_maps[name].data["backup.json"]) == doc
    assert kube.statuses[-1]["phase"] == "Succeeded"
    # a final phase is never redone
    writes = len(target.writes)
    run(reconciler(source, target, kube, connect), body(status=kube.statuses[-1]))
    assert len(target.writes) == writes


def test_a_member_joining_before_the_write_refuses_it(now_ms: int) -> None:
    source, target, kube, connect = world(now_ms)
    target.join_before_write = True
    events = run(reconciler(source, target, kube, connect), body())
    status = kube.statuses[-1]
    assert status["phase"] == "Refused"
    assert "late@h" in status["message"]
    assert "nothing was written" in status["message"]
    assert target.offsets == {("a.orders", 0): 2}
    assert events[-1][:2] == ("Warning", "FailoverRefused")


def test_a_read_back_that_disagrees_fails_naming_the_backup(now_ms: int) -> None:
    source, target, kube, connect = world(now_ms)
    target.drop_on_write = ("a.orders", 0)
    run(reconciler(source, target, kube, connect), body())
    status = kube.statuses[-1]
    assert status["phase"] == "Failed"
    assert "a.orders[0]" in status["message"]
    assert status["backup"] in status["message"]


def test_refusals_before_any_kafka_write(now_ms: int) -> None:
    source, target, kube, connect = world(now_ms)
    run(reconciler(source, target, kube, connect, allow="{not json"), body())
    assert "CONNECTOPS_FAILOVER_GROUPS setting is invalid" in kube.statuses[-1]["message"]
    connect.configs["other-cp"] = {**CHECKPOINT, "sync.group.offsets.enabled": "true"}
    run(reconciler(source, target, kube, connect), body())
    assert "sync.group.offsets.enabled on other-cp" in kube.statuses[-1]["message"]
    del connect.configs["other-cp"]
    target.members = ["app-1@10.0.0.1"]
    run(reconciler(source, target, kube, connect), body())
    assert "app-1@10.0.0.1" in kube.statuses[-1]["message"]
    assert target.writes == []
    assert kube.config_maps == {}
    assert {s["phase"] for s in kube.statuses} == {"Refused"}


def test_restore_puts_back_exactly_the_backup(now_ms: int) -> None:
    source, target, kube, connect = world(now_ms)
    run(reconciler(source, target, kube, connect), body())
    backup = kube.statuses[-1]["backup"]
    target.offsets[("a.orders", 1)] = 9  # a partition the backup does not hold
    restore = body(action="restore", restoreFrom=backup)
    restore["metadata"]["name"] = "undo"
    run(reconciler(source, target, kube, connect), restore)
    assert kube.statuses[-1]["phase"] == "Succeeded", kube.statuses[-1]
    assert target.offsets == {("a.orders", 0): 2}
    # a backup of another group is refused
    other = body(action="restore", restoreFrom=backup, group="h")
    run(reconciler(source, target, kube, connect, allow=json.dumps({"team": ["*"]})), other)
    assert "holds group 'g', not 'h'" in kube.statuses[-1]["message"]


def test_failback_writes_on_the_source_and_backs_up_the_source_offsets(now_ms: int) -> None:
    source, target, kube, connect = world(now_ms)
    target.offsets = {("a.orders", 0): 12}
    # a b -> a flow syncing the group into a: MM2 would write the group there too
    connect.configs["back-cp"] = {**CHECKPOINT, "source.cluster.alias": "b", "sync.group.offsets.enabled": "true"}
    run(reconciler(source, target, kube, connect), body(action="failback"))
    assert "sync.group.offsets.enabled on back-cp" in kube.statuses[-1]["message"]
    del connect.configs["back-cp"]
    source.members = ["app@a"]
    run(reconciler(source, target, kube, connect), body(action="failback"))
    assert "app@a" in kube.statuses[-1]["message"]
    source.members = []
    # a.orders as an exactly-once MM2 worker writes it: a transaction marker at offset 5, so the
    # 12 offsets from the sync (0 -> 0) to the group's hold 11 records, the sources 0..10
    target.topics["a.orders"] = [TopicRecord(0, o, b"k", b"v", now_ms) for o in range(13) if o != 5]
    run(reconciler(source, target, kube, connect), body(action="failback"))
    status = kube.statuses[-1]
    assert status["phase"] == "Succeeded", status
    assert target.counted[-1] == ("a.orders", {0: (0, 12)})
    assert source.writes == [{("orders", 0): 11}]
    assert (status["plan"]["rereadTotal"], status["plan"]["sample"][0]["reread"]) == (1, 1)
    assert target.writes == []
    doc = json.loads(kube.config_maps[status["backup"]].data["backup.json"])
    assert (doc["cluster"], doc["offsets"]) == ("a:9092", [{"topic": "orders", "partition": 0, "offset": 6}])
