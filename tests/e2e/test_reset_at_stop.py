"""What "before" means under Connect's production timing: a worker with its default
``offset.flush.interval.ms`` (60 s), where a connector's committed offsets trail its position
until its tasks stop and commit it.

Every test reads the truth from the system, never from the operator's status: the offsets topic
and ``GET /offsets`` straight from the worker (not through the proxy the operator talks to), the
sink's consumer group with the Kafka admin client, the records in the topics and the lines in
the sink's file. A delay on the operator's first offsets call (a fault proxy between the
operator and the worker) holds the reset between its backup and its change, long enough for the
test to read, on its own, what the stop committed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import kubernetes
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.adapters.kafka import KafkaOffsets
from connectops.failpoints import EXIT_CODE
from connectops.reconcilers.reset_run import backup_name
from tests.e2e.conftest import (
    ConnectREST,
    K8s,
    OperatorProcess,
    connect_cluster_spec,
    topic_record_count,
    wait_for,
)
from tests.e2e.test_offset_reset_e2e import backup_doc, reset
from tests.e2e.test_offset_truth_sink import Log, Output, connect_offsets, group_commits
from tests.e2e.test_offsets_on_create import on_create
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.latencyproxy import FETCH, LatencyProxy
from tests.env.records import records_up_to_now
from tests.env.servers import ConnectWorker, KafkaBroker, KubeAPI, free_port

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
OFFSETS = r"^/connectors/[^/]+/offsets$"
#: Connect's default: the worker commits offsets once a minute, and as its tasks stop
FLUSH_DEFAULT = {"offset.flush.interval.ms": "60000"}
LINES = [f"line-{i}" for i in range(6)]
#: how long the operator's first offsets call is held at the proxy: the test's window to read
HOLD = 10.0
#: how long each fetch of the slow reader's worker's offsets-topic reader is held (see slow_reader)
READER_DELAY = 5.0


@pytest.fixture(scope="module")
def worker(connect_factory: Any) -> Iterator[ConnectWorker]:
    started: ConnectWorker = connect_factory("flush-default", extra_properties=FLUSH_DEFAULT)
    yield started
    started.stop()  # an idle JVM for the rest of the session otherwise


class SlowReader(NamedTuple):
    worker: ConnectWorker
    #: ``proxy.slow[READER]`` is the reader's delay, which a test may change (new fetches)
    proxy: LatencyProxy


READER = (FETCH, "-offsets")


@pytest.fixture(scope="module")
def slow_reader(testenv_root: Path) -> Iterator[SlowReader]:
    """A worker at Connect's default flush whose reader of its offsets topic trails the topic by
    up to READER_DELAY seconds, while its config and status readers keep up: a broker of its own
    behind a proxy that holds only that reader's fetches (client id ``<group>-offsets``), as a
    loaded worker's reader trails after a large write. Every client goes through the proxy: the
    broker advertises it."""
    port = free_port()
    broker = KafkaBroker(testenv_root, name="slow-reader-kafka", advertised_port=port)
    proxy = LatencyProxy(("127.0.0.1", broker.port), delay=0.0, port=port, slow={READER: READER_DELAY})
    worker = ConnectWorker(testenv_root, proxy.address, name="slow-reader", extra_properties=FLUSH_DEFAULT)
    proxy.start()
    try:
        broker.start()
        yield SlowReader(worker.start(), proxy)
    finally:
        worker.stop()
        broker.stop()
        proxy.stop()


@pytest.fixture
def proxy(worker: ConnectWorker) -> Iterator[FaultProxy]:
    with FaultProxy(worker.url) as p:
        yield p


@pytest.fixture
def cluster(k8s: K8s, worker: ConnectWorker, proxy: FaultProxy) -> str:
    spec = connect_cluster_spec(worker)
    spec["restUrl"] = proxy.url
    k8s.create("connectclusters", "prod", spec, "ConnectCluster")
    k8s.wait_condition("connectclusters", "prod", "Ready", "True")
    return "prod"


def latest_records(worker: ConnectWorker, name: str) -> list[dict[str, Any]]:
    """The connector's offsets as its offsets topic holds them: the latest value of each key."""
    latest: dict[bytes, Any] = {}
    for record in KafkaOffsets(worker.bootstrap).read_connector_offsets(worker.offset_topic, {name}):
        latest[record.key] = record
    return [
        {"partition": r.partition_map, "offset": r.source_offset()}
        for r in latest.values()
        if r.value is not None and r.partition_map is not None
    ]


