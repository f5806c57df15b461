"""MirrorMaker 2 resets on real MirrorMaker 2: Apache Kafka's own connect-mirror connectors between
two real clusters, configured through the operator's Connector objects.

Source cluster ``a``, target cluster ``b`` (the session's broker) and the MM2 worker are
tests/e2e/mm2_fixtures.py's, shared with the other MM2 modules. Each test builds its own flow
(its own aliases, so its own offset-syncs topic): a topic on ``a`` with a known number of
records per partition, replicated to ``<alias>.<topic>`` on ``b``; a consumer group on ``a``
that read part of it, checkpointed to ``b`` (and, with ``sync.group.offsets.enabled``, its
translated offsets written to ``b``'s group).

Truth is read from the clusters and the worker, never from the reset's status: the target
topic's records (what was replicated again, counted and compared per partition), Connect's
``GET /offsets`` for each connector, the worker's offsets topic, and MM2's offset-syncs and
checkpoints topics decoded here (tests/env/mm2.py). Which MM2 intervals are shortened, and why:
``tests.env.mm2.SHORT_INTERVALS``; ``test_mm2_reset_at_mm2_default_intervals`` keeps them all.
"""

from __future__ import annotations

import itertools
import time

import pytest
from confluent_kafka.admin import AdminClient

from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.e2e.mm2_fixtures import COMMITTED, ROLES, UPSTREAM, Flow, cluster_a, mm2_worker, start_flow
from tests.e2e.test_offset_reset_e2e import backup_doc, reset
from tests.env.mm2 import (
    MIRROR_SOURCE,
    Checkpoint,
    OffsetSync,
    group_offsets,
    topic_config,
    translate_downstream,
)
from tests.env.servers import ConnectWorker, KafkaBroker

pytestmark = pytest.mark.timeout(300)
__all__ = ["cluster_a", "mm2_worker"]  # the shared MM2 fixtures (tests/e2e/mm2_fixtures.py)


@pytest.fixture
def flow(k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, mm2_worker: ConnectWorker) -> Flow:
    # the Connector objects (and so the connectors) go with the test's namespace (k8s fixture)
    return start_flow(k8s, cluster_a, kafka, mm2_worker)


def last_checkpoints(flow: Flow) -> dict[int, Checkpoint]:
    return {p: cps[-1] for p, cps in flow.checkpoints().items()}


def assert_moves_only(checkpoints_of_partition: list[Checkpoint]) -> None:
    """MM2 writes a checkpoint only when the translated offset moves: with the group's offset
    unchanged, no two checkpoints in a row have the same downstream offset (a repeat is skipped,
    MirrorCheckpointTask.checkpointIsMoreRecent), and they never go backwards."""
    downstream = [c.downstream for c in checkpoints_of_partition]
    assert all(x < y for x, y in itertools.pairwise(downstream)), downstream


