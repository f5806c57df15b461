"""GroupFailover on real MirrorMaker 2: consumer group G moves from cluster ``a`` to ``b``.

Apache Kafka's own connect-mirror connectors (4.3.1) replicate ``orders-<run>`` from a second
broker (``a``) to the session's broker (``b``, which also holds the Connect worker's topics),
configured by Connector objects (both brokers and the worker are tests/e2e/mm2_fixtures.py's,
shared with the other MM2 modules); a consumer of G on ``a`` reads part of the topic and
commits; MM2 checkpoints G to ``b``. Then the failover, and a consumer of G on ``b`` reading
``a.orders-<run>`` from what it committed there. While G runs on ``b`` it also writes and reads
a topic of ``b``'s own; a real b -> a flow (MirrorSourceConnector and MirrorCheckpointConnector
on the same worker, Connector objects too) mirrors that topic to ``a`` and checkpoints G's
position on it, and shows what it does not do: mirror ``a.orders-<run>`` back, or checkpoint G's
position there (MirrorSourceConnector.isCycle; no sync for OffsetSyncStore to translate with).
So the failback to ``a`` is translated through the a -> b flow's offset syncs read in reverse;
G's position on ``b``'s own topic moves by a failover through the b -> a flow's checkpoints.

Truth is read from the clusters, never from the failover's status: which records each consumer
read (by content), G's committed offsets on ``b`` (OffsetFetch), MM2's checkpoints and offset
syncs decoded by tests/env/mm2.py (not the operator's decoder), and the record counts re-read
compared with the plan's estimate. MM2 intervals shortened: ``emit.checkpoints.interval.seconds``
and ``sync.group.offsets.interval.seconds`` to 1 s (tests.env.mm2.SHORT_INTERVALS, and why there);
MM2's group sync is off for the flow that fails over (on, it would overwrite the failover; the
second test shows it refused).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from connectops.models import GROUP
from tests.e2e.conftest import ConnectREST, K8s, wait_for
from tests.e2e.mm2_fixtures import CLUSTER, COMMITTED, UPSTREAM, Flow, cluster_a, mm2_worker, produce_topic, start_flow
from tests.e2e.test_plan import _object, _plan
from tests.env.mm2 import (
    MIRROR_CHECKPOINT,
    MIRROR_SOURCE,
    Checkpoint,
    OffsetSync,
    consume_and_commit,
    decode_checkpoint,
    group_offsets,
    mirror_configs,
    offset_syncs,
    read_records,
    translate_downstream,
    values_by_partition,
)
from tests.env.servers import ConnectWorker, KafkaBroker

pytestmark = pytest.mark.timeout(300)
__all__ = ["cluster_a", "mm2_worker"]  # the shared MM2 fixtures (tests/e2e/mm2_fixtures.py)

ALLOWLIST_ENV = "CONNECTOPS_FAILOVER_GROUPS"
#: records the application writes to b's own topic while it runs there, and what it processed
LOCAL = {0: 5, 1: 4}
LOCAL_COMMITTED = {0: 3, 1: 2}


def cluster_access(broker: KafkaBroker) -> dict[str, Any]:
    return {"bootstrapServers": broker.bootstrap}


def failover(k8s: K8s, name: str, spec: dict[str, Any], timeout: float = 90) -> dict[str, Any]:
    """Create the GroupFailover and return its status once it has a phase."""
    k8s.create("groupfailovers", name, spec, "GroupFailover")

    def phase() -> dict[str, Any] | None:
        status: dict[str, Any] = k8s.get("groupfailovers", name).get("status") or {}
        return status if status.get("phase") else None

    result: dict[str, Any] = wait_for(phase, timeout, f"GroupFailover {name} finished")
    return result


class Member:
    """A consumer of ``group`` on ``bootstrap`` polling in a thread: an active member."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            }
        )
        self.consumer.subscribe([topic])
        self.assigned = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.2)
            if self.consumer.assignment():
                self.assigned.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def read_rest_as_group(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> dict[int, list[bytes]]:
    """A consumer of ``group`` subscribes to ``topic`` and reads from G's committed offsets
    (``auto.offset.reset=error``: no committed offset would fail, not silently start somewhere)
    up to the end offsets; it commits nothing."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    read: dict[int, list[bytes]] = {p: [] for p in ends}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in consumer.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                read[int(m.partition() or 0)].append(m.value() or b"")
            positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in ends])}
            if consumer.assignment() and all(positions.get(p, -1) >= end for p, end in ends.items()):
                break
        else:
            raise AssertionError(f"read {read} up to {ends}")
    finally:
        consumer.close()
    return read


def test_failover_and_failback_move_the_group_with_no_record_lost_and_the_planned_rereads(
    k8s: K8s,
    cluster_a: KafkaBroker,
    kafka: KafkaBroker,
    mm2_worker: ConnectWorker,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Refusals first (each with nothing written on ``b``): a group outside the namespace's list,
    a group MM2 never checkpointed, a dry run, a member of G on ``b``; then the failover, a
    consumer of G on ``b`` reading the rest; the b -> a flow, the failback refused while it syncs
    G, then the failback to ``a`` from where G committed on ``b``, and a consumer of G on ``a``
    reading the rest; G's position on ``b``'s own topic moved through the b -> a flow; the
    restore of G's previous offsets on ``b``."""
    a, b = cluster_a, kafka
    # MM2's group sync off: it would overwrite the failover (the second test shows it refused)
    flow = start_flow(k8s, a, b, mm2_worker, groups=["app-{run}", "other-{run}"], group_sync=False)
    run, topic, remote = flow.run, flow.topic, flow.remote
    group, unchecked = flow.group, f"other-{run}"
    monkeypatch.setenv(ALLOWLIST_ENV, json.dumps({k8s.ns: ["app-*", unchecked]}))
    read_on_a = flow.read[group]
    ends = dict(UPSTREAM)  # start_flow waited for every record on b

    def checkpointed() -> bool:
        cps = flow.checkpoints()
        return set(cps) == set(UPSTREAM) and all(cps[p][-1].upstream == COMMITTED[p] for p in UPSTREAM)

    wait_for(checkpointed, 60, "a checkpoint of G at its committed offset for each partition")
    cps = {p: c[-1] for p, c in flow.checkpoints().items()}
    syncs = flow.syncs()  # on a: offset-syncs.topic.location=source
    for p, cp in cps.items():
        assert cp.downstream == translate_downstream(syncs[p], COMMITTED[p])
    spec = {
        "group": group,
        "clusterRef": {"name": "mm2"},
        "checkpointConnector": flow.names["checkpoint"],
        "sourceCluster": cluster_access(a),
        "targetCluster": cluster_access(b),
    }

    # G's earlier offsets on b (as an earlier failover or MM2's sync left them): the backup's
    previous = {0: 2, 1: 1}
    admin_b = AdminClient(b.admin_config())  # held: a dropped client never answers its futures
    admin_b.alter_consumer_group_offsets([_group_request(group, remote, previous)])[group].result(timeout=30)
    assert group_offsets(b.bootstrap, group, remote, 2) == previous

    # 1. not on the namespace's list
    status = failover(k8s, "not-listed", {**spec, "group": f"billing-{run}"})
    assert status["phase"] == "Refused"
    assert f"group billing-{run} may not be moved from namespace {k8s.ns}" in status["message"]
    # 2. a group MM2 never checkpointed (outside the connector's groups): named by partition
    status = failover(k8s, "unchecked", {**spec, "group": unchecked})
    assert status["phase"] == "Refused"
    assert f"no checkpoint of group {unchecked}" in status["message"]
    assert f"{topic}[0], {topic}[1]" in status["message"]
    assert group_offsets(b.bootstrap, unchecked, remote, 2) == {}
    # 3. the dry run: the plan, nothing written
    status = failover(k8s, "dry", {**spec, "dryRun": True})
    assert status["phase"] == "Planned", status
    plan = status["plan"]
    assert plan["partitions"] == 2
    by_partition = {e["partition"]: e for e in plan["sample"]}
    # the plan's estimate against an independent computation from MM2's own syncs (tests/env/mm2)
    expected_reread = {}
    for p in cps:
        sync = [s for s in syncs[p] if s.upstream <= COMMITTED[p]][-1]
        expected_reread[p] = 0 if sync.upstream == COMMITTED[p] else COMMITTED[p] - sync.upstream - 1
    for p in UPSTREAM:
        entry = by_partition[p]
        assert (entry["sourceOffset"], entry["targetTopic"], entry["targetOffset"]) == (
            COMMITTED[p],
            remote,
            cps[p].downstream,
        )
        assert entry["reread"] == expected_reread[p]
    assert plan["rereadTotal"] == sum(expected_reread.values())
    assert group_offsets(b.bootstrap, group, remote, 2) == previous
    # the same plan from `connectops plan` (the installed CLI, the user's kubeconfig): it writes nothing
    code, out = _plan(tmp_path, k8s.ns, _object("GroupFailover", "planned", spec), output="json")
    assert code == 2, out
    (changes,) = [o["changes"] for o in json.loads(out)["objects"]]
    assert changes[:2] == [
        "create the GroupFailover object",
        f"failover group {group}: 2 partition(s) written on {b.bootstrap}, "
        f"at most {sum(expected_reread.values())} record(s) read again",
    ]
    for p, cp in cps.items():
        line = f"  {topic}[{p}] at {COMMITTED[p]} -> {remote}[{p}] at {cp.downstream}, {expected_reread[p]} read again"
        assert line in changes, changes
    assert group_offsets(b.bootstrap, group, remote, 2) == previous
    # 4. a member of G on b: refused, the member named, nothing written
    member = Member(b.bootstrap, group, remote, client_id=f"blocker-{run}")
    try:
        assert member.assigned.wait(30), "the member never joined"
        status = failover(k8s, "busy", spec)
    finally:
        member.close()
    assert status["phase"] == "Refused"
    assert "active member(s)" in status["message"]
    assert f"blocker-{run}@" in status["message"]
    assert group_offsets(b.bootstrap, group, remote, 2) == previous

    # 5. the failover
    status = failover(k8s, "move", spec)
    assert status["phase"] == "Succeeded", status
    assert status["written"] == 2
    assert group_offsets(b.bootstrap, group, remote, 2) == {p: cp.downstream for p, cp in cps.items()}
    read_on_b = read_rest_as_group(b.bootstrap, group, remote, ends)
    for p, values in flow.produced.items():
        # no record lost: what was read on a and on b together is every record, in order
        seen = read_on_a[p] + read_on_b[p]
        assert set(seen) == set(values), p
        assert read_on_b[p] == values[len(values) - len(read_on_b[p]) :]
        # read twice: exactly the plan's estimate (the topic has no gaps)
        twice = len(set(read_on_a[p]) & set(read_on_b[p]))
        assert twice == by_partition[p]["reread"] == len(seen) - len(values), p

    backup = status["backup"]

    # 6. the application runs on b: it processed a.<topic> up to on_b, and it writes and reads a
    # topic of b's own (named <topic> too, as an application keeps its topic names on failover)
    on_b = {0: 8, 1: 5}
    admin_b.alter_consumer_group_offsets([_group_request(group, remote, on_b)])[group].result(timeout=30)
    local = _produce(b, topic, LOCAL)
    assert consume_and_commit(b.bootstrap, group, topic, LOCAL_COMMITTED) == {
        p: local[p][:n] for p, n in LOCAL_COMMITTED.items()
    }
    # the b -> a flow, started after G committed on b (MM2 lists topics and groups when its
    # connectors start), with MM2's group sync of G on at an hour: nothing writes a in the test
    back = _start_back_flow(k8s, flow, topics=[topic, remote], sync_interval_s=3600)
    local_remote = f"{flow.target_alias}.{topic}"  # b.<topic> on a
    wait_for(lambda: values_by_partition(read_records(a.bootstrap, local_remote)) == local, 90, "b's topic on a")
    # the b -> a flow's syncs (on b, offset-syncs.topic.location=source) are of b's own topic
    # only: MirrorSourceConnector.isCycle skips a.<topic> (its source is the flow's target)
    back_syncs_topic = f"mm2-offset-syncs.{flow.source_alias}.internal"
    assert offset_syncs(b.bootstrap, back_syncs_topic, remote) == {}
    on_a = {t for t in AdminClient(a.admin_config()).list_topics(timeout=15).topics if t.startswith(flow.target_alias)}
    assert on_a == {local_remote, f"{flow.target_alias}.checkpoints.internal"}  # no b.a.<topic>, no b.heartbeats
    back_checkpoints_topic = f"{flow.target_alias}.checkpoints.internal"

    def back_checkpointed() -> dict[tuple[str, int], Checkpoint] | None:
        records = read_records(a.bootstrap, back_checkpoints_topic)
        latest = {(c.topic, c.partition): c for c in map(decode_checkpoint, records) if c.group == group}
        upstream = {tp: c.upstream for tp, c in latest.items()}
        return latest if upstream == {(local_remote, p): n for p, n in LOCAL_COMMITTED.items()} else None

    # MM2's checkpoints of G on a: of b's own topic, renamed <topic> -> b.<topic>, translated by
    # the flow's syncs; none of a.<topic> (which MirrorCheckpointTask.renameTopicPartition would
    # name <topic>): OffsetSyncStore.translateDownstream has no sync for it, and the task skips it
    back_cps = wait_for(back_checkpointed, 60, "the b -> a flow's checkpoints of G")
    local_syncs = offset_syncs(b.bootstrap, back_syncs_topic, topic)
    for p, n in LOCAL_COMMITTED.items():
        assert back_cps[(local_remote, p)].downstream == translate_downstream(local_syncs[p], n)
    every = [decode_checkpoint(r) for r in read_records(a.bootstrap, back_checkpoints_topic)]
    assert {c.topic for c in every if c.group == group} == {local_remote}

    # 7. MM2's b -> a group sync covers G: the failback is refused, nothing written on a
    before = _all_offsets(a, group)
    status = failover(k8s, "back-synced", {**spec, "action": "failback"})
    assert status["phase"] == "Refused", status
    reason = f"sync.group.offsets.enabled on {back.names['checkpoint']}"
    assert reason in status["message"]
    (condition,) = [c for c in status["conditions"] if c["type"] == "Succeeded"]
    assert (condition["status"], condition["reason"]) == ("False", "Refused")
    wait_for(
        lambda: [e for e in k8s.events("back-synced") if e.reason == "FailoverRefused" and reason in e.message],
        30,
        "the refusal's Event",
    )
    assert _all_offsets(a, group) == before
    assert not status.get("backup")
    assert not [
        cm
        for cm in k8s.core.list_namespaced_config_map(k8s.ns).items
        if (cm.metadata.annotations or {}).get(f"{GROUP}/group-failover") == "back-synced"
    ]
    # as the refusal says: MM2's sync of G off on the b -> a checkpoint connector (its Connector)
    back.set_checkpoint_config({"sync.group.offsets.enabled": "false"})

    # 8. failback: G moves back to a through the a -> b flow's offset syncs read in reverse,
    # exactly (no record read twice): the only translation there is (no b -> a checkpoint of it)
    syncs = flow.syncs()
    held = read_records(b.bootstrap, remote)
    back_on_a = {p: _upstream_of(syncs[p], [r.offset for r in held if r.partition == p], d) for p, d in on_b.items()}
    status = failover(k8s, "back", {**spec, "action": "failback"})
    assert status["phase"] == "Succeeded", status
    assert status["plan"]["rereadTotal"] == 0
    # on a: G's offsets of <topic>, and only those (b's own topic is the b -> a flow's: step 9)
    assert _all_offsets(a, group) == {(topic, p): o for p, o in back_on_a.items()}
    read_again_on_a = read_rest_as_group(a.bootstrap, group, topic, ends)
    for p, values in flow.produced.items():
        processed_on_b = read_on_b[p][: len(read_on_b[p]) - (ends[p] - on_b[p])]
        assert set(read_again_on_a[p]) & set(processed_on_b) == set(), p
        assert values[: back_on_a[p]] + read_again_on_a[p] == values, p
    failback_backup = json.loads(k8s.core.read_namespaced_config_map(status["backup"], k8s.ns).data["backup.json"])
    assert failback_backup["cluster"] == a.bootstrap
    assert {(o["topic"], o["partition"]): o["offset"] for o in failback_backup["offsets"]} == {
        (topic, p): o for p, o in COMMITTED.items()
    }

    # 9. b's own topic: a failover through the b -> a flow's checkpoints (MM2's forward
    # translation, so the records between the sync and G's offset are read again)
    back_spec = {
        **spec,
        "checkpointConnector": back.names["checkpoint"],
        "sourceCluster": cluster_access(b),
        "targetCluster": cluster_access(a),
        "topics": [topic],
    }
    status = failover(k8s, "local-to-a", back_spec)
    assert status["phase"] == "Succeeded", status
    local_plan = {e["partition"]: e for e in status["plan"]["sample"]}
    assert {p: (e["targetTopic"], e["targetOffset"]) for p, e in local_plan.items()} == {
        p: (local_remote, back_cps[(local_remote, p)].downstream) for p in LOCAL
    }
    read_local_on_a = read_rest_as_group(a.bootstrap, group, local_remote, dict(LOCAL))
    for p, values in local.items():
        twice = len(set(values[: LOCAL_COMMITTED[p]]) & set(read_local_on_a[p]))
        assert values[: LOCAL_COMMITTED[p]] + read_local_on_a[p][twice:] == values, p
        assert twice == local_plan[p]["reread"], p
    assert status["plan"]["rereadTotal"] == sum(e["reread"] for e in local_plan.values())

    # 10. restore: G's offsets on b are back to those before the failover, read from the backup
    doc = json.loads(k8s.core.read_namespaced_config_map(backup, k8s.ns).data["backup.json"])
    assert {(o["topic"], o["partition"]): o["offset"] for o in doc["offsets"]} == {
        (remote, p): o for p, o in previous.items()
    }
    status = failover(k8s, "undo", {**spec, "action": "restore", "restoreFrom": backup})
    assert status["phase"] == "Succeeded", status
    assert group_offsets(b.bootstrap, group, remote, 2) == previous


def _upstream_of(syncs: list[OffsetSync], offsets: list[int], downstream: int) -> int:
    """The source offset of a target offset from MM2's syncs (decoded by tests/env/mm2): the
    latest sync at or before it, plus the records of the remote topic (their ``offsets``) from
    the sync up to it (MM2 writes a sync wherever upstream skips, not where downstream does)."""
    sync = [s for s in syncs if s.downstream <= downstream][-1]
    return sync.upstream + len([o for o in offsets if sync.downstream <= o < downstream])


def _group_request(group: str, topic: str, offsets: dict[int, int]) -> Any:
    return ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in offsets.items()])