def offsets_history(worker: ConnectWorker, name: str) -> list[Any]:
    """Every value the offsets topic holds for the connector's keys, in the order written (a
    key lives in one partition): JSON offsets, None for a tombstone."""
    found = []
    for msg in records_up_to_now(worker.bootstrap, worker.offset_topic):
        key = json.loads(msg.key() or b"null")
        if isinstance(key, list) and key and key[0] == name:
            found.append((msg.offset(), None if msg.value() is None else json.loads(msg.value())))
    return [value for _, value in sorted(found, key=lambda f: f[0])]


def source(k8s: K8s, worker: ConnectWorker, tmp_path: Path, cluster: str) -> tuple[str, str, Path]:
    """A FileStreamSource that has copied LINES a moment ago: no periodic commit yet."""
    name, topic = f"src-{uuid.uuid4().hex[:6]}", f"lines-{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(f"{line}\n" for line in LINES))
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": cluster}, "class": SOURCE, "config": {"file": str(path), "topic": topic}},
        "Connector",
    )
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: topic_record_count(worker.bootstrap, topic) == len(LINES), 60, "lines copied")
    return name, topic, path


def held_at_the_first_offsets_call(k8s: K8s, reset_name: str, rest: ConnectREST, connector: str) -> dict[str, Any]:
    """The reset's status once it has announced its first offsets call (which the proxy holds):
    the connector is stopped and its backup written by then."""

    def announced() -> dict[str, Any] | None:
        status = k8s.get("offsetresets", reset_name).get("status") or {}
        return status if status.get("changes") else None

    status: dict[str, Any] = wait_for(announced, 90, f"{reset_name}'s first offsets call")
    assert rest.state(connector) == "STOPPED"
    return status


def position(path: Path) -> list[dict[str, Any]]:
    """Where a FileStreamSource that read all of ``path`` is: its size in bytes."""
    return [{"partition": {"filename": str(path)}, "offset": {"position": path.stat().st_size}}]


