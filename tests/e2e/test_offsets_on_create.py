"""spec.offsets: where a connector starts when the operator creates it, proven by what it writes.

A FileStreamSource's offset is a byte position in its file, so the records it produces say
exactly where it started: ``set`` must produce the lines after the position given and nothing
before; ``clear`` after a delete and re-create must replay the file from its first line;
``resume`` (the default) must not replay, and must say in status and an Event that it resumed
from offsets an earlier connector of the same name left.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, wait_for
from tests.e2e.test_offset_reset_e2e import LINES, make_source, offsets
from tests.e2e.test_offset_truth_source import latest_positions, raw_records
from tests.env.records import topic_record_count, topic_values
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def produced(worker: ConnectWorker, topic: str) -> list[str]:
    return [json.loads(v) for v in topic_values(worker.bootstrap, topic)]


def one_partition_topic(worker: ConnectWorker) -> str:
    """A topic of one partition: the order of its records is the order the source read its lines."""
    topic = f"lines-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": worker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    return topic


def source(path: Path, topic: str, **extra: Any) -> dict[str, Any]:
    return {"clusterRef": {"name": "main"}, "class": SOURCE, "config": {"file": str(path), "topic": topic}, **extra}


def on_create(k8s: K8s, name: str) -> dict[str, Any]:
    status: dict[str, Any] = k8s.get("connectors", name).get("status") or {}
    return dict(status.get("offsetsOnCreate") or {})


def setup_cluster(k8s: K8s, connect: ConnectWorker) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")


class Bystander:
    """Another source on the same worker and offsets topic: what a reset of ours must not touch,
    as the broker holds it (its records in the offsets topic, byte for byte) and as it produced."""

    def __init__(self, k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
        self.connect = connect
        self.name, self.topic = make_source(k8s, tmp_path, "main", connect)
        self.records = raw_records(connect, self.name)
        assert self.records

    def untouched(self) -> None:
        assert raw_records(self.connect, self.name) == self.records
        assert topic_record_count(self.connect.bootstrap, self.topic) == len(LINES)


def position_in_offsets_topic(connect: ConnectWorker, name: str, path: Path) -> Any:
    """The connector's latest offset for its file, read from the worker's offsets topic."""
    return latest_positions(connect, name).get(repr(sorted({"filename": str(path)}.items())))


def delete_and_wait(k8s: K8s, rest: ConnectREST, name: str) -> None:
    k8s.delete("connectors", name)
    wait_for(lambda: not k8s.exists("connectors", name), 90, f"Connector {name} deleted")
    assert not rest.exists(name)


def test_set_starts_the_first_task_exactly_there(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    setup_cluster(k8s, connect)
    rest = ConnectREST(connect)
    bystander = Bystander(k8s, connect, tmp_path)
    name, topic = f"set-{uuid.uuid4().hex[:6]}", one_partition_topic(connect)
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    position = sum(len(line) + 1 for line in LINES[:2])
    entries = [{"partition": {"filename": str(path)}, "offset": {"position": position}}]
    k8s.create("connectors", name, source(path, topic, offsets={"onCreate": "set", "entries": entries}), "Connector")

    k8s.wait_condition("connectors", name, "OffsetsOnCreate", "True", timeout=180)
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: len(produced(connect, topic)) >= len(LINES) - 2, 60, "the lines after the position")
    time.sleep(3)  # anything read from before the position would show up by now
    assert produced(connect, topic) == LINES[2:]
    marker = on_create(k8s, name)
    assert marker["state"] == "Applied"
    reset = k8s.get("offsetresets", marker["offsetReset"])
    assert reset["status"]["phase"] == "Succeeded"
    assert reset["spec"]["action"] == "alter"
    assert reset["metadata"]["ownerReferences"][0]["name"] == name
    # the reset's own record of the change, and Connect's offsets after the task read to the end
    assert [c["state"] for c in reset["status"]["changes"]] == ["Done"]
    size = path.stat().st_size
    wait_for(lambda: offsets(rest, name) and offsets(rest, name)[0]["offset"]["position"] == size, 60, "committed")
    # the broker agrees, and the other connector's offsets and output did not move
    assert position_in_offsets_topic(connect, name, path) == {"position": size}
    bystander.untouched()


def test_resume_reports_and_clear_replays_after_delete_and_recreate(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    setup_cluster(k8s, connect)
    rest = ConnectREST(connect)
    bystander = Bystander(k8s, connect, tmp_path)
    name, topic = f"src-{uuid.uuid4().hex[:6]}", one_partition_topic(connect)
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    size = path.stat().st_size

    # first life: reads the file, commits its position; the status says it found nothing
    k8s.create("connectors", name, source(path, topic), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: produced(connect, topic) == LINES, 60, "lines copied")
    wait_for(lambda: offsets(rest, name), 60, "offsets committed")
    assert on_create(k8s, name)["foundPartitions"] == 0
    delete_and_wait(k8s, rest, name)

    # second life, default resume: no replay, and it says where it resumed from
    k8s.create("connectors", name, source(path, topic), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: on_create(k8s, name).get("state") == "Resumed", 30, "resume reported")
    marker = on_create(k8s, name)
    assert marker["foundPartitions"] == 1
    assert marker["found"] == [{"partition": {"filename": str(path)}, "offset": {"position": size}}]
    # kopf posts Events in the background: the status can be seen first
    wait_for(lambda: "ExistingOffsets" in {e.reason for e in k8s.events(name)}, 30, "the ExistingOffsets Event")
    time.sleep(4)
    assert produced(connect, topic) == LINES  # nothing replayed
    delete_and_wait(k8s, rest, name)

    # third life, clear: the file is read again from its first line, once
    k8s.create("connectors", name, source(path, topic, offsets={"onCreate": "clear"}), "Connector")
    k8s.wait_condition("connectors", name, "OffsetsOnCreate", "True", timeout=180)
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(lambda: len(produced(connect, topic)) >= 2 * len(LINES), 60, "the file replayed")
    time.sleep(3)
    assert produced(connect, topic) == LINES + LINES
    wait_for(lambda: position_in_offsets_topic(connect, name, path) == {"position": size}, 60, "the replay committed")
    bystander.untouched()
    cleared = k8s.get("offsetresets", on_create(k8s, name)["offsetReset"])
    assert cleared["spec"]["action"] == "reset"
    assert cleared["status"]["phase"] == "Succeeded"

    # a later edit of spec.offsets does nothing, and says so
    entries = [{"partition": {"filename": str(path)}, "offset": {"position": 0}}]
    k8s.patch_spec("connectors", name, {"offsets": {"onCreate": "set", "entries": entries}})
    wait_for(
        lambda: (k8s.condition("connectors", name, "OffsetsOnCreate") or {}).get("reason") == "ChangeIgnored",
        60,
        "the change reported as ignored",
    )
    time.sleep(3)
    assert produced(connect, topic) == LINES + LINES
