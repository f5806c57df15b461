"""Sink resets change exactly what they name, proven from the broker, from Connect, and from
what the connector writes afterwards.

One sink reads two topics (``orders`` and ``payments``, two partitions each). Every record's value
is unique and the test keeps its own log of what it produced, so the offsets each step must leave,
and the lines the sink must write after it, are computed here independently of the operator's
plan. Each step reads the committed offsets of the sink's group from the broker (offset, metadata
and leader epoch: "byte-equal" for the partitions the step must not touch) and from Connect's
``GET /offsets``, then resumes the connector and compares its new output with the log.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.e2e.test_offset_reset_e2e import reset
from tests.env.records import assert_end_offsets_true, batching_producer
from tests.env.servers import ConnectWorker

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
TP = tuple[str, int]


class Log:
    """Every record produced, per (topic, partition), in order: the test's own truth."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.records: dict[TP, list[str]] = defaultdict(list)
        self.producer = batching_producer(bootstrap)

    def produce(self, topic: str, counts: dict[int, int], tag: str, timestamps: Iterable[int] = ()) -> None:
        stamps = list(timestamps)
        for partition, n in counts.items():
            for i in range(n):
                value = f"{topic}-p{partition}-{tag}{i}"
                extra = {"timestamp": stamps[i]} if stamps else {}
                self.producer.produce(topic, value=json.dumps(value).encode(), partition=partition, **extra)
                self.producer.flush(10)
                self.records[(topic, partition)].append(value)

    def ends(self) -> dict[TP, int]:
        return {tp: len(values) for tp, values in self.records.items()}

    def after(self, committed: dict[TP, int]) -> Counter[str]:
        """The lines a sink writes when it resumes at ``committed`` (missing: from the earliest)."""
        lines: Counter[str] = Counter()
        for tp, values in self.records.items():
            lines.update(values[committed.get(tp, 0) :])
        return lines


class Output:
    """The sink's file, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = 0

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def new(self, expected: Counter[str], settle: float = 3.0) -> Counter[str]:
        """Wait for ``expected``'s count of new lines, then a quiet period (a replay of anything
        more would show up in it), and return the new lines."""
        want = self.seen + sum(expected.values())
        wait_for(lambda: len(self.lines()) >= want, 90, f"{sum(expected.values())} new sink line(s)")
        time.sleep(settle)
        lines = self.lines()
        got = Counter(lines[self.seen :])
        self.seen = len(lines)
        return got


def group_commits(bootstrap: str, group: str) -> dict[TP, tuple[int, str, Any]]:
    """The group's committed offsets as the broker holds them: (offset, metadata, leader epoch)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    result = futures[group].result(timeout=15)
    return {
        (tp.topic, tp.partition): (tp.offset, tp.metadata, tp.leader_epoch)
        for tp in result.topic_partitions or []
        if tp.offset >= 0
    }


def connect_offsets(rest: ConnectREST, name: str) -> dict[TP, int]:
    entries = rest.http.get(rest.path(name) + "/offsets", timeout=30).json()["offsets"]
    return {
        (e["partition"]["kafka_topic"], e["partition"]["kafka_partition"]): e["offset"]["kafka_offset"] for e in entries
    }