def test_a_sources_backup_is_the_position_its_stop_committed(
    k8s: K8s, worker: ConnectWorker, proxy: FaultProxy, cluster: str, tmp_path: Path
) -> None:
    rest = ConnectREST(worker)
    name, topic, path = source(k8s, worker, tmp_path, cluster)
    # the scenario: 6 lines copied, nothing committed yet (the first periodic commit is a minute away)
    assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == []
    assert latest_records(worker, name) == []

    hold = proxy.add_rule(FaultRule("delay", method="DELETE", path=OFFSETS, seconds=HOLD, times=1))
    k8s.create("offsetresets", "again", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset")
    held = held_at_the_first_offsets_call(k8s, "again", rest, name)
    # what the stop committed, read by the test: the offsets topic, and Connect itself
    committed = latest_records(worker, name)
    assert committed == position(path) == [{"partition": {"filename": str(path)}, "offset": {"position": 42}}]
    assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == committed
    saved = backup_doc(k8s, held["backup"]["configMap"])
    assert saved["connectors"][name]["offsets"] == committed
    assert saved["readAfterStop"] is True
    status = wait_for(
        lambda: (
            (s := k8s.get("offsetresets", "again").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s
        ),
        120,
        "the reset to finish",
    )
    assert status["phase"] == "Succeeded", status
    assert hold.fired == 1
    assert status["plan"]["current"] == {name: committed}
    assert status["plan"]["currentAsOf"] == "stop"
    wait_for(lambda: topic_record_count(worker.bootstrap, topic) == 2 * len(LINES), 60, "the file copied once more")

    # the restore puts back the position the stop committed: nothing is copied again (with the
    # backup an earlier order took, [], it cleared the offsets and the file was copied a third time)
    hold = proxy.add_rule(FaultRule("delay", method="PATCH", path=OFFSETS, seconds=HOLD, times=1))
    k8s.create(
        "offsetresets",
        "back",
        {"connectorRef": {"name": name}, "action": "restore", "restoreFrom": status["backup"]["configMap"]},
        "OffsetReset",
    )
    held = held_at_the_first_offsets_call(k8s, "back", rest, name)
    # the restore's own backup is its stop's commit too: the second copy's position
    assert backup_doc(k8s, held["backup"]["configMap"])["connectors"][name]["offsets"] == latest_records(worker, name)
    assert latest_records(worker, name) == position(path)
    restored = wait_for(
        lambda: (
            (s := k8s.get("offsetresets", "back").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s
        ),
        120,
        "the restore to finish",
    )
    assert restored["phase"] == "Succeeded", restored
    assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == committed
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "the source running")
    time.sleep(5)
    assert topic_record_count(worker.bootstrap, topic) == 2 * len(LINES)  # nothing copied again


def listed(rest: ConnectREST, name: str) -> list[dict[str, Any]]:
    return list(rest.http.get(rest.path(name) + "/offsets", timeout=30).json()["offsets"])


def test_a_backup_waits_until_connect_lists_what_its_offsets_topic_holds(
    k8s: K8s, slow_reader: SlowReader, tmp_path: Path
) -> None:
    """Connect lists a source's partitions (GET and DELETE /offsets) from the set its reader of
    the worker's offsets topic has consumed so far, without reading to the end first
    (Worker.sourceConnectorOffsets: ConnectorOffsetBackingStore.start leaves the worker's store
    alone; only the values are read to the end). A partition its stop has just committed for the
    first time can therefore be missing from the answer the backup is taken from: the backup
    waits until Connect lists what the offsets topic holds."""
    worker = slow_reader.worker
    rest = ConnectREST(worker)
    # Connect's behaviour first, without the operator: a stopped connector given partitions by
    # PATCH (its answer comes once the records are acknowledged) does not list them at once
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    config = {"connector.class": SOURCE, "file": str(tmp_path / "none.txt"), "topic": f"{probe}-out"}
    rest.http.post("/connectors", json={"name": probe, "config": config, "initial_state": "STOPPED"}).raise_for_status()
    wait_for(lambda: rest.state(probe) == "STOPPED", 60, f"{probe} stopped")
    missed = 0
    for i in range(3):
        entry = {"partition": {"filename": f"/probe/{i}"}, "offset": {"position": i}}
        rest.http.patch(rest.path(probe) + "/offsets", json={"offsets": [entry]}, timeout=60).raise_for_status()
        at_once = listed(rest, probe)
        assert entry in latest_records(worker, probe)  # in the topic when the PATCH answered
        missed += entry not in at_once
        wait_for(lambda e=entry: e in listed(rest, probe), 30, f"{probe} listing {entry}")  # type: ignore[misc]
    print(f"\nGET /offsets right after a PATCH missed its partition {missed} time(s) in 3")
    assert missed >= 1, "Connect listed every partition at once: the lag this test is about was not there"
    rest.http.delete(rest.path(probe)).raise_for_status()
    probe_left = latest_records(worker, probe)  # Connect keeps a deleted connector's offsets
    assert len(probe_left) == 3

    # the operator's reset of a source whose stop commits its first offset: its backup holds it
    with FaultProxy(worker.url) as proxy:
        spec = connect_cluster_spec(worker)
        spec["restUrl"] = proxy.url
        k8s.create("connectclusters", "slow", spec, "ConnectCluster")
        k8s.wait_condition("connectclusters", "slow", "Ready", "True")
        name, _topic, path = source(k8s, worker, tmp_path, "slow")
        assert latest_records(worker, name) == []  # nothing committed yet
        proxy.add_rule(FaultRule("delay", method="DELETE", path=OFFSETS, seconds=HOLD, times=1))
        k8s.create("offsetresets", "first", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset")
        held = held_at_the_first_offsets_call(k8s, "first", rest, name)
        committed = latest_records(worker, name)
        assert committed == position(path)
        saved = backup_doc(k8s, held["backup"]["configMap"])
        assert saved["connectors"][name]["offsets"] == committed
        assert held["backup"]["offsets"] == 1
        k8s.wait_condition("offsetresets", "first", "Succeeded", "True", timeout=120)
        # Connect's DELETE named the partition too (it lists them as the GET does): the stop's
        # commit, then its tombstone (the next commit is a flush interval after the resume)
        assert offsets_history(worker, name)[:2] == [{"position": path.stat().st_size}, None]
    # what the reset must not touch: the other connector's offsets in the same topic
    assert latest_records(worker, probe) == probe_left


def test_a_sinks_backup_is_the_group_its_stop_committed(
    k8s: K8s, worker: ConnectWorker, proxy: FaultProxy, cluster: str, tmp_path: Path
) -> None:
    rest = ConnectREST(worker)
    run = uuid.uuid4().hex[:6]
    topic, name = f"orders-{run}", f"sink-{run}"
    group = f"connect-{name}"
    admin = AdminClient({"bootstrap.servers": worker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=15)
    log = Log(worker.bootstrap)
    log.produce(topic, {0: 3, 1: 2}, "a")
    out = Output(tmp_path / f"{name}.out")
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": cluster}, "class": SINK, "config": {"file": str(out.path), "topics": topic}},
        "Connector",
    )
    k8s.wait_condition("connectors", name, "Ready", "True")
    assert out.new(log.after({})) == log.after({})
    # the scenario: everything written to the file, nothing committed to the group yet
    assert group_commits(worker.bootstrap, group) == {}

    proxy.add_rule(FaultRule("delay", method="DELETE", path=OFFSETS, seconds=HOLD, times=1))
    k8s.create("offsetresets", "replay", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset")
    held = held_at_the_first_offsets_call(k8s, "replay", rest, name)
    # what the stop committed, read by the test: the group (admin client) and Connect
    committed = {tp: c[0] for tp, c in group_commits(worker.bootstrap, group).items()}
    assert committed == log.ends() == {(topic, 0): 3, (topic, 1): 2}
    assert connect_offsets(rest, name) == committed
    saved = backup_doc(k8s, held["backup"]["configMap"])["connectors"][name]["offsets"]
    assert {
        (e["partition"]["kafka_topic"], e["partition"]["kafka_partition"]): e["offset"]["kafka_offset"] for e in saved
    } == (committed)
    status = wait_for(
        lambda: (
            (s := k8s.get("offsetresets", "replay").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s
        ),
        120,
        "the reset to finish",
    )
    assert status["phase"] == "Succeeded", status
    # reset: the sink writes every record once more
    assert out.new(log.after({})) == log.after({})

    # restore: the group back at the position the stop committed, nothing written again
    proxy.add_rule(FaultRule("delay", method="PATCH", path=OFFSETS, seconds=HOLD, times=1))
    k8s.create(
        "offsetresets",
        "restore",
        {"connectorRef": {"name": name}, "action": "restore", "restoreFrom": status["backup"]["configMap"]},
        "OffsetReset",
    )
    held = held_at_the_first_offsets_call(k8s, "restore", rest, name)
    again = {tp: c[0] for tp, c in group_commits(worker.bootstrap, group).items()}
    assert again == log.ends()  # the replay's position, committed by the restore's stop
    saved = backup_doc(k8s, held["backup"]["configMap"])["connectors"][name]["offsets"]
    assert {
        (e["partition"]["kafka_topic"], e["partition"]["kafka_partition"]): e["offset"]["kafka_offset"] for e in saved
    } == (again)
    restored = wait_for(
        lambda: (
            (s := k8s.get("offsetresets", "restore").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s
        ),
        120,
        "the restore to finish",
    )
    assert restored["phase"] == "Succeeded", restored
    assert {tp: c[0] for tp, c in group_commits(worker.bootstrap, group).items()} == committed
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "the sink running")
    time.sleep(5)
    assert len(out.lines()) == 2 * sum(log.ends().values())  # nothing written again

    # a backup of a sink that held nothing: restoring it is clearing the group (one DELETE; a
    # PATCH without offsets is refused), and the sink, resumed, reads from the earliest again
    empty = {"version": 1, "connectors": {name: {"kind": "sink", "offsets": []}}}
    k8s.core.create_namespaced_config_map(
        k8s.ns, kubernetes.client.V1ConfigMap(metadata={"name": "empty"}, data={"backup.json": json.dumps(empty)})
    )
    cleared = reset(k8s, "from-empty", {"connectorRef": {"name": name}, "action": "restore", "restoreFrom": "empty"})
    assert [(c["call"], c["state"]) for c in cleared["changes"]] == [("DELETE offsets", "Done")]
    assert cleared["plan"]["current"][name]  # what its stop committed, before the clearing
    assert group_commits(worker.bootstrap, group) == {}  # the next periodic commit is a minute away
    assert rest.state(name) == "RUNNING"
    assert out.new(log.after({})) == log.after({})


def test_offsets_connect_refuses_as_invalid_fail_once_and_resume(
    k8s: K8s, worker: ConnectWorker, proxy: FaultProxy, cluster: str, tmp_path: Path
) -> None:
    """A backup (written by hand) whose offset FileStreamSource refuses: Connect answers the
    PATCH with HTTP 500 and the connector's words. Not retried; read back, nothing changed, the
    source runs again and copies nothing twice."""
    rest = ConnectREST(worker)
    name, topic, path = source(k8s, worker, tmp_path, cluster)
    bad = {"partition": {"filename": str(path)}, "offset": {"pos": 1}}
    doc = {"version": 1, "connectors": {name: {"kind": "source", "offsets": [bad]}}}
    k8s.core.create_namespaced_config_map(
        k8s.ns, kubernetes.client.V1ConfigMap(metadata={"name": "bad"}, data={"backup.json": json.dumps(doc)})
    )
    refused = reset(
        k8s, "bad", {"connectorRef": {"name": name}, "action": "restore", "restoreFrom": "bad"}, phase="Failed"
    )
    steps = {s["name"]: s for s in refused["steps"]}
    assert steps["reset"]["state"] == "Failed"
    assert steps["reset"]["attempts"] == 1
    # one PATCH reached the worker: the refusal was not retried
    assert [r.method for r in proxy.requests if r.method == "PATCH"] == ["PATCH"]
    assert [c["state"] for c in refused["changes"]] == ["Refused"]
    message = next(c for c in refused["conditions"] if c["type"] == "Succeeded")["message"]
    assert "HTTP 500: Offset objects should either be null or contain the key 'position'" in message
    assert message.count("not retried") == 1
    assert "Nothing was changed: the offsets read back from Connect and Kafka after the failure equal the backup" in (
        message
    )
    # the truth: the offsets are what the stop committed (the restore's own backup), and the
    # source runs on from them
    assert latest_records(worker, name) == position(path)
    assert backup_doc(k8s, refused["backup"]["configMap"])["connectors"][name]["offsets"] == position(path)
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "the source running")
    time.sleep(3)
    assert topic_record_count(worker.bootstrap, topic) == len(LINES)


@pytest.fixture
def upgrade_env(kube: KubeAPI, kube_client: Any, crds: None, tmp_path: Path) -> Iterator[tuple[K8s, OperatorProcess]]:
    ns = f"crash-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    operator = OperatorProcess(kube, ns, tmp_path)
    yield K8s(kube_client, ns), operator
    operator.stop()


#: the steps as the operator version that backed up before the stop listed them
OLD_ORDER = ["lock", "inspect", "backup", "stop", "reset", "offsetSyncs", "resume", "verify", "unlock"]


def test_a_reset_in_flight_in_the_old_step_order_finishes_after_the_upgrade(
    upgrade_env: tuple[K8s, OperatorProcess], worker: ConnectWorker, tmp_path: Path
) -> None:
    """The earlier version wrote "backup Done, stop Running" in one status write and died before
    its PUT /stop: its backup, read while the source ran, holds nothing. That status is written
    here by hand (on a reset this version locked and planned); this version resumes it, stops
    the source, backs it up again after the stop, resets and resumes it."""
    k8s, operator = upgrade_env
    rest = ConnectREST(worker)
    operator.start(failpoint="inspect:done")  # exits with the lock taken and the plan written
    k8s.create("connectclusters", "prod", connect_cluster_spec(worker), "ConnectCluster")
    name, topic, path = source(k8s, worker, tmp_path, "prod")
    pre_stop = rest.http.get(rest.path(name) + "/offsets").json()["offsets"]
    assert pre_stop == []  # what the earlier version's backup read

    k8s.create("offsetresets", "r", {"connectorRef": {"name": name}, "action": "reset"}, "OffsetReset")
    assert operator.wait_exit(120) == EXIT_CODE, operator.log_tail()
    body = k8s.get("offsetresets", "r")
    status, uid = body["status"], body["metadata"]["uid"]
    assert rest.state(name) == "RUNNING"  # nothing stopped yet

    # the status as the earlier version left it
    old_backup = backup_name(k8s.ns, "r", uid)
    doc = {
        "version": 1,
        "cluster": "prod",
        "offsetReset": f"{k8s.ns}/r",
        "takenAt": "2026-01-01T00:00:00Z",
        "connectors": {name: {"kind": "source", "offsets": pre_stop}},
    }
    k8s.core.create_namespaced_config_map(
        k8s.ns,
        kubernetes.client.V1ConfigMap(
            metadata={
                "name": old_backup,
                "labels": {"connectops.io/backup": "offsets", "connectops.io/cluster": "prod"},
                "annotations": {
                    "connectops.io/offset-reset": "r",
                    "connectops.io/offset-reset-uid": uid,
                    "connectops.io/connectors": name,
                },
            },
            data={"backup.json": json.dumps(doc)},
        ),
    )
    by_name = {s["name"]: s for s in status["steps"]}
    assert (by_name["inspect"]["state"], by_name["stop"]["state"], by_name["backup"]["state"]) == (
        "Done",
        "Running",
        "Pending",
    )
    by_name["backup"] = {
        **by_name["backup"],
        "state": "Done",
        "attempts": 1,
        "startedAt": by_name["inspect"]["finishedAt"],
        "finishedAt": by_name["inspect"]["finishedAt"],
        "message": f"saved 0 partition offset(s) to ConfigMap {old_backup}",
    }
    plan = {**status["plan"], "steps": [s for s in OLD_ORDER if s != "offsetSyncs"], "current": {name: []}}
    plan["currentCounts"] = {name: 0}
    written = {
        "steps": [by_name[s] for s in OLD_ORDER],
        "backup": {"configMap": old_backup, "offsets": 0, "takenAt": "2026-01-01T00:00:00Z"},
        "plan": plan,
        "currentStep": "stop",
    }
    k8s.custom.patch_namespaced_custom_object_status(
        "connectops.io", "v1alpha1", k8s.ns, "offsetresets", "r", {"status": written}
    )
    assert [s["name"] for s in k8s.get("offsetresets", "r")["status"]["steps"]] == OLD_ORDER

    operator.start()
    done = wait_for(
        lambda: (s := k8s.get("offsetresets", "r").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s,
        180,
        "the upgraded operator to finish the reset",
    )
    assert done["phase"] == "Succeeded", done
    assert [s["name"] for s in done["steps"]] == ["lock", "inspect", "stop", "backup", *OLD_ORDER[4:]]
    assert {s["name"]: s["state"] for s in done["steps"]} == {
        s: "Skipped" if s == "offsetSyncs" else "Done" for s in OLD_ORDER
    }
    # the backup taken again after the stop: the position the stop committed, as the offsets
    # topic shows it (the record the stop wrote, before the reset's tombstone)
    history = offsets_history(worker, name)
    reset_at = history.index(None)  # the reset's tombstone, after the stop's commit
    assert reset_at >= 1, history
    assert history[:reset_at] == [position(path)[0]["offset"]] * reset_at, history
    assert done["backup"]["configMap"] == f"{old_backup}-stopped"
    assert done["backup"]["earlierConfigMap"] == old_backup
    assert backup_doc(k8s, done["backup"]["configMap"])["connectors"][name]["offsets"] == position(path)
    assert backup_doc(k8s, old_backup, operators=False) == doc  # the earlier one kept as it was
    wait_for(lambda: topic_record_count(worker.bootstrap, topic) == 2 * len(LINES), 60, "re-read once")
    assert rest.state(name) == "RUNNING"
    leases = kubernetes.client.CoordinationV1Api(k8s.core.api_client).list_namespaced_lease(k8s.ns).items
    assert leases == []

    # and the backup it names restores the stop's position: nothing is copied a third time
    k8s.create(
        "offsetresets",
        "back",
        {"connectorRef": {"name": name}, "action": "restore", "restoreFrom": done["backup"]["configMap"]},
        "OffsetReset",
    )
    back = wait_for(
        lambda: (
            (s := k8s.get("offsetresets", "back").get("status") or {}).get("phase") in ("Succeeded", "Failed") and s
        ),
        120,
        "the restore",
    )
    assert back["phase"] == "Succeeded", back
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "the source running")
    time.sleep(5)
    assert topic_record_count(worker.bootstrap, topic) == 2 * len(LINES)


def test_a_rename_carries_the_position_its_stop_committed_first(
    k8s: K8s, slow_reader: SlowReader, tmp_path: Path
) -> None:
    """A rename reads the old connector's offsets over REST once it is STOPPED (the Connector
    reconciler has no Kafka access): on a worker whose offsets reader trails, the first answer
    after the stop can leave out the position the stop has just committed; the rename asks
    until two answers agree, and the new connector goes on from that position."""
    worker = slow_reader.worker
    rest = ConnectREST(worker)
    k8s.create("connectclusters", "slow", connect_cluster_spec(worker), "ConnectCluster")
    k8s.wait_condition("connectclusters", "slow", "Ready", "True")
    old, topic, path = source(k8s, worker, tmp_path, "slow")
    assert latest_records(worker, old) == []  # nothing committed: the first periodic commit is a minute away
    new = f"{old}-v2"
    spec = {"clusterRef": {"name": "slow"}, "class": SOURCE, "config": {"file": str(path), "topic": topic}}
    k8s.create("connectors", new, {**spec, "offsets": {"from": {"connector": old}}}, "Connector")
    k8s.wait_condition("connectors", new, "OffsetsOnCreate", "False", "RenameWaiting", 60)
    # the reader trails by up to 12 s while the old connector is stopped and read: longer than
    # the operator takes from the stop to its read (each GET /offsets takes as long: 30 s bounds it)
    slow_reader.proxy.slow[READER] = 12.0
    try:
        k8s.delete("connectors", old)
        k8s.wait_condition("connectors", new, "OffsetsOnCreate", "True", "Applied", 240)
    finally:
        slow_reader.proxy.slow[READER] = READER_DELAY
    marker = on_create(k8s, new)
    # what the old connector's stop committed, read by the test from the offsets topic
    assert latest_records(worker, old) == position(path)
    assert k8s.get("offsetresets", marker["offsetReset"])["spec"].get("offsets") == position(path)
    assert marker["carried"] == 1
    assert latest_records(worker, new) == position(path)
    # the new connector goes on from there: no line copied twice
    wait_for(lambda: rest.state(new) == "RUNNING", 60, f"{new} running")
    time.sleep(5)
    assert topic_record_count(worker.bootstrap, topic) == len(LINES)