@pytest.mark.parametrize(
    ("strategy", "location", "cleanup"), [("rest", "source", "delete"), ("tombstone", "target", "truncate")]
)
def test_mm2_full_reset_rereplicates_every_partition(
    k8s: K8s,
    cluster_a: KafkaBroker,
    kafka: KafkaBroker,
    mm2_worker: ConnectWorker,
    strategy: str,
    location: str,
    cleanup: str,
) -> None:
    """stop all three -> remove their offsets -> delete (or truncate) the offset-syncs topic where
    it lives -> restart: MM2 replicates every record again, per partition, in order, and
    translates the group's offsets against the new syncs only."""
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker, location=location)
    other = flow.b if flow.syncs_cluster is flow.a else flow.a
    # MM2 made the topic where offset-syncs.topic.location says, compacted, under the other alias
    assert topic_config(flow.syncs_cluster.bootstrap, flow.syncs_topic)["cleanup.policy"] == "compact"
    assert flow.syncs_topic not in AdminClient(other.admin_config()).list_topics(timeout=10).topics
    before = {role: flow.offsets(role) for role in ROLES}
    syncs_before = flow.syncs()
    checkpoints_before = last_checkpoints(flow)
    for p, cp in checkpoints_before.items():
        assert (cp.topic, cp.upstream) == (flow.remote, COMMITTED[p])
        assert cp.downstream == translate_downstream(syncs_before[p], COMMITTED[p])
    assert set(checkpoints_before) == set(UPSTREAM)

    status = reset(
        k8s,
        "mm2-reset",
        {
            "clusterRef": {"name": "mm2"},
            "action": "reset",
            "strategy": strategy,
            "mirrorMaker2": flow.block(offsetSyncs=cleanup),
        },
        timeout=240,
    )
    assert status["strategy"] == strategy
    done = {"delete": "deleted", "truncate": "truncated"}[cleanup]
    assert {s["name"]: s for s in status["steps"]}["offsetSyncs"][
        "message"
    ] == f"{done} offset-syncs topic {flow.syncs_topic}"
    assert status["plan"]["offsetSyncsTopic"] == flow.syncs_topic
    assert status["plan"]["offsetSyncsCluster"] == location
    assert sorted(status["connectors"]) == sorted(flow.names.values())
    # every connector's offsets were saved before anything was changed
    doc = backup_doc(k8s, status["backup"]["configMap"])
    assert {role: doc["connectors"][name]["offsets"] for role, name in flow.names.items()} == before

    # the target topic: every partition holds its records twice, the second time in upstream
    # order from the first record (nothing stored: MM2's consumer starts at the earliest offset)
    twice = {p: values + values for p, values in flow.produced.items()}
    wait_for(lambda: flow.target_values() == twice, 90, "every record replicated again")
    time.sleep(2)
    assert flow.target_values() == twice  # and not a third time
    # Connect: the source caught up again; every connector's offsets were removed (a null in the
    # offsets topic after its last value from before) before the restarted tasks wrote new ones
    last = {(flow.source_alias, p): n - 1 for p, n in UPSTREAM.items()}
    wait_for(lambda: flow.source_offsets() == last, 60, "source offsets caught up")
    log = flow.offsets_log()
    for role in ROLES:
        for entry in before[role]:
            values = log[flow.key(role, entry["partition"])]
            assert entry["offset"] in values, (role, entry, values)
            assert None in values[values.index(entry["offset"]) :], (role, entry, values)
    # the offset-syncs topic was deleted (and made again by the restarted source connector) or
    # emptied: no sync from before survives; each partition's first sync maps upstream 0 to where
    # its first record landed the second time (downstream = the records mirrored before). The
    # topic is compacted again either way (a truncation lends it the delete policy only for the
    # call)
    wait_for(lambda: set(flow.syncs()) == set(UPSTREAM), 60, "new offset syncs")
    assert topic_config(flow.syncs_cluster.bootstrap, flow.syncs_topic)["cleanup.policy"] == "compact"
    syncs_after = flow.syncs()
    for p, n in UPSTREAM.items():
        assert syncs_after[p][0] == OffsetSync(flow.topic, p, 0, n), syncs_after[p]
        assert all(s.downstream >= n for s in syncs_after[p]), syncs_after[p]

    # checkpoints: the group did not move, its translation did (against the new syncs only), so
    # MM2 wrote new checkpoints; the checkpoints topic is not MM2's offset store and keeps the old
    def translated() -> dict[int, int] | None:
        syncs, last_cps = flow.syncs(), last_checkpoints(flow)
        want = {p: translate_downstream(syncs[p], COMMITTED[p]) for p in UPSTREAM}
        got = {p: cp.downstream for p, cp in last_cps.items()}
        return got if got == want and all(d >= UPSTREAM[p] for p, d in got.items()) else None

    final = wait_for(translated, 60, "checkpoints translated against the new syncs")
    for p, cps in flow.checkpoints().items():
        assert checkpoints_before[p] in cps
        assert_moves_only(cps[cps.index(checkpoints_before[p]) :])
    wait_for(lambda: flow.checkpoint_partitions() == set(UPSTREAM), 30, "checkpoint offsets written again")
    # and MM2's group sync moved the group on b (it has no members there) to the new translation
    wait_for(
        lambda: group_offsets(flow.b.bootstrap, flow.group, flow.remote, len(UPSTREAM)) == final,
        60,
        "the group's offsets on b",
    )
    for name in flow.names.values():
        assert flow.rest.state(name) == "RUNNING"


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_mm2_alter_resumes_after_the_stored_offset(k8s: K8s, flow: Flow, strategy: str) -> None:
    """MirrorSourceTask resumes at the stored offset + 1; an entry under another cluster alias is
    stored but ignored; a checkpoint offset can only be removed or set to 0, and a removed one
    comes back only when MM2 writes a checkpoint, i.e. when the translated offset moves."""
    other_alias = f"x-{flow.run}"
    # a checkpoint offset other than 0: refused in planning, nothing stopped
    bad = reset(
        k8s,
        "mm2-bad",
        {
            "clusterRef": {"name": "mm2"},
            "action": "alter",
            "mirrorMaker2": flow.block(offsetSyncs="keep"),
            "offsets": [
                {"partition": {"group": flow.group, "topic": flow.remote, "partition": 0}, "offset": {"offset": 5}}
            ],
        },
        phase="Failed",
    )
    cond = next(c for c in bad["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "only be reset" in cond["message"]
    assert all(flow.rest.state(n) == "RUNNING" for n in flow.names.values())

    n = 3  # partition 0 rewound to "record 3 replicated": records 4..9 come again
    checkpoints_before = last_checkpoints(flow)
    source_p0 = {"cluster": flow.source_alias, "topic": flow.topic, "partition": 0}
    foreign_p1 = {"cluster": other_alias, "topic": flow.topic, "partition": 1}
    checkpoint_p1 = {"group": flow.group, "topic": flow.remote, "partition": 1}
    # a new partition (one with no record in the offsets topic) can only be written over REST:
    # the tombstone path reuses Connect's own key bytes, and there are none for it
    foreign = [{"partition": foreign_p1, "offset": {"offset": 0}}] if strategy == "rest" else []
    status = reset(
        k8s,
        "mm2-alter",
        {
            "clusterRef": {"name": "mm2"},
            "action": "alter",
            "strategy": strategy,
            "mirrorMaker2": flow.block(offsetSyncs="keep"),
            "offsets": [
                {"partition": source_p0, "offset": {"offset": n}},
                *foreign,
                {"partition": checkpoint_p1, "offset": None},
            ],
        },
        timeout=240,
    )
    assert status["strategy"] == strategy
    assert {s["name"]: s["state"] for s in status["steps"]}["offsetSyncs"] == "Skipped"
    if foreign:
        assert any(other_alias in w and flow.source_alias in w for w in status["plan"]["warnings"]), status["plan"]
    # the target: exactly the records after n of partition 0 again, in order; partition 1
    # (whose only new entry is under another alias) nothing
    again = {0: flow.produced[0] + flow.produced[0][n + 1 :], 1: flow.produced[1]}
    wait_for(lambda: flow.target_values() == again, 90, f"partition 0 replicated again after offset {n}")
    time.sleep(2)
    assert flow.target_counts() == {0: UPSTREAM[0] + UPSTREAM[0] - (n + 1), 1: UPSTREAM[1]}
    # Connect: caught up again; the foreign entry kept as written, never used
    caught_up = {(flow.source_alias, 0): UPSTREAM[0] - 1, (flow.source_alias, 1): UPSTREAM[1] - 1}
    if foreign:
        caught_up[(other_alias, 1)] = 0
    wait_for(lambda: flow.source_offsets() == caught_up, 60, "source offsets caught up")
    log = flow.offsets_log()
    p0_values = log[flow.key("source", source_p0)]
    assert p0_values[p0_values.index({"offset": n}) - 1] == {"offset": UPSTREAM[0] - 1}, p0_values
    assert p0_values[-1] == {"offset": UPSTREAM[0] - 1}
    assert log[flow.key("checkpoint", checkpoint_p1)][-1] is None
    # checkpoints: partition 0's replication wrote new syncs (its upstream offsets rewound, so
    # MM2's sync store forgets the older ones) and the group's translation moved: a new
    # checkpoint, and its connector offset written again. Partition 1's did not move: no new
    # checkpoint, and its removed connector offset stays removed
    wait_for(
        lambda: (
            last_checkpoints(flow)[0].downstream == translate_downstream(flow.syncs()[0], COMMITTED[0])
            and last_checkpoints(flow)[0].downstream >= UPSTREAM[0]
        ),
        60,
        "partition 0's checkpoint translated against the new syncs",
    )
    time.sleep(3)  # three emit intervals
    after = flow.checkpoints()
    assert after[1][-1] == checkpoints_before[1]
    assert_moves_only(after[0])
    assert flow.checkpoint_partitions() == {0}


def test_mm2_reset_at_mm2_default_intervals_and_a_shared_offset_syncs_topic(
    k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, mm2_worker: ConnectWorker
) -> None:
    """Every MM2 interval at its default (emit.checkpoints 60 s, sync.group.offsets 60 s,
    refresh.topics/groups 600 s), and the reset's defaults too (strategy auto, offsetSyncs auto).

    What depends on an interval is the stop: a MirrorCheckpointTask spends its 60 s round asleep
    in poll(), and the reset must not wait for the round to end (the task looks for a stop every
    consumer.poll.timeout.ms, 1 s). So the whole reset, stop to verified restart, takes less
    than one round, and the restarted checkpoint task has not written a checkpoint yet (its
    first round ends 60 s after its start): right after a reset, a failover finds only the
    checkpoints from before it. Then the same flow shares its offset-syncs topic with two more:
    offsetSyncs auto refuses before changing anything, and names the flows it would affect.
    """
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker, short_intervals=False)
    assert "emit.checkpoints.interval.seconds" not in flow.configs["checkpoint"]
    checkpoints_before = flow.checkpoints()
    t0 = time.monotonic()
    status = reset(
        k8s,
        "mm2-defaults",
        {"clusterRef": {"name": "mm2"}, "action": "reset", "mirrorMaker2": flow.block()},
        timeout=240,
    )
    took = time.monotonic() - t0
    assert status["strategy"] == "rest"
    assert status["plan"]["offsetSyncsCleanup"] == "delete"  # auto: no other flow uses the topic
    assert took < 60, f"the reset took {took:.0f} s: it waited for MM2's 60 s checkpoint round"
    # the restarted checkpoint task started after t0: its first round has not ended
    assert flow.checkpoints() == checkpoints_before
    assert time.monotonic() - t0 < 60
    twice = {p: values + values for p, values in flow.produced.items()}
    wait_for(lambda: flow.target_values() == twice, 90, "every record replicated again")
    wait_for(lambda: set(flow.syncs()) == set(UPSTREAM), 60, "new offset syncs")
    assert all(s.downstream >= UPSTREAM[p] for p, ss in flow.syncs().items() for s in ss)
    last = {(flow.source_alias, p): n - 1 for p, n in UPSTREAM.items()}
    wait_for(lambda: flow.source_offsets() == last, 60, "source offsets caught up")
    wait_for(lambda: flow.offsets("heartbeat"), 60, "heartbeat offsets written again")

    # a second flow between the same clusters (another topic), managed by a Connector object
    # here, and a third one created by other tooling: the same offset-syncs topic
    rest = flow.rest
    second = {**flow.configs["source"], "topics": f"other-{flow.run}"}
    k8s.create(
        "connectors",
        "second-flow",
        {"clusterRef": {"name": "mm2"}, "class": MIRROR_SOURCE, "config": second, "check": {"enabled": False}},
        "Connector",
    )
    third = f"mm2-third-{flow.run}"
    rest.http.put(rest.path(third) + "/config", json={**second, "connector.class": MIRROR_SOURCE}).raise_for_status()
    try:
        wait_for(lambda: rest.state("second-flow") == "RUNNING" and rest.state(third) == "RUNNING", 90, "other flows")
        before = {role: flow.offsets(role) for role in ROLES}
        syncs_before = flow.syncs()
        refused = reset(
            k8s,
            "mm2-shared",
            {"clusterRef": {"name": "mm2"}, "action": "reset", "mirrorMaker2": flow.block()},
            phase="Failed",
        )
        cond = next(c for c in refused["conditions"] if c["type"] == "Succeeded")
        assert cond["reason"] == "InspectFailed"
        assert f"the offset-syncs topic {flow.syncs_topic} is also used by 2 other" in cond["message"]
        assert "second-flow (Connector second-flow)" in cond["message"]
        assert "1 not managed in this namespace" in cond["message"]
        assert third not in cond["message"]  # other tooling's (or namespaces') names are not shown
        assert "offsetSyncs: delete" in cond["message"]
        assert "or keep" in cond["message"]
        # nothing was changed: no backup, the syncs are there, every connector runs with its offsets
        assert "backup" not in refused
        assert flow.syncs() == syncs_before
        for role, name in flow.names.items():
            assert rest.state(name) == "RUNNING"
            assert flow.offsets(role) == before[role]
        assert flow.target_values() == twice

        # an explicit choice is obeyed, and the plan lists the flows it affects
        planned = reset(
            k8s,
            "mm2-shared-plan",
            {
                "clusterRef": {"name": "mm2"},
                "action": "reset",
                "dryRun": True,
                "mirrorMaker2": flow.block(offsetSyncs="delete"),
            },
            phase="Planned",
        )
        assert planned["plan"]["offsetSyncsCleanup"] == "delete"
        assert (
            planned["plan"]["offsetSyncsOtherFlows"]
            == "second-flow (Connector second-flow), 1 not managed in this namespace"
        )
    finally:
        rest.http.delete(rest.path(third), timeout=60)


def test_mm2_refused_second_call_keeps_connectors_stopped_and_restore_brings_offsets_back(k8s: K8s, flow: Flow) -> None:
    """Resetting several connectors takes one call each: when Connect refuses the second after
    the first changed offsets, nothing is resumed on half-applied offsets (MM2 would replicate
    everything again); the restore manifest the failure names puts every offset back exactly,
    and nothing is replicated again."""
    import kubernetes
    import yaml

    from tests.env.faultproxy import FaultProxy, FaultRule

    names = flow.names
    before = {role: flow.offsets(role) for role in ROLES}
    latest_before = {k: v[-1] for k, v in flow.offsets_log().items() if v[-1] is not None}
    with FaultProxy(flow.worker.url) as proxy:
        spec = connect_cluster_spec(flow.worker)
        spec["restUrl"] = proxy.url
        k8s.create("connectclusters", "mm2-proxied", spec, "ConnectCluster")
        k8s.wait_condition("connectclusters", "mm2-proxied", "Ready", "True")
        refuse = proxy.add_rule(
            FaultRule.status(
                400, "injected: offsets refused", method="DELETE", path=rf"^/connectors/{names['checkpoint']}/offsets$"
            )
        )
        failed = reset(
            k8s,
            "mm2-half",
            {
                "clusterRef": {"name": "mm2-proxied"},
                "action": "reset",
                "mirrorMaker2": flow.block(offsetSyncs="keep"),
            },
            phase="Failed",
            timeout=240,
        )
        assert refuse.fired >= 1
        backup = failed["backup"]["configMap"]
        cond = next(c for c in failed["conditions"] if c["type"] == "Succeeded")
        assert cond["reason"] == "ResetFailed"
        assert backup in cond["message"]
        assert "stay STOPPED" in cond["message"]
        assert [c["state"] for c in failed["changes"]] == ["Done", "Refused"]
        # stopped and locked, the source's offsets really gone (the half that was applied), the
        # checkpoint's untouched, and nothing replicated meanwhile
        for name in names.values():
            assert flow.rest.state(name) == "STOPPED"
        leases = kubernetes.client.CoordinationV1Api(k8s.core.api_client).list_namespaced_lease(k8s.ns).items
        assert len(leases) == 3
        assert flow.offsets("source") == []
        assert flow.offsets("checkpoint") == before["checkpoint"]
        time.sleep(3)
        assert flow.target_values() == flow.produced

        proxy.clear_rules()
        manifest = yaml.safe_load(failed["restoreManifest"])
        assert manifest["spec"]["restoreFrom"] == backup
        restore_name = manifest["metadata"]["name"]
        k8s.custom.create_namespaced_custom_object("connectops.io", "v1alpha1", k8s.ns, "offsetresets", manifest)
        restored = wait_for(
            lambda: (
                (k8s.get("offsetresets", restore_name).get("status") or {}).get("phase") in ("Succeeded", "Failed")
                and k8s.get("offsetresets", restore_name)["status"]
            ),
            240,
            "restore to finish",
        )
        assert restored["phase"] == "Succeeded", restored.get("conditions")
        lock = next(s for s in restored["steps"] if s["name"] == "lock")
        assert "took over the lock" in lock["message"]
    # every offset back exactly, read from Connect and from the offsets topic itself, and MM2
    # resumed from them: not one record replicated again
    for role, name in names.items():
        assert flow.offsets(role) == before[role]
        assert flow.rest.state(name) == "RUNNING"
    latest_after = {k: v[-1] for k, v in flow.offsets_log().items() if v[-1] is not None}
    assert latest_after == latest_before
    time.sleep(3)
    assert flow.target_values() == flow.produced