def _all_offsets(broker: KafkaBroker, group: str) -> dict[tuple[str, int], int]:
    """Every committed offset of ``group`` on ``broker`` (OffsetFetch of all its partitions)."""
    admin = AdminClient(broker.admin_config())
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def _produce(broker: KafkaBroker, topic: str, counts: dict[int, int]) -> dict[int, list[bytes]]:
    return produce_topic(broker, topic, counts, "b")


class BackFlow:
    """The MM2 flow b -> a on the shared worker: MirrorSourceConnector and MirrorCheckpointConnector
    (no heartbeats: nothing needs them back on a), Connector objects as the a -> b flow's."""

    def __init__(self, k8s: K8s, flow: Flow, names: dict[str, str], configs: dict[str, dict[str, str]]) -> None:
        self.k8s, self.flow, self.names, self.configs = k8s, flow, names, configs
        self.rest = ConnectREST(flow.worker)

    def set_checkpoint_config(self, changes: dict[str, str]) -> None:
        """Change the checkpoint connector's Connector object; returns once the worker runs it."""
        config = self.configs["checkpoint"] = {**self.configs["checkpoint"], **changes}
        self.k8s.patch_spec("connectors", self.names["checkpoint"], {"config": config})
        wanted = config.items()
        wait_for(lambda: wanted <= self.rest.config(self.names["checkpoint"]).items(), 60, "the changed config")
        wait_for(lambda: self.rest.state(self.names["checkpoint"]) == "RUNNING", 60, "the checkpoint connector")


