"""MirrorMaker 2 resets against the real Connect worker and broker.

The real connect-mirror jars are not obtainable here; the connectors are test-only stand-ins
(tests/env/plugins/mm2shapes) whose offsets have MM2's exact partition/offset shapes, whose
alterOffsets validate like MM2's, and whose source connector really replicates (no consumer
group, resume at stored offset + 1). The offset-syncs topic is a real topic on the broker.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.adapters.kafka import KafkaOffsets
from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, topic_record_count, wait_for
from tests.e2e.test_offset_reset_e2e import backup_doc, reset
from tests.env.plugins import MM2_CHECKPOINT, MM2_HEARTBEAT, MM2_SOURCE, mm2_shapes_jar
from tests.env.records import batching_producer
from tests.env.servers import ConnectWorker, KafkaBroker

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


@pytest.fixture(scope="module")
def mm2_worker(connect_factory: Any) -> Iterator[ConnectWorker]:
    worker: ConnectWorker = connect_factory("mm2", extra_classpath=[mm2_shapes_jar()])
    yield worker
    worker.stop()  # an idle JVM, and its fetches on the broker, for the rest of the session otherwise


@pytest.fixture
def mm2(k8s: K8s, mm2_worker: ConnectWorker, kafka: KafkaBroker) -> Iterator[dict[str, Any]]:
    """An MM2-shaped deployment (source 'east' -> target 'west') created directly over REST, as
    MirrorMaker 2 deployed by other tooling would be; replication of 5 records done."""
    run = uuid.uuid4().hex[:6]
    alias, upstream = f"east{run}", f"orders{run}"
    remote = f"{alias}.{upstream}"
    syncs = f"mm2-offset-syncs.west{run}.internal"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics(
        [NewTopic(upstream, 2, 1), NewTopic(remote, 2, 1), NewTopic(syncs, 1, 1)]
    ).values():
        future.result(timeout=15)
    producer = batching_producer(kafka.bootstrap)
    for i, partition in enumerate([0, 0, 0, 1, 1]):
        producer.produce(upstream, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
        producer.flush(10)
    producer.produce(syncs, key=b"sync", value=b"stale", partition=0)
    producer.flush(10)

    rest = ConnectREST(mm2_worker)
    names = {"source": f"mm2-source-{run}", "checkpoint": f"mm2-checkpoint-{run}", "heartbeat": f"mm2-heartbeat-{run}"}
    configs = {
        "source": {
            "connector.class": MM2_SOURCE,
            "tasks.max": "1",
            "source.cluster.alias": alias,
            "target.cluster.alias": f"west{run}",
            "source.cluster.bootstrap.servers": kafka.bootstrap,
            "topics": upstream,
            "key.converter": BYTES,
            "value.converter": BYTES,
        },
        "checkpoint": {
            "connector.class": MM2_CHECKPOINT,
            "source.cluster.alias": alias,
            "groups": "app",
            "topics": upstream,
            "partitions": "2",
        },
        "heartbeat": {
            "connector.class": MM2_HEARTBEAT,
            "source.cluster.alias": alias,
            "target.cluster.alias": f"west{run}",
        },
    }
    for role, name in names.items():
        # generous: the shared worker rebalances on every create
        rest.http.put(rest.path(name) + "/config", json=configs[role], timeout=90).raise_for_status()
    wait_for(lambda: topic_record_count(kafka.bootstrap, remote) == 5, 90, "replicated")
    for name in names.values():
        wait_for(lambda n=name: rest.http.get(rest.path(n) + "/offsets").json()["offsets"], 60, f"{name} offsets")
    k8s.create("connectclusters", "mm2", connect_cluster_spec(mm2_worker), "ConnectCluster")
    k8s.wait_condition("connectclusters", "mm2", "Ready", "True")
    yield {
        "names": names,
        "alias": alias,
        "target": f"west{run}",
        "remote": remote,
        "syncs": syncs,
        "upstream": upstream,
        "rest": rest,
        "configs": configs,
        "worker": mm2_worker,
    }
    # the worker is shared by the module: leave it with no connectors of ours
    for name in names.values():
        with contextlib.suppress(httpx.HTTPError):
            rest.http.delete(rest.path(name), timeout=60)


def mm2_block(mm2: dict[str, Any], kafka: KafkaBroker, **extra: Any) -> dict[str, Any]:
    return {
        "sourceConnector": mm2["names"]["source"],
        "checkpointConnector": mm2["names"]["checkpoint"],
        "heartbeatConnector": mm2["names"]["heartbeat"],
        "sourceAlias": mm2["alias"],
        "targetAlias": mm2["target"],
        "sourceCluster": {"bootstrapServers": kafka.bootstrap},
        **extra,
    }


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_mm2_full_reset_deletes_offset_syncs_and_rereplicates(
    k8s: K8s, mm2: dict[str, Any], kafka: KafkaBroker, strategy: str
) -> None:
    rest: ConnectREST = mm2["rest"]
    before = {n: rest.http.get(rest.path(n) + "/offsets").json()["offsets"] for n in mm2["names"].values()}
    status = reset(
        k8s,
        "mm2-reset",
        {
            "clusterRef": {"name": "mm2"},
            "action": "reset",
            "strategy": strategy,
            "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="delete"),
        },
        timeout=240,
    )
    assert status["strategy"] == strategy
    assert status["plan"]["offsetSyncsTopic"] == mm2["syncs"]
    assert status["plan"]["offsetSyncsCluster"] == "source"
    steps = {s["name"]: s for s in status["steps"]}
    assert steps["offsetSyncs"]["state"] == "Done"
    assert steps["offsetSyncs"]["message"] == f"deleted offset-syncs topic {mm2['syncs']}"
    assert sorted(status["connectors"]) == sorted(mm2["names"].values())
    assert status["connectorKind"] == "mirror-checkpoint,mirror-heartbeat,mirror-source"
    assert not KafkaOffsets(kafka.bootstrap).topic_exists(mm2["syncs"])
    # read back while stopped, from Connect and from the offsets topic, for every connector
    confirmed = {s["name"]: s for s in status["steps"]}["reset"]
    assert confirmed["state"] == "Done"
    # every connector's offsets were saved before anything was changed
    doc = backup_doc(k8s, status["backup"]["configMap"])
    assert {n: doc["connectors"][n]["offsets"] for n in mm2["names"].values()} == before
    # no stored offsets: the source replicates everything again (5 more records downstream)
    wait_for(lambda: topic_record_count(kafka.bootstrap, mm2["remote"]) == 10, 90, "re-replicated")
    for name in mm2["names"].values():
        assert rest.state(name) == "RUNNING"


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_mm2_alter_source_and_checkpoint_rules(
    k8s: K8s, mm2: dict[str, Any], kafka: KafkaBroker, strategy: str
) -> None:
    rest: ConnectREST = mm2["rest"]
    alias, upstream = mm2["alias"], mm2["upstream"]
    names = mm2["names"]
    records_before = _offsets_records(kafka, mm2["worker"], names.values())
    # checkpoint offsets may only be reset or set to 0: refused in planning, nothing stopped
    bad = reset(
        k8s,
        "mm2-bad",
        {
            "clusterRef": {"name": "mm2"},
            "action": "alter",
            "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="none"),
            "offsets": [{"partition": {"group": "app", "topic": upstream, "partition": 0}, "offset": {"offset": 5}}],
        },
        phase="Failed",
    )
    cond = next(c for c in bad["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "only be reset" in cond["message"]
    assert all(rest.state(n) == "RUNNING" for n in mm2["names"].values())

    # rewind partition 0 of the source to its first record and drop one checkpoint; the
    # connectors stay stopped afterwards (resume: stopped), so the offsets topic can be read as
    # the reset left it before any task writes again
    ok = reset(
        k8s,
        "mm2-alter",
        {
            "clusterRef": {"name": "mm2"},
            "action": "alter",
            "strategy": strategy,
            "resume": "stopped",
            "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="none"),
            "offsets": [
                {"partition": {"cluster": alias, "topic": upstream, "partition": 0}, "offset": {"offset": 0}},
                {"partition": {"group": "app", "topic": upstream, "partition": 1}, "offset": None},
            ],
        },
        timeout=240,
    )
    assert {s["name"]: s["state"] for s in ok["steps"]}["offsetSyncs"] == "Skipped"
    assert ok["strategy"] == strategy
    assert all(rest.state(n) == "STOPPED" for n in names.values())
    after = _offsets_records(kafka, mm2["worker"], names.values())
    source_p0 = json.dumps([names["source"], {"cluster": alias, "topic": upstream, "partition": 0}], sort_keys=True)
    checkpoint_p1 = json.dumps(
        [names["checkpoint"], {"group": "app", "topic": upstream, "partition": 1}], sort_keys=True
    )
    assert records_before[source_p0] == {"offset": 2}
    assert after[source_p0] == {"offset": 0}
    assert checkpoint_p1 in records_before
    assert checkpoint_p1 not in after
    untouched = {k for k in records_before if k not in (source_p0, checkpoint_p1)}
    assert untouched
    assert {k: after.get(k) for k in untouched} == {k: records_before[k] for k in untouched}
    # Connect agrees, and once resumed the source replicates records 1 and 2 of partition 0 again
    connect_view = rest.http.get(rest.path(names["source"]) + "/offsets").json()["offsets"]
    assert {json.dumps(e["partition"], sort_keys=True): e["offset"] for e in connect_view}[
        json.dumps({"cluster": alias, "topic": upstream, "partition": 0}, sort_keys=True)
    ] == {"offset": 0}
    for name in names.values():
        rest.http.put(rest.path(name) + "/resume", timeout=60).raise_for_status()
    wait_for(lambda: topic_record_count(kafka.bootstrap, mm2["remote"]) == 7, 90, "partition 0 rewound")


def test_mm2_default_keeps_other_flows_offset_syncs(k8s: K8s, mm2: dict[str, Any], kafka: KafkaBroker) -> None:
    """The offset-syncs topic is shared by every flow between two clusters: by default a reset
    that does not cover all of them is refused before anything changes, and says which."""
    rest: ConnectREST = mm2["rest"]
    # a second flow between the same clusters (another topic), managed by a Connector object here,
    # and a third one created by other tooling
    second = {k: v for k, v in mm2["configs"]["source"].items() if k not in ("connector.class", "tasks.max")}
    k8s.create(
        "connectors",
        "second-flow",
        {"clusterRef": {"name": "mm2"}, "class": MM2_SOURCE, "config": second},
        "Connector",
    )
    third = f"mm2-third-{uuid.uuid4().hex[:6]}"
    rest.http.put(rest.path(third) + "/config", json=mm2["configs"]["source"]).raise_for_status()
    wait_for(lambda: rest.state("second-flow") == "RUNNING" and rest.state(third) == "RUNNING", 90, "other flows")
    before = {n: rest.http.get(rest.path(n) + "/offsets").json()["offsets"] for n in mm2["names"].values()}

    refused = reset(
        k8s,
        "mm2-shared",
        {"clusterRef": {"name": "mm2"}, "action": "reset", "mirrorMaker2": mm2_block(mm2, kafka)},
        phase="Failed",
    )
    cond = next(c for c in refused["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "2 other MirrorSourceConnector flow(s)" in cond["message"]
    assert "second-flow (Connector second-flow)" in cond["message"]
    assert "1 not managed in this namespace" in cond["message"]
    assert third not in cond["message"]  # other tooling's (or namespaces') names are not shown
    assert "offsetSyncs: delete" in cond["message"]
    assert "or keep" in cond["message"]
    # nothing was changed: no backup, the topic is there, every connector runs with its offsets
    assert "backup" not in refused
    assert KafkaOffsets(kafka.bootstrap).topic_exists(mm2["syncs"])
    for name in mm2["names"].values():
        assert rest.state(name) == "RUNNING"
        assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == before[name]

    # an explicit choice is obeyed, and the plan lists the flows it affects
    planned = reset(
        k8s,
        "mm2-shared-plan",
        {
            "clusterRef": {"name": "mm2"},
            "action": "reset",
            "dryRun": True,
            "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="delete"),
        },
        phase="Planned",
    )
    assert planned["plan"]["offsetSyncsCleanup"] == "delete"
    assert (
        planned["plan"]["offsetSyncsOtherFlows"]
        == "second-flow (Connector second-flow), 1 not managed in this namespace"
    )
    rest.http.delete(rest.path(third))


def test_mm2_refused_second_call_keeps_connectors_stopped_and_restore_brings_offsets_back(
    k8s: K8s, mm2: dict[str, Any], kafka: KafkaBroker
) -> None:
    """Resetting several connectors takes one call each: when Connect refuses the second after
    the first changed offsets, nothing is resumed on half-applied offsets; the restore manifest
    the failure names puts every offset back exactly."""
    import kubernetes
    import yaml

    from tests.env.faultproxy import FaultProxy, FaultRule

    rest: ConnectREST = mm2["rest"]
    names = mm2["names"]
    worker: ConnectWorker = mm2["worker"]
    before = {n: rest.http.get(rest.path(n) + "/offsets").json()["offsets"] for n in names.values()}
    records_before = _offsets_records(kafka, worker, names.values())
    replicated = topic_record_count(kafka.bootstrap, mm2["remote"])
    with FaultProxy(worker.url) as proxy:
        spec = connect_cluster_spec(worker)
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
                "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="keep"),
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
            assert rest.state(name) == "STOPPED"
        leases = kubernetes.client.CoordinationV1Api(k8s.core.api_client).list_namespaced_lease(k8s.ns).items
        assert len(leases) == 3
        assert rest.http.get(rest.path(names["source"]) + "/offsets").json()["offsets"] == []
        assert (
            rest.http.get(rest.path(names["checkpoint"]) + "/offsets").json()["offsets"] == before[names["checkpoint"]]
        )
        time.sleep(3)
        assert topic_record_count(kafka.bootstrap, mm2["remote"]) == replicated

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
    # every offset back exactly, read from Connect and from the offsets topic itself
    for name in names.values():
        assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == before[name]
        assert rest.state(name) == "RUNNING"
    assert _offsets_records(kafka, worker, names.values()) == records_before
    time.sleep(3)
    assert topic_record_count(kafka.bootstrap, mm2["remote"]) == replicated  # no re-replication


def _offsets_records(kafka: KafkaBroker, worker: ConnectWorker, names: Any) -> dict[str, Any]:
    """Each connector's offsets as the offsets topic holds them: latest value per partition map."""
    latest: dict[str, Any] = {}
    for record in KafkaOffsets(kafka.bootstrap).read_connector_offsets(worker.offset_topic, set(names)):
        latest[json.dumps([record.connector, record.partition_map], sort_keys=True)] = record.source_offset()
    return {k: v for k, v in latest.items() if v is not None}
