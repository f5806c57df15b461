"""What the operator and the check see of real MirrorMaker 2: silent loss (the source's log-start
passing what MM2 has replicated, DeleteRecords while MM2 is stopped; a source topic deleted and
re-created), replication lag and checkpoint lag.

The flows are tests/e2e/mm2_fixtures.py's (source cluster ``a``, the target ``b``, a worker
with Apache Kafka's connect-mirror, three Connector objects). Every figure is computed
here independently, by record content or from the clusters: lost records are what was produced
to ``a`` against what arrived on ``b`` after MM2 resumed; replication lag is the source's
log-end (read record by record) minus the records on the target; checkpoint lag is the group's
committed offset on ``a`` minus its latest checkpoint decoded from the checkpoints topic, and
what a consumer failing over now would read again is counted on ``b`` by content. The
operator's condition, Event, status and metric, and the check's verdict (the Spark job's own
collection against the stopped connector), must say the same.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from connectops.object_metrics import OBJECTS
from connectops_check.collect import collect_snapshot
from connectops_check.job import run_check
from connectops_check.verdict import Settings
from tests.e2e.conftest import K8s, wait_for
from tests.e2e.mm2_fixtures import COMMITTED, UPSTREAM, Flow, cluster_a, mm2_worker, start_flow
from tests.env.mm2 import checkpoints, consume_and_commit, group_offsets, read_records, values_by_partition
from tests.env.records import batching_producer
from tests.env.servers import KafkaBroker
from tests.spark.conftest import spark

pytestmark = [pytest.mark.timeout(300), pytest.mark.spark]
# the Spark tests' session fixture and the shared MM2 fixtures (tests/e2e/mm2_fixtures.py)
__all__ = ["cluster_a", "mm2_worker", "spark"]


CONDITION = "MirrorComplete"


def loss_status(k8s: K8s, name: str) -> dict[str, Any]:
    return dict((k8s.get("connectors", name).get("status") or {}).get("mirrorLoss") or {})


def metric(namespace: str, name: str) -> float | None:
    text = b"".join(OBJECTS.render({"connectops_connector_mirror_records_lost"})).decode()
    for line in text.splitlines():
        labels = f'name="{name}"' in line and f'namespace="{namespace}"' in line
        if line.startswith("connectops_connector_mirror_records_lost{") and labels:
            return float(line.rsplit(" ", 1)[1])
    return None


def set_state(k8s: K8s, flow: Flow, state: str, role: str = "source") -> None:
    name = flow.names[role]
    k8s.patch_spec("connectors", name, {"state": state})
    wait_for(lambda: flow.rest.state(name) == state.upper(), 90, f"{name} {state.upper()}")
    if state == "stopped":
        # Connect says STOPPED before the task is gone: a record produced meanwhile could still
        # be copied. No task listed: it stopped, and committed its offsets
        status = flow.rest.path(name) + "/status"
        wait_for(lambda: flow.rest.http.get(status).json()["tasks"] == [], 60, f"{name}'s task gone")
        if role == "source":
            assert flow.source_offsets() == {(flow.source_alias, p): n - 1 for p, n in UPSTREAM.items()}


def produce(a: KafkaBroker, topic: str, values: dict[int, list[bytes]]) -> None:
    producer = batching_producer(a.bootstrap)
    for p, batch in values.items():
        for value in batch:
            producer.produce(topic, key=value, value=value, partition=p)
    assert producer.flush(15) == 0


def healthy(k8s: K8s, flow: Flow) -> str:
    """The source Connector says nothing was lost once the operator has seen the topic (its ID)."""
    name = flow.names["source"]
    k8s.wait_condition("connectors", name, CONDITION, "True", "NothingLost", timeout=60)
    # the first looks may come before MM2 stored an offset: nothing to watch yet
    wait_for(
        lambda: k8s.condition("connectors", name, CONDITION)["message"].endswith(f"({len(UPSTREAM)} partitions)"),
        30,
        "every partition watched",
    )
    seen = loss_status(k8s, name)["topics"]
    assert [t["topic"] for t in seen] == [flow.topic]
    assert seen[0]["stored"] == {str(p): n - 1 for p, n in UPSTREAM.items()}
    assert k8s.condition("connectors", name, CONDITION)["status"] == "True"
    assert metric(k8s.ns, name) == 0
    return str(seen[0]["topicId"])


def lost_by_content(flow: Flow, produced: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    arrived = flow.target_values()
    return {p: [v for v in values if v not in arrived.get(p, [])] for p, values in produced.items()}


def test_mm2_truncation_ahead_of_the_mirror_is_reported_per_partition(
    k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, mm2_worker: Any, spark: SparkSession
) -> None:
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker)
    name = flow.names["source"]
    healthy(k8s, flow)
    set_state(k8s, flow, "stopped")
    # records MM2 cannot copy while stopped; then the source deletes some of them (as retention
    # would) before MM2 is back
    extra = {0: 5, 1: 4}
    more = {p: [f"p{p}-{i}".encode() for i in range(n, n + extra[p])] for p, n in UPSTREAM.items()}
    produce(cluster_a, flow.topic, more)
    cut = {0: UPSTREAM[0] + 3, 1: UPSTREAM[1] + 1}  # new log-starts
    admin = AdminClient(cluster_a.admin_config())
    for future in admin.delete_records([TopicPartition(flow.topic, p, o) for p, o in cut.items()]).values():
        future.result(timeout=15)
    want = {p: cut[p] - UPSTREAM[p] for p in UPSTREAM}  # {0: 3, 1: 1}: the stored offsets are n - 1

    k8s.wait_condition("connectors", name, CONDITION, "False", "SourceTruncated", timeout=60)
    # a look may fall between the two partitions' deletions: the next one sees both
    wait_for(lambda: loss_status(k8s, name)["recordsLost"] == 4, 30, "both partitions' losses")
    cond = k8s.condition("connectors", name, CONDITION)
    assert cond is not None
    status = loss_status(k8s, name)
    assert {x["partition"]: x["lost"] for x in status["losses"]} == want
    assert {x["partition"]: x["firstLost"] for x in status["losses"]} == UPSTREAM
    assert {x["reason"] for x in status["losses"]} == {"SourceTruncated"}
    assert status["recordsLost"] == 4
    assert f"{flow.topic}-0: 3" in cond["message"]
    assert f"{flow.topic}-1: 1" in cond["message"]
    warnings = [e for e in k8s.events(name) if e.type == "Warning" and e.reason == "SourceTruncated"]
    assert warnings, [(e.type, e.reason) for e in k8s.events(name)]
    wait_for(lambda: metric(k8s.ns, name) == 4, 30, "the lost-records gauge")

    # the check, from its own collection of the stopped connector: the same records
    snap = collect_snapshot(kafka.bootstrap, mm2_worker.url, name, 1, 0.0)
    doc = run_check(snap, Settings(desired_state="stopped"), spark)
    assert {p["partition"]: p["lost"] for p in doc["loss"]["partitions"]} == want
    assert doc["loss"]["total"] == 4
    assert doc["verdict"] == "UNHEALTHY"
    assert any(r["code"] == "MIRROR_RECORDS_LOST" and r["severity"] == "UNHEALTHY" for r in doc["reasons"])

    # resumed: MM2 is out of range, starts at the log-start; what never arrives on b, by content,
    # is what was reported, and the report stays (the evidence in the offsets is gone now)
    set_state(k8s, flow, "running")
    survivors = {p: flow.produced[p] + more[p][cut[p] - UPSTREAM[p] :] for p in UPSTREAM}
    wait_for(lambda: flow.target_values() == survivors, 90, "the surviving records replicated")
    produced = {p: flow.produced[p] + more[p] for p in UPSTREAM}
    gone = lost_by_content(flow, produced)
    assert gone == {p: more[p][: want[p]] for p in UPSTREAM}
    assert {p: len(v) for p, v in gone.items()} == want
    caught_up = {(flow.source_alias, p): UPSTREAM[p] + len(more[p]) - 1 for p in UPSTREAM}
    wait_for(lambda: flow.source_offsets() == caught_up, 90, "MM2's offsets past the log-start")
    time.sleep(4)  # a resync (3 s here) after the offsets lost the evidence
    assert k8s.condition("connectors", name, CONDITION)["reason"] == "SourceTruncated"
    assert loss_status(k8s, name)["recordsLost"] == 4

    # acknowledged: cleared, and nothing new is lost
    k8s.custom.patch_namespaced_custom_object(
        "connectops.io",
        "v1alpha1",
        k8s.ns,
        "connectors",
        name,
        {"metadata": {"annotations": {"connectops.io/acknowledge-mirror-loss": "seen-1"}}},
    )
    k8s.wait_condition("connectors", name, CONDITION, "True", "NothingLost", timeout=60)
    assert loss_status(k8s, name)["acknowledged"] == "seen-1"
    wait_for(lambda: metric(k8s.ns, name) == 0, 30, "the gauge back to 0")


def test_mm2_topic_recreated_under_the_mirror_is_reported(
    k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, mm2_worker: Any
) -> None:
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker)
    name = flow.names["source"]
    old_id = healthy(k8s, flow)
    set_state(k8s, flow, "stopped")
    admin = AdminClient(cluster_a.admin_config())
    admin.delete_topics([flow.topic], operation_timeout=15)[flow.topic].result(timeout=30)
    wait_for(lambda: flow.topic not in admin.list_topics(timeout=10).topics, 30, "the topic deleted")

    def recreate() -> bool:
        try:
            admin.create_topics([NewTopic(flow.topic, len(UPSTREAM), 1)])[flow.topic].result(timeout=15)
        except Exception as error:  # TOPIC_ALREADY_EXISTS while the deletion completes
            return "marked for deletion" not in str(error) and "already exists" not in str(error).lower()
        return True

    wait_for(recreate, 60, "the topic re-created")
    cluster_a.wait_for_leaders(flow.topic, len(UPSTREAM))
    # the new topic: more records than MM2 had replicated of the old one on partition 0 (MM2
    # resumes at its old offset + 1 = 10 and skips 0..9), fewer on partition 1 (offset 6 is out of
    # range: MM2 starts from the earliest, nothing lost)
    new = {0: [f"new0-{i}".encode() for i in range(14)], 1: [f"new1-{i}".encode() for i in range(3)]}
    produce(cluster_a, flow.topic, new)
    want = {0: UPSTREAM[0], 1: 0}

    k8s.wait_condition("connectors", name, CONDITION, "False", "SourceTopicRecreated", timeout=60)
    # a look may fall between the new records' arrivals: the next one counts them all
    wait_for(lambda: loss_status(k8s, name)["recordsLost"] == UPSTREAM[0], 30, "partition 0's loss")
    cond = k8s.condition("connectors", name, CONDITION)
    assert cond is not None
    status = loss_status(k8s, name)
    assert {x["partition"]: x["lost"] for x in status["losses"]} == want
    assert {x["reason"] for x in status["losses"]} == {"SourceTopicRecreated"}
    assert status["topics"][0]["topicId"] != old_id
    assert old_id in cond["message"] or old_id in status["losses"][0]["message"]
    warnings = [e for e in k8s.events(name) if e.type == "Warning" and e.reason == "SourceTopicRecreated"]
    assert warnings, [(e.type, e.reason) for e in k8s.events(name)]
    wait_for(lambda: metric(k8s.ns, name) == UPSTREAM[0], 30, "the lost-records gauge")

    set_state(k8s, flow, "running")
    arrived_new = {0: new[0][UPSTREAM[0] :], 1: new[1]}
    want_b = {p: flow.produced[p] + arrived_new[p] for p in UPSTREAM}
    wait_for(lambda: flow.target_values() == want_b, 90, "the new topic's records replicated")
    gone = lost_by_content(flow, new)
    assert {p: len(v) for p, v in gone.items()} == want
    assert gone[0] == new[0][: UPSTREAM[0]]


def job_lags(doc: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(p["topic"], p["partition"]): p["lag"] for p in doc["lag"]["topPartitions"]}


def test_mm2_replication_and_checkpoint_lag_equal_the_hand_computation(
    k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, mm2_worker: Any, spark: SparkSession
) -> None:
    """Replication lag per partition = the source's log-end - the records replicated, counted on
    the target. Checkpoint lag per group = its committed offset on ``a`` - its latest
    checkpoint's upstream offset; a consumer failing over now starts at the checkpoint's
    DOWNSTREAM offset, which MM2 rounds down to one past the last offset sync before it: it reads
    again the checkpoint lag plus that rounding (upstream - downstream), counted here by content
    on b, and the check's failover block (from the offset syncs it reads) says the same."""
    flow = start_flow(k8s, cluster_a, kafka, mm2_worker)
    source, checkpoint = flow.names["source"], flow.names["checkpoint"]
    set_state(k8s, flow, "stopped")
    unreplicated = {0: 5, 1: 2}
    produce(cluster_a, flow.topic, {p: [f"late{p}-{i}".encode() for i in range(n)] for p, n in unreplicated.items()})

    doc = run_check(
        collect_snapshot(kafka.bootstrap, mm2_worker.url, source, 2, 0.5), Settings(desired_state="stopped"), spark
    )
    records = read_records(cluster_a.bootstrap, flow.topic)
    on_a = values_by_partition(records)
    for p, values in on_a.items():  # dense: the log-end is the record count
        assert [r.offset for r in records if r.partition == p] == list(range(len(values)))
    replicated = flow.target_counts()
    hand = {p: len(on_a[p]) - replicated[p] for p in UPSTREAM}
    assert hand == unreplicated  # the scenario held
    assert job_lags(doc) == {(flow.topic, p): lag for p, lag in hand.items()}
    assert doc["lag"]["total"] == sum(unreplicated.values())
    assert doc["verdict"] == "STOPPED", doc["reasons"]
    assert doc["loss"] == {"total": 0, "partitions": []}
    set_state(k8s, flow, "running")

    # checkpoint lag: the checkpoint connector stopped, the group on a moves on
    wait_for(lambda: set(flow.checkpoints()) == set(UPSTREAM), 60, "checkpoints")
    set_state(k8s, flow, "stopped", role="checkpoint")
    moved = {0: 9, 1: 5}
    consume_and_commit(cluster_a.bootstrap, flow.group, flow.topic, moved)
    doc = run_check(
        collect_snapshot(kafka.bootstrap, mm2_worker.url, checkpoint, 1, 0.0), Settings(desired_state="stopped"), spark
    )
    committed = group_offsets(cluster_a.bootstrap, flow.group, flow.topic, len(UPSTREAM))
    latest = {p: cps[-1] for p, cps in checkpoints(kafka.bootstrap, flow.checkpoints_topic, flow.group).items()}
    assert committed == moved
    assert {p: c.upstream for p, c in latest.items()} == COMMITTED  # no checkpoint followed the group
    hand = {p: committed[p] - latest[p].upstream for p in UPSTREAM}
    row = f"{flow.group}:{flow.topic}"
    assert job_lags(doc) == {(row, p): lag for p, lag in hand.items()}
    # failing over now: a consumer of the group on b starts at the checkpoint's downstream offset;
    # what it reads that the group had already processed on a, by content (the records on b at
    # or after that offset, as b numbers them)
    on_b = read_records(kafka.bootstrap, flow.remote)
    processed = {p: set(on_a[p][: committed[p]]) for p in UPSTREAM}
    again = {
        p: sum(1 for r in on_b if r.partition == p and r.offset >= latest[p].downstream and r.value in processed[p])
        for p in UPSTREAM
    }
    rounding = {p: latest[p].upstream - latest[p].downstream for p in UPSTREAM}
    assert again == {p: hand[p] + rounding[p] for p in UPSTREAM}, (again, hand, rounding)
    assert all(rounding[p] > 0 for p in UPSTREAM)  # the scenario held: the lag alone undercounts
    # the job reads the offset syncs itself and counts exactly those records
    assert doc["failover"]["partitions"] == [
        {
            "topic": row,
            "partition": p,
            "targetOffset": latest[p].downstream,
            "targetPosition": latest[p].downstream + again[p],
            "reread": again[p],
        }
        for p in sorted(UPSTREAM)
    ]
    assert (doc["failover"]["total"], doc["failover"]["unknown"]) == (sum(again.values()), 0)
    set_state(k8s, flow, "running", role="checkpoint")
