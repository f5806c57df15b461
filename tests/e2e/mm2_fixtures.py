"""One MirrorMaker 2 set-up for the end-to-end modules that run real MM2 between two clusters
(test_offset_reset_mm2, test_mm2_check, test_group_failover).

Source cluster ``a`` is a second Apache Kafka broker; target cluster ``b`` is the session's
broker, which also holds the Connect worker's topics (MM2 runs on the target side, as
recommended). The worker is a Connect worker group of its own on ``b`` with Kafka's own libs (so
connect-mirror) on its classpath: only MM2 flows are in its listing, which a reset searches for
other flows sharing its offset-syncs topic (each flow has its own aliases, so its own topic).

Both servers are shared by every test of this process that asks for them, started at the first
and stopped after the last test in a row that uses them (``stop_idle``, called by
tests/e2e/conftest.py after each test whose next test does not use them): under ``--dist
loadfile`` two MM2 modules on one xdist worker share one pair, and no idle pair outlives them.
The tests stay independent: each :func:`start_flow` has its own topic, group, aliases (so its own
offset-syncs and checkpoints topics) and connector names; a test's Connector objects go with its
namespace.

Import the fixtures into a test module (``from tests.e2e.mm2_fixtures import cluster_a,
mm2_worker``, and list them in ``__all__``), as the Spark tests share ``spark``.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.env.mm2 import (
    MIRROR_CHECKPOINT,
    MIRROR_HEARTBEAT,
    MIRROR_SOURCE,
    Checkpoint,
    OffsetSync,
    checkpoints,
    consume_and_commit,
    mirror_configs,
    offset_syncs,
    read_records,
    values_by_partition,
)
from tests.env.records import batching_producer
from tests.env.servers import ConnectFactory, ConnectWorker, KafkaBroker

#: records produced per partition of a flow's source topic (unequal, so a count per partition
#: shows which partition was replicated again)
UPSTREAM: Final = {0: 10, 1: 6}
#: what a flow's consumer groups read on ``a`` and committed, per partition
COMMITTED: Final = {0: 6, 1: 4}
ROLES: Final = {"source": MIRROR_SOURCE, "checkpoint": MIRROR_CHECKPOINT, "heartbeat": MIRROR_HEARTBEAT}
#: the ConnectCluster object naming the MM2 worker in a test's namespace
CLUSTER: Final = "mm2"


class SharedMirror:
    """The source broker and the MM2 worker, started on first use, again after ``stop``."""

    _runs = itertools.count(1)

    def __init__(self, root: Path, connect_factory: ConnectFactory) -> None:
        self.root, self.connect_factory = root, connect_factory
        self._broker: KafkaBroker | None = None
        self._worker: ConnectWorker | None = None

    def cluster_a(self) -> KafkaBroker:
        if self._broker is None:
            # a directory of its own per start: a broker never starts in a stopped one's
            broker = KafkaBroker(self.root, name=f"mm2-cluster-a-{next(self._runs)}")
            broker.start()
            self._broker = broker
        return self._broker

    def worker(self) -> ConnectWorker:
        if self._worker is None:
            worker = self.connect_factory(f"mm2-{next(self._runs)}")
            plugins = {p["class"] for p in httpx.get(f"{worker.url}/connector-plugins", timeout=30).json()}
            assert set(ROLES.values()) <= plugins, plugins
            self._worker = worker
        return self._worker

    def stop(self) -> None:
        # the worker first: its MM2 tasks fetch from a, and would log its absence until stopped
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._broker is not None:
            self._broker.stop()
            self._broker = None


_shared: list[SharedMirror] = []
#: the fixtures that start the shared servers (tests/e2e/conftest.py looks for them)
FIXTURES: Final = ("cluster_a", "mm2_worker")


def _servers(root: Path, connect_factory: ConnectFactory) -> SharedMirror:
    if not _shared:
        _shared.append(SharedMirror(root, connect_factory))
    return _shared[0]


def stop_idle() -> None:
    """Stop the shared servers (the next test does not use them); a later user starts them again."""
    for shared in _shared:
        shared.stop()


@pytest.fixture
def cluster_a(testenv_root: Path, connect_factory: ConnectFactory) -> KafkaBroker:
    """The source cluster: a broker of its own (its own cluster id)."""
    return _servers(testenv_root, connect_factory).cluster_a()


@pytest.fixture
def mm2_worker(testenv_root: Path, connect_factory: ConnectFactory) -> ConnectWorker:
    """The MM2 Connect worker group on the target cluster (the session's broker)."""
    return _servers(testenv_root, connect_factory).worker()


@dataclass
class Flow:
    """One MM2 flow a -> b: three connectors managed by Connector objects, and what it mirrored."""

    run: str
    a: KafkaBroker
    b: KafkaBroker
    worker: ConnectWorker
    rest: ConnectREST
    location: str
    source_alias: str
    target_alias: str
    topic: str
    group: str
    names: dict[str, str]
    configs: dict[str, dict[str, str]]
    produced: dict[int, list[bytes]] = field(default_factory=dict)
    #: what each consumer group read on ``a`` before MM2 started, by group
    read: dict[str, dict[int, list[bytes]]] = field(default_factory=dict)

    @property
    def remote(self) -> str:
        return f"{self.source_alias}.{self.topic}"

    @property
    def syncs_topic(self) -> str:
        # MM2's name, independently of the operator: the alias of the OTHER cluster than the one
        # holding it (MirrorConnectorConfig.offsetSyncsTopic)
        other = self.target_alias if self.location == "source" else self.source_alias
        return f"mm2-offset-syncs.{other}.internal"

    @property
    def syncs_cluster(self) -> KafkaBroker:
        return self.a if self.location == "source" else self.b

    @property
    def checkpoints_topic(self) -> str:
        return f"{self.source_alias}.checkpoints.internal"

    def syncs(self) -> dict[int, list[OffsetSync]]:
        return offset_syncs(self.syncs_cluster.bootstrap, self.syncs_topic, self.topic)

    def checkpoints(self, group: str | None = None) -> dict[int, list[Checkpoint]]:
        return checkpoints(self.b.bootstrap, self.checkpoints_topic, group or self.group)

    def target_values(self) -> dict[int, list[bytes]]:
        return values_by_partition(read_records(self.b.bootstrap, self.remote))

    def target_counts(self) -> dict[int, int]:
        return {p: len(v) for p, v in self.target_values().items()}

    def offsets(self, role: str) -> list[dict[str, Any]]:
        response = self.rest.http.get(self.rest.path(self.names[role]) + "/offsets", timeout=30)
        response.raise_for_status()
        # Connect 4.3 can list a partition just reset as "offset": null for a moment: none
        result: list[dict[str, Any]] = [e for e in response.json()["offsets"] if e["offset"] is not None]
        return result

    def source_offsets(self) -> dict[tuple[str, int], int]:
        """MirrorSourceConnector's stored offsets: (cluster alias, partition) -> last replicated."""
        return {
            (e["partition"]["cluster"], e["partition"]["partition"]): e["offset"]["offset"]
            for e in self.offsets("source")
        }

    def checkpoint_partitions(self) -> set[int]:
        return {e["partition"]["partition"] for e in self.offsets("checkpoint")}

    def offsets_log(self) -> dict[str, list[Any]]:
        """Every value written to the worker's offsets topic for this flow's connectors, by key
        (the JSON text of ``[connector, partition]``, keys sorted), in log order: a reset shows
        as a null (a tombstone) between the values before and after."""
        log: dict[str, list[Any]] = {}
        wanted = set(self.names.values())
        for record in read_records(self.b.bootstrap, self.worker.offset_topic):
            key = json.loads(record.key or b"null")
            if isinstance(key, list) and len(key) == 2 and key[0] in wanted:
                text = json.dumps(key, sort_keys=True)
                log.setdefault(text, []).append(None if record.value is None else json.loads(record.value))
        return log

    def key(self, role: str, partition: dict[str, Any]) -> str:
        return json.dumps([self.names[role], partition], sort_keys=True)

    def block(self, **extra: Any) -> dict[str, Any]:
        """The OffsetReset's mirrorMaker2 block for this flow."""
        return {
            "sourceConnector": self.names["source"],
            "checkpointConnector": self.names["checkpoint"],
            "heartbeatConnector": self.names["heartbeat"],
            "sourceAlias": self.source_alias,
            "targetAlias": self.target_alias,
            "offsetSyncsTopicLocation": self.location,
            "sourceCluster": {"bootstrapServers": self.a.bootstrap},
            "targetCluster": {"bootstrapServers": self.b.bootstrap},
            **extra,
        }


def produce_topic(broker: KafkaBroker, topic: str, counts: Mapping[int, int], prefix: str) -> dict[int, list[bytes]]:
    """Create ``topic`` with a partition per ``counts`` key and write that many records to each,
    ``<prefix><partition>-<i>`` as key and value, batched as producers do."""
    admin = AdminClient(broker.admin_config())
    admin.create_topics([NewTopic(topic, len(counts), 1)])[topic].result(timeout=15)
    broker.wait_for_leaders(topic, len(counts))
    values = {p: [f"{prefix}{p}-{i}".encode() for i in range(n)] for p, n in counts.items()}
    producer = batching_producer(broker.bootstrap)
    for p, records in values.items():
        for value in records:
            producer.produce(topic, key=value, value=value, partition=p)
    assert producer.flush(15) == 0
    return values


def start_flow(
    k8s: K8s,
    a: KafkaBroker,
    b: KafkaBroker,
    worker: ConnectWorker,
    *,
    location: str = "source",
    short_intervals: bool = True,
    groups: Sequence[str] = ("app-{run}",),
    group_sync: bool | None = None,
    wait: bool = True,
) -> Flow:
    """Records on ``a``, each of ``groups`` (``{run}`` filled in) reading COMMITTED of them and
    committing, then the three connectors (Connector objects). MM2 lists topics and groups when
    its connectors start (refresh.*.interval.seconds is 600 s), so all of that comes first.
    ``groups[0]`` is the only group MM2 checkpoints (the flow's ``group``).

    ``group_sync``: None keeps MM2's group sync on at the short interval (``mirror_configs``);
    False turns it off; True keeps it on but at an hour, so that it does not write ``b`` within
    the test (what a refusal asserts). With ``wait`` (the default) it returns once everything was
    mirrored and its offsets committed and, with short intervals, checkpointed."""
    run = uuid.uuid4().hex[:6]
    topic = f"orders-{run}"
    source_alias, target_alias = f"a-{run}", f"b-{run}"
    produced = produce_topic(a, topic, UPSTREAM, "p")
    named = [g.replace("{run}", run) for g in groups]
    read = {g: consume_and_commit(a.bootstrap, g, topic, COMMITTED) for g in named}
    for got in read.values():
        assert got == {p: produced[p][:n] for p, n in COMMITTED.items()}

    configs = mirror_configs(
        source_alias=source_alias,
        target_alias=target_alias,
        source_bootstrap=a.bootstrap,
        target_bootstrap=b.bootstrap,
        topics=topic,
        groups=named[0],
        location=location,
        short_intervals=short_intervals,
    )
    if group_sync is not None:
        configs["checkpoint"]["sync.group.offsets.enabled"] = "true" if group_sync else "false"
    if group_sync:
        configs["checkpoint"]["sync.group.offsets.interval.seconds"] = "3600"
    names = {role: f"mm2-{role}-{run}" for role in ROLES}
    if not k8s.exists("connectclusters", CLUSTER):
        k8s.create("connectclusters", CLUSTER, connect_cluster_spec(worker), "ConnectCluster")
        k8s.wait_condition("connectclusters", CLUSTER, "Ready", "True")
    for role, name in names.items():
        spec = {
            "clusterRef": {"name": CLUSTER},
            "class": ROLES[role],
            "tasksMax": 1,
            "config": configs[role],
            "check": {"enabled": False},
        }
        k8s.create("connectors", name, spec, "Connector")
    rest = ConnectREST(worker)
    flow = Flow(
        run, a, b, worker, rest, location, source_alias, target_alias, topic, named[0], names, configs, produced, read
    )
    if not wait:
        return flow
    for name in names.values():
        k8s.wait_condition("connectors", name, "Ready", "True", timeout=120)
    wait_for(lambda: flow.target_values() == produced, 90, "the topic mirrored to b")
    last = {(source_alias, p): n - 1 for p, n in UPSTREAM.items()}
    wait_for(lambda: flow.source_offsets() == last, 60, "MirrorSourceConnector's offsets committed")
    wait_for(lambda: flow.offsets("heartbeat"), 60, "MirrorHeartbeatConnector's offsets committed")
    if short_intervals:
        wait_for(lambda: set(flow.checkpoints()) == set(UPSTREAM), 60, "a checkpoint for each partition")
        wait_for(lambda: flow.checkpoint_partitions() == set(UPSTREAM), 60, "MirrorCheckpointConnector's offsets")
    return flow
