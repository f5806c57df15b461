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

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from connectops.object_metrics import OBJECTS
from connectops_check.collect import collect_snapshot
from connectops_check.job import run_check
from connectops_check.verdict import Settings
from tests.e2e.conftest import K8s, wait_for
from tests.e2e.mm2_fixtures import COMMITTED, UPSTREAM, Flow, cluster_a, mm2_worker, start_flow
from tests.env.mm2 import checkpoints, consume_and_commit, group_offsets, read_records, values_by_partition
from tests.env.records import batching_producer
from tests.env.servers import ConnectWorker, KafkaBroker, free_port
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


# --- MirrorMaker 2's own (time-based) metrics against the check's lag --------------------------

MM2_RULES = Path(__file__).resolve().parents[1] / "env" / "jmx" / "mirror-maker-2-metrics.yml"


@pytest.fixture
def mm2_metrics_worker(testenv_root: Path, kafka: KafkaBroker) -> Iterator[ConnectWorker]:
    """An MM2 worker group of its own with the JMX exporter's agent serving MM2's MBeans: the
    shared one is started by ``connect_factory``, which runs no agent. One more worker start;
    listed before ``k8s`` so that it outlives the test's Connector objects."""
    worker = ConnectWorker(
        testenv_root, kafka.bootstrap, name="mm2-metrics", metrics_port=free_port(), metrics_rules=MM2_RULES
    )
    try:
        yield worker.start()
        # the test's namespace deletes its Connectors without waiting: their finalizers need the worker
        wait_for(lambda: httpx.get(f"{worker.url}/connectors", timeout=10).json() == [], 60, "connectors deleted")
    finally:
        # nothing left to commit (no connectors; topics of its own): no graceful stop needed
        worker.kill()


def mm2_metrics(worker: ConnectWorker, flow: Flow) -> dict[tuple[str, str], float]:
    """This flow's MM2 figures the exporter serves now: (metric, partition or group:partition)."""
    assert worker.metrics_url is not None
    text = httpx.get(worker.metrics_url, timeout=10).text
    prefix = "kafka_connect_mirror_"
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(prefix) and s.labels.get("source") == flow.source_alias:
                where = (
                    s.labels["partition"] if "group" not in s.labels else f"{s.labels['group']}:{s.labels['partition']}"
                )
                name = s.name.removeprefix(prefix).removeprefix("source_connector_")
                found[(name.removeprefix("checkpoint_connector_"), where)] = float(s.value)
    return found


def target_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of each of ``topic``'s partitions on the target now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in UPSTREAM}
    finally:
        consumer.close()