def _start_back_flow(k8s: K8s, flow: Flow, *, topics: list[str], sync_interval_s: int) -> BackFlow:
    """b -> a with explicit ``topics`` and the flow's group, MM2's group sync of it on at
    ``sync_interval_s``; returns once both connectors are Ready."""
    configs = mirror_configs(
        source_alias=flow.target_alias,
        target_alias=flow.source_alias,
        source_bootstrap=flow.b.bootstrap,
        target_bootstrap=flow.a.bootstrap,
        topics=",".join(topics),
        groups=flow.group,
    )
    configs["checkpoint"]["sync.group.offsets.interval.seconds"] = str(sync_interval_s)
    names = {"source": f"mm2-back-source-{flow.run}", "checkpoint": f"mm2-back-checkpoint-{flow.run}"}
    classes = {"source": MIRROR_SOURCE, "checkpoint": MIRROR_CHECKPOINT}
    for role, name in names.items():
        spec = {
            "clusterRef": {"name": CLUSTER},
            "class": classes[role],
            "tasksMax": 1,
            "config": configs[role],
            # Connect writes a source connector's records with the worker's producer, to the
            # worker's cluster (b): MM2's target.cluster.bootstrap.servers serves only its admin
            # and target-side clients, so records and checkpoints for a need the override
            "producerOverrides": {"config": {"bootstrap.servers": flow.a.bootstrap}},
            "check": {"enabled": False},
        }
        k8s.create("connectors", name, spec, "Connector")
    for name in names.values():
        k8s.wait_condition("connectors", name, "Ready", "True", timeout=120)
    return BackFlow(k8s, flow, names, {role: configs[role] for role in names})


def test_failover_refused_while_mm2_syncs_the_group_itself(
    k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, mm2_worker: ConnectWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With sync.group.offsets.enabled and G within the checkpoint connector's groups, MM2 would
    overwrite G's offsets on b: refused, naming the connector, with nothing written."""
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker, group_sync=True, wait=False)
    group = flow.group
    monkeypatch.setenv(ALLOWLIST_ENV, json.dumps({k8s.ns: [group]}))
    checkpoint = flow.names["checkpoint"]
    wait_for(lambda: flow.rest.exists(checkpoint), 60, "the checkpoint connector on Connect")
    status = failover(
        k8s,
        "synced",
        {
            "group": group,
            "clusterRef": {"name": "mm2"},
            "checkpointConnector": checkpoint,
            "sourceCluster": cluster_access(cluster_a),
            "targetCluster": cluster_access(kafka),
        },
    )
    assert status["phase"] == "Refused"
    assert f"sync.group.offsets.enabled on {checkpoint}" in status["message"]
    assert not status.get("backup")
    assert group_offsets(kafka.bootstrap, group, flow.remote, 2) == {}