class SinkUnderTest:
    def __init__(self, k8s: K8s, connect: ConnectWorker, tmp_path: Path, strategy: str, partitions: int = 2) -> None:
        self.k8s, self.connect, self.strategy = k8s, connect, strategy
        self.rest = ConnectREST(connect)
        run = uuid.uuid4().hex[:6]
        self.orders, self.payments = f"orders-{run}", f"payments-{run}"
        admin = AdminClient({"bootstrap.servers": connect.bootstrap})
        for future in admin.create_topics(
            [NewTopic(self.orders, partitions, 1), NewTopic(self.payments, partitions, 1)]
        ).values():
            future.result(timeout=15)
        self.log = Log(connect.bootstrap)
        self.name = f"sink-{run}"
        self.group = f"connect-{self.name}"
        self.out = Output(tmp_path / f"{self.name}.out")
        k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
        k8s.wait_condition("connectclusters", "main", "Ready", "True")

    def create(self) -> None:
        self.k8s.create(
            "connectors",
            self.name,
            {
                "clusterRef": {"name": "main"},
                "class": SINK,
                "config": {"file": str(self.out.path), "topics": f"{self.orders},{self.payments}"},
            },
            "Connector",
        )
        self.k8s.wait_condition("connectors", self.name, "Ready", "True")

    def committed(self) -> dict[TP, int]:
        return {tp: c[0] for tp, c in group_commits(self.connect.bootstrap, self.group).items()}

    def consumed_everything(self) -> None:
        ends = self.log.ends()
        wait_for(lambda: self.committed() == ends, 60, f"{self.name} to commit {ends}")

    def set_state(self, state: str) -> None:
        self.k8s.patch_spec("connectors", self.name, {"state": state})
        wait_for(lambda: self.rest.state(self.name) == state.upper(), 60, f"{self.name} {state}")

    def step(self, reset_name: str, spec: dict[str, Any], expected: dict[TP, int], touched: set[TP]) -> dict[str, Any]:
        """Run one reset on the paused sink; check the broker and Connect for every partition,
        then resume and check the output. ``expected``: the committed offsets afterwards (a
        partition left out has none); ``touched``: the partitions the reset may change."""
        for topic in (self.orders, self.payments):
            assert_end_offsets_true(self.connect.bootstrap, topic)
        before = group_commits(self.connect.bootstrap, self.group)
        status = reset(
            self.k8s,
            reset_name,
            {"connectorRef": {"name": self.name}, "strategy": self.strategy, **spec},
            timeout=180,
        )
        assert status["strategy"] == self.strategy
        assert self.rest.state(self.name) == "PAUSED"  # back to its Connector's spec.state
        after = group_commits(self.connect.bootstrap, self.group)
        for tp in set(before) - touched:
            assert after.get(tp) == before[tp], f"{tp} must not move: {before[tp]} -> {after.get(tp)}"
        assert {tp: c[0] for tp, c in after.items()} == expected
        assert connect_offsets(self.rest, self.name) == expected
        self.set_state("running")
        assert self.out.new(self.log.after(expected)) == self.log.after(expected)
        self.consumed_everything()
        self.set_state("paused")
        return status


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_sink_resets_change_exactly_what_they_name(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path, strategy: str
) -> None:
    sut = SinkUnderTest(k8s, connect, tmp_path, strategy)
    log, orders, payments = sut.log, sut.orders, sut.payments
    log.produce(orders, {0: 3, 1: 3}, "a")
    log.produce(payments, {0: 2, 1: 2}, "a")
    sut.create()
    assert sut.out.new(log.after({})) == log.after({})
    sut.consumed_everything()
    sut.set_state("paused")
    every = set(log.ends())
    orders_tps = {(orders, 0), (orders, 1)}
    # without topics, a set-to action covers every topic the sink reads, and the plan says so
    planned = reset(
        k8s, "plan-all", {"connectorRef": {"name": sut.name}, "action": "toLatest", "dryRun": True}, phase="Planned"
    )
    scope = planned["plan"]["scope"][sut.name]
    assert scope["allTopics"] is True
    assert scope["topics"] == sorted([orders, payments])
    assert "every topic the connector reads" in scope["description"]
    assert sut.committed() == log.ends()  # a dry run changes nothing

    # toLatest on orders only: its unread records are skipped, payments' unread ones are not
    log.produce(orders, {0: 2, 1: 2}, "b")
    log.produce(payments, {0: 1, 1: 1}, "b")
    latest = sut.step(
        "to-latest",
        {"action": "toLatest", "topics": [orders]},
        {(orders, 0): 5, (orders, 1): 5, (payments, 0): 2, (payments, 1): 2},
        orders_tps,
    )
    scope = latest["plan"]["scope"][sut.name]
    assert scope["topics"] == [orders]
    assert scope["untouchedTopics"] == [payments]

    # toEarliest on orders only: all of orders again, payments from where it was
    log.produce(payments, {0: 1, 1: 1}, "c")
    sut.step(
        "to-earliest",
        {"action": "toEarliest", "topics": [orders]},
        {(orders, 0): 0, (orders, 1): 0, (payments, 0): 3, (payments, 1): 3},
        orders_tps,
    )

    # alter one partition
    sut.step(
        "alter",
        {
            "action": "alter",
            "offsets": [{"partition": {"kafka_topic": payments, "kafka_partition": 1}, "offset": {"kafka_offset": 1}}],
        },
        {(orders, 0): 5, (orders, 1): 5, (payments, 0): 4, (payments, 1): 1},
        {(payments, 1)},
    )

    # reset: every committed offset goes, the sink starts again from the earliest
    cleared = sut.step("reset", {"action": "reset"}, {}, every)
    backup = cleared["backup"]["configMap"]

    # restore the reset's backup: the offsets from before it, exactly
    log.produce(payments, {0: 1, 1: 1}, "d")
    sut.set_state("running")
    newest = Counter(log.records[(payments, 0)][-1:] + log.records[(payments, 1)][-1:])
    assert sut.out.new(newest) == newest
    sut.consumed_everything()
    sut.set_state("paused")
    sut.step(
        "restore",
        {"action": "restore", "restoreFrom": backup},
        {(orders, 0): 5, (orders, 1): 5, (payments, 0): 4, (payments, 1): 4},
        every,
    )