def timestamps_at(bootstrap: str, topic: str, offsets: dict[int, int]) -> dict[int, int]:
    """The timestamp of the record at ``offsets[p]`` of each partition ``p`` (MM2 keeps a copied
    record's timestamp, so on the target it is the source record's CreateTime)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"at-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    found: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in offsets.items()])
        deadline = time.monotonic() + 30
        while len(found) < len(offsets):
            assert time.monotonic() < deadline, f"{topic}: records at {offsets}, found {found}"
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            if msg.offset() == offsets[msg.partition()]:
                found[msg.partition()] = msg.timestamp()[1]
    finally:
        consumer.close()
    return found


class Traffic:
    """A steady producer on ``a`` (one record per partition every 50 ms), remembering each
    record's timestamp (CreateTime, what MM2's record age is measured from) by offset."""

    def __init__(self, a: KafkaBroker, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
        self.topic, self.ts = topic, dict[tuple[int, int], int]()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.ts[(msg.partition(), msg.offset())] = msg.timestamp()[1]

    def _run(self) -> None:
        while not self.stop.is_set():
            for p in UPSTREAM:
                self.producer.produce(self.topic, value=b"steady", partition=p, on_delivery=self._delivered)
            self.producer.poll(0)
            time.sleep(0.05)
        self.producer.flush(10)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def log_end(self) -> dict[int, int]:
        return {p: 1 + max(o for q, o in list(self.ts) if q == p) for p in UPSTREAM}


def test_mm2_own_time_metrics_are_silent_on_a_backlog_the_check_times(
    mm2_metrics_worker: ConnectWorker, k8s: K8s, cluster_a: KafkaBroker, kafka: KafkaBroker, spark: SparkSession
) -> None:
    """MM2's record-age-ms / replication-latency-ms are measured when MM2 copies a record (now -
    its timestamp, at poll / at the target's ack), so they stand still while MM2 is paused, however
    large the backlog grows; the check's time lag (the next record MM2 would copy, looked up on
    the source's log-end over time) grows with it. Once MM2 resumes, its record-age-ms-max is
    the check's time lag plus the time from the check to the resume: the same quantity, seen late.
    checkpoint-latency-ms is the time from MM2 emitting a checkpoint to the target's ack (the
    checkpoint record's timestamp is its emission), so it says nothing about checkpoint lag."""
    worker = mm2_metrics_worker
    flow = start_flow(k8s, cluster_a, kafka, worker)
    source = flow.names["source"]
    with Traffic(cluster_a, flow.topic) as traffic:
        # steady state: MM2 copies the traffic (not only start_flow's records) as it arrives
        def steady() -> bool:
            m = mm2_metrics(worker, flow)
            copied = all(m.get(("record_count", str(p)), 0) >= n + 20 for p, n in UPSTREAM.items())
            return copied and all(0 <= m[("record_age_ms", str(p))] < 2000 for p in UPSTREAM)

        wait_for(steady, 30, "MM2 replicating the steady traffic")
        k8s.patch_spec("connectors", source, {"state": "paused"})
        wait_for(lambda: flow.rest.state(source) == "PAUSED", 60, f"{source} PAUSED")
        time.sleep(4)
        during = mm2_metrics(worker, flow)
        snap = collect_snapshot(kafka.bootstrap, worker.url, source, 3, 1.0)
        later = mm2_metrics(worker, flow)
        doc = run_check(snap, Settings(desired_state="paused"), spark)
        stored = flow.source_offsets()
        now_ms = snap.samples[-1].ts_ms
        # the next record MM2 copies, its timestamp on a: the time lag by hand, at the check's now
        first = {p: traffic.ts[(p, stored[(flow.source_alias, p)] + 1)] for p in UPSTREAM}
        hand = {p: (now_ms - first[p]) / 1000 for p in UPSTREAM}
        check = {p["partition"]: p["timeLagSeconds"] for p in doc["lag"]["topPartitions"]}
        lag = job_lags(doc)
        # what MM2 copies first once resumed: the record after the last one on the target now
        paused_end = target_ends(flow.b.bootstrap, flow.remote)
        t_patch = int(time.time() * 1000)
        k8s.patch_spec("connectors", source, {"state": "running"})
        wait_for(lambda: flow.rest.state(source) == "RUNNING", 60, f"{source} RUNNING")
        t_running = int(time.time() * 1000)
        end = traffic.log_end()
        wait_for(lambda: all(o + 1 >= end[p] for (_, p), o in flow.source_offsets().items()), 60, "MM2 caught up")
    after = mm2_metrics(worker, flow)
    resumed = timestamps_at(flow.b.bootstrap, flow.remote, paused_end)
    offset_of = {(p, ts): o for (p, o), ts in sorted(traffic.ts.items(), reverse=True)}

    for p in UPSTREAM:
        at = str(p)
        # the check saw a backlog of seconds...
        assert lag[(flow.topic, p)] >= 50, lag  # ~20 records/s for 6 s or more
        assert hand[p] >= 5
        assert check[p] is not None
        assert abs(check[p] - hand[p]) <= max(1.0, 0.15 * hand[p]), (check, hand)
        # ...while MM2's own figures did not move: nothing was copied, so nothing was measured
        for name in ("record_count", "record_age_ms", "replication_latency_ms"):
            assert during[(name, at)] == later[(name, at)], (name, during, later)
        assert later[("record_age_ms", at)] < 2000 < 1000 * hand[p]
        # resumed: MM2 copies on from where its consumer was, which is at or past the committed
        # offset: a paused task commits only what was acked before its loop last turned
        # (AbstractWorkerSourceTask.execute updates the committable offsets at the top of each
        # turn, and a paused task waits in awaitUnpause, so records acked after that turn are
        # committed at the next turn or the stop), so the committed offset may trail by the
        # records in flight when it paused: a fraction of a second of this traffic
        copied_first = offset_of[(p, resumed[p])]
        assert stored[(flow.source_alias, p)] + 1 <= copied_first <= stored[(flow.source_alias, p)] + 20
        # the oldest record copied after the resume; its age when polled lies between the resume
        # request and the first look that saw the task running (+ a poll)
        age_max = after[("record_age_ms_max", at)]
        assert t_patch - resumed[p] <= age_max <= t_running - resumed[p] + 5000, (age_max, t_patch, t_running)
        # the same quantity: the check's time lag, extended by the time from the check to the resume
        predicted = 1000 * check[p] + (t_patch - now_ms)
        slack = 1000 * max(1.0, 0.15 * hand[p]) + (t_running - t_patch) + 2000
        assert abs(age_max - predicted) <= slack, (age_max, check, t_patch - now_ms, t_running - now_ms)
        # acked after it was polled: the latency of the same records is at least their age
        assert after[("replication_latency_ms_max", at)] >= age_max
    # checkpoints: MM2's figure exists per group partition and is the emit-to-ack time only
    cps = {k: v for k, v in after.items() if k[0] == "checkpoint_latency_ms_max"}
    assert set(cps) == {("checkpoint_latency_ms_max", f"{flow.group}:{p}") for p in UPSTREAM}, after
    assert all(0 <= v < 2000 for v in cps.values()), cps
