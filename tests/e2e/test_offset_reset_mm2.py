"""MirrorMaker 2 resets against the real Connect worker and broker.

The real connect-mirror jars are not obtainable here; the connectors are test-only stand-ins
(tests/env/plugins/mm2shapes) whose offsets have MM2's exact partition/offset shapes, whose
alterOffsets validate like MM2's, and whose source connector really replicates (no consumer
group, resume at stored offset + 1). The offset-syncs topic is a real topic on the broker.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.adapters.kafka_offsets import KafkaOffsets
from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, topic_record_count, wait_for
from tests.e2e.test_offset_reset_e2e import backup_doc, reset
from tests.env.plugins import MM2_CHECKPOINT, MM2_HEARTBEAT, MM2_SOURCE, mm2_shapes_jar
from tests.env.servers import ConnectWorker, Tansu

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


@pytest.fixture(scope="module")
def mm2_worker(connect_factory: Any) -> ConnectWorker:
    worker: ConnectWorker = connect_factory("mm2", extra_classpath=[mm2_shapes_jar()])
    return worker


@pytest.fixture
def mm2(k8s: K8s, mm2_worker: ConnectWorker, kafka: Tansu) -> dict[str, Any]:
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
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
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
        rest.http.put(rest.path(name) + "/config", json=configs[role]).raise_for_status()
    wait_for(lambda: topic_record_count(kafka.bootstrap, remote) == 5, 90, "replicated")
    for name in names.values():
        wait_for(lambda n=name: rest.http.get(rest.path(n) + "/offsets").json()["offsets"], 60, f"{name} offsets")
    k8s.create("connectclusters", "mm2", connect_cluster_spec(mm2_worker), "ConnectCluster")
    k8s.wait_condition("connectclusters", "mm2", "Ready", "True")
    return {
        "names": names,
        "alias": alias,
        "target": f"west{run}",
        "remote": remote,
        "syncs": syncs,
        "upstream": upstream,
        "rest": rest,
    }


def mm2_block(mm2: dict[str, Any], kafka: Tansu, **extra: Any) -> dict[str, Any]:
    return {
        "sourceConnector": mm2["names"]["source"],
        "checkpointConnector": mm2["names"]["checkpoint"],
        "heartbeatConnector": mm2["names"]["heartbeat"],
        "sourceAlias": mm2["alias"],
        "targetAlias": mm2["target"],
        "sourceCluster": {"bootstrapServers": kafka.bootstrap},
        **extra,
    }


def test_mm2_full_reset_deletes_offset_syncs_and_rereplicates(k8s: K8s, mm2: dict[str, Any], kafka: Tansu) -> None:
    rest: ConnectREST = mm2["rest"]
    before = {n: rest.http.get(rest.path(n) + "/offsets").json()["offsets"] for n in mm2["names"].values()}
    status = reset(
        k8s,
        "mm2-reset",
        {"clusterRef": {"name": "mm2"}, "action": "reset", "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="delete")},
        timeout=240,
    )
    assert status["plan"]["offsetSyncsTopic"] == mm2["syncs"]
    assert status["plan"]["offsetSyncsCluster"] == "source"
    steps = {s["name"]: s for s in status["steps"]}
    assert steps["offsetSyncs"]["state"] == "Done"
    assert steps["offsetSyncs"]["message"] == f"deleted offset-syncs topic {mm2['syncs']}"
    assert sorted(status["connectors"]) == sorted(mm2["names"].values())
    assert status["connectorKind"] == "mirror-checkpoint,mirror-heartbeat,mirror-source"
    assert not KafkaOffsets(kafka.bootstrap).topic_exists(mm2["syncs"])
    # every connector's offsets were saved before anything was changed
    doc = backup_doc(k8s, status["backup"]["configMap"])
    assert {n: doc["connectors"][n]["offsets"] for n in mm2["names"].values()} == before
    # no stored offsets: the source replicates everything again (5 more records downstream)
    wait_for(lambda: topic_record_count(kafka.bootstrap, mm2["remote"]) == 10, 90, "re-replicated")
    for name in mm2["names"].values():
        assert rest.state(name) == "RUNNING"


def test_mm2_alter_source_and_checkpoint_rules(k8s: K8s, mm2: dict[str, Any], kafka: Tansu) -> None:
    rest: ConnectREST = mm2["rest"]
    alias, upstream = mm2["alias"], mm2["upstream"]
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

    # rewind partition 0 of the source to its first record: records 1 and 2 are replicated again
    ok = reset(
        k8s,
        "mm2-alter",
        {
            "clusterRef": {"name": "mm2"},
            "action": "alter",
            "mirrorMaker2": mm2_block(mm2, kafka, offsetSyncs="none"),
            "offsets": [
                {"partition": {"cluster": alias, "topic": upstream, "partition": 0}, "offset": {"offset": 0}},
                {"partition": {"group": "app", "topic": upstream, "partition": 1}, "offset": None},
            ],
        },
        timeout=240,
    )
    assert {s["name"]: s["state"] for s in ok["steps"]}["offsetSyncs"] == "Skipped"
    wait_for(lambda: topic_record_count(kafka.bootstrap, mm2["remote"]) == 7, 90, "partition 0 rewound")