def offsets_for_time(bootstrap: str, tps: Iterable[TP], ts: int) -> dict[TP, int]:
    """ListOffsets by time, straight from the broker with the test's own client: the first offset
    whose timestamp is at or after ``ts`` (the end offset where there is none)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = list(tps)
    by_time = admin.list_offsets({TopicPartition(t, p): OffsetSpec.for_timestamp(ts) for t, p in wanted})
    latest = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted})
    out: dict[TP, int] = {}
    for tp, future in by_time.items():
        offset = int(future.result(timeout=15).offset)
        key = (tp.topic, tp.partition)
        out[key] = offset if offset >= 0 else int(latest[tp].result(timeout=15).offset)
    return out


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_sink_to_timestamp_starts_at_the_first_record_at_or_after_it(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path, strategy: str
) -> None:
    sut = SinkUnderTest(k8s, connect, tmp_path, strategy)
    t0 = int(time.time() * 1000) - 3_600_000
    # CreateTime set by the producer: partition 0 at t0 + 0/10/20/30 s, partition 1 at t0 + 5/25 s
    sut.log.produce(sut.orders, {0: 4}, "a", timestamps=[t0, t0 + 10_000, t0 + 20_000, t0 + 30_000])
    sut.log.produce(sut.orders, {1: 2}, "a", timestamps=[t0 + 5_000, t0 + 25_000])
    sut.log.produce(sut.payments, {0: 1, 1: 1}, "a")
    sut.create()
    sut.out.new(sut.log.after({}))
    sut.consumed_everything()
    sut.set_state("paused")
    at = t0 + 15_000
    orders_tps = {(sut.orders, 0), (sut.orders, 1)}
    # the test's own knowledge of the timestamps, and the broker's ListOffsets by time, agree
    assert offsets_for_time(connect.bootstrap, orders_tps, at) == {(sut.orders, 0): 2, (sut.orders, 1): 1}
    sut.step(
        f"to-timestamp-{strategy}",
        {"action": "toTimestamp", "timestamp": str(at), "topics": [sut.orders]},
        {(sut.orders, 0): 2, (sut.orders, 1): 1, (sut.payments, 0): 1, (sut.payments, 1): 1},
        orders_tps,
    )


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_sink_to_earliest_after_delete_records_lands_on_the_log_start(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path, strategy: str
) -> None:
    """Retention or DeleteRecords moves a partition's log start: "earliest" is then that offset,
    not 0, and the records below it can never be read again."""
    from confluent_kafka import TopicPartition

    sut = SinkUnderTest(k8s, connect, tmp_path, strategy)
    sut.log.produce(sut.orders, {0: 5, 1: 5}, "a")
    sut.log.produce(sut.payments, {0: 2, 1: 2}, "a")
    sut.create()
    sut.out.new(sut.log.after({}))
    sut.consumed_everything()
    sut.set_state("paused")
    admin = AdminClient({"bootstrap.servers": connect.bootstrap})
    deleted = admin.delete_records([TopicPartition(sut.orders, 0, 3)])
    for future in deleted.values():
        assert future.result(timeout=15).low_watermark == 3
    orders_tps = {(sut.orders, 0), (sut.orders, 1)}
    # the sink resumes at the log start: only what is still in the log comes again
    expected = {(sut.orders, 0): 3, (sut.orders, 1): 0, (sut.payments, 0): 2, (sut.payments, 1): 2}
    before = group_commits(connect.bootstrap, sut.group)
    status = reset(
        k8s,
        f"to-earliest-{strategy}",
        {"connectorRef": {"name": sut.name}, "strategy": strategy, "action": "toEarliest", "topics": [sut.orders]},
        timeout=180,
    )
    assert status["strategy"] == strategy
    after = group_commits(connect.bootstrap, sut.group)
    for tp in set(before) - orders_tps:
        assert after.get(tp) == before[tp], f"{tp} must not move: {before[tp]} -> {after.get(tp)}"
    assert {tp: c[0] for tp, c in after.items()} == expected
    assert connect_offsets(sut.rest, sut.name) == expected
    sut.set_state("running")
    # orders p0: offsets 3 and 4 again (2 lines); orders p1: all 5 again; payments: nothing
    again: Counter[str] = Counter(
        [f"{sut.orders}-p0-a3", f"{sut.orders}-p0-a4", *(f"{sut.orders}-p1-a{i}" for i in range(5))]
    )
    assert sut.out.new(again) == again
