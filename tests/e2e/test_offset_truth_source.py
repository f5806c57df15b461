"""Source resets change exactly their own connector's offsets, and what Connect says about
offsets a connector may keep elsewhere reaches the user.

Two FileStreamSource connectors share the worker's offsets topic: every reset of one is checked
against the offsets-topic records of the other (key and value bytes, partition and position:
they must not move), against Connect's ``GET /offsets`` and against what the reset connector
produces afterwards (exactly the lines after the offset it was given).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectops.adapters.kafka import KafkaOffsets
from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, topic_record_count, wait_for
from tests.e2e.test_offset_reset_e2e import LINES, make_source, offsets, reset
from tests.e2e.test_offset_truth_sink import Log, Output
from tests.env.plugins import EXTERNAL_OFFSETS_SINK, sinks_jar
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def raw_records(worker: ConnectWorker, name: str) -> list[tuple[int, bytes, bytes | None]]:
    """The connector's records in the worker's offsets topic, exactly as stored."""
    records = KafkaOffsets(worker.bootstrap).read_connector_offsets(worker.offset_topic, {name})
    return [(r.partition, r.key, r.value) for r in records]


def latest_positions(worker: ConnectWorker, name: str) -> dict[str, Any]:
    """Latest offset per partition map, from the offsets topic (None: a tombstone)."""
    latest: dict[str, Any] = {}
    for record in KafkaOffsets(worker.bootstrap).read_connector_offsets(worker.offset_topic, {name}):
        latest[repr(sorted((record.partition_map or {}).items()))] = record.source_offset()
    return latest


@pytest.mark.parametrize("strategy", ["rest", "tombstone"])
def test_source_resets_touch_only_their_connector(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path, strategy: str
) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    rest = ConnectREST(connect)
    name, topic = make_source(k8s, tmp_path, "main", connect)
    bystander, bystander_topic = make_source(k8s, tmp_path, "main", connect)
    untouched = raw_records(connect, bystander)
    assert untouched

    def check_bystander() -> None:
        assert raw_records(connect, bystander) == untouched
        assert topic_record_count(connect.bootstrap, bystander_topic) == len(LINES)

    # alter: skip the first three lines -> the last two are read again, nothing else
    partition = offsets(rest, name)[0]["partition"]
    position = sum(len(line) + 1 for line in LINES[:3])
    altered = reset(
        k8s,
        "alter",
        {
            "connectorRef": {"name": name},
            "strategy": strategy,
            "action": "alter",
            "offsets": [{"partition": partition, "offset": {"position": position}}],
        },
    )
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == len(LINES) + 2, 60, "two lines re-read")
    check_bystander()
    assert altered["changes"][-1]["state"] == "Done"

    # reset: every partition of this connector goes; the file is read again from the start
    cleared = reset(k8s, "reset", {"connectorRef": {"name": name}, "strategy": strategy, "action": "reset"})
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES) + 2, 60, "re-read all")
    check_bystander()

    # restore the reset's backup: back to the end of the file, nothing is read again
    before = offsets(rest, name)
    reset(
        k8s,
        "restore",
        {
            "connectorRef": {"name": name},
            "strategy": strategy,
            "action": "restore",
            "restoreFrom": cleared["backup"]["configMap"],
        },
    )
    assert offsets(rest, name) == before
    assert all(v is not None for v in latest_positions(connect, name).values())
    time.sleep(3)
    assert topic_record_count(connect.bootstrap, topic) == 2 * len(LINES) + 2  # nothing read again
    check_bystander()


def test_source_that_confirms_has_no_external_offsets_condition(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    """FileStreamSource's alterOffsets returns true: Connect says the offsets were changed, plainly."""
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    name, _ = make_source(k8s, tmp_path, "main", connect)
    status = reset(k8s, "confirmed", {"connectorRef": {"name": name}, "action": "reset"})
    assert [c["confirmedByConnector"] for c in status["changes"]] == [True]
    assert status["changes"][0]["message"].startswith("The offsets for this connector have been reset successfully")
    assert not any(c["type"] == "OffsetsExternallyManaged" for c in status["conditions"])


@pytest.fixture(scope="module")
def sinks_worker(connect_factory: Any) -> Iterator[ConnectWorker]:
    worker: ConnectWorker = connect_factory("sinks", extra_classpath=[sinks_jar()])
    yield worker
    worker.stop()  # an idle JVM, and its fetches on the broker, for the rest of the session otherwise


def test_sink_that_keeps_offsets_elsewhere(k8s: K8s, sinks_worker: ConnectWorker, tmp_path: Path) -> None:
    """A sink with Connect's default alterOffsets (false): Connect's own words reach the status and
    an Event; a Connector that declares external offsets is reset only when acknowledged."""
    k8s.create("connectclusters", "ext", connect_cluster_spec(sinks_worker), "ConnectCluster")
    k8s.wait_condition("connectclusters", "ext", "Ready", "True")
    rest = ConnectREST(sinks_worker)
    topic = f"ext-{uuid.uuid4().hex[:6]}"
    log = Log(sinks_worker.bootstrap)
    log.produce(topic, {0: 3}, "a")
    out = Output(tmp_path / "ext.out")
    k8s.create(
        "connectors",
        "ext-sink",
        {
            "clusterRef": {"name": "ext"},
            "class": EXTERNAL_OFFSETS_SINK,
            "config": {"file": str(out.path), "topics": topic},
            "offsetsManagedExternally": True,
        },
        "Connector",
    )
    k8s.wait_condition("connectors", "ext-sink", "Ready", "True")
    assert out.new(log.after({})) == log.after({})
    wait_for(lambda: offsets(rest, "ext-sink"), 60, "sink offsets committed")
    rewind = {
        "connectorRef": {"name": "ext-sink"},
        "action": "alter",
        "offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 1}}],
    }

    planned = reset(k8s, "ext-plan", {**rewind, "dryRun": True}, phase="Planned")
    assert any("offsetsManagedExternally" in w for w in planned["plan"]["warnings"])

    refused = reset(k8s, "ext-refused", rewind, phase="Failed")
    cond = next(c for c in refused["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "acknowledgeExternalOffsets" in cond["message"]
    assert "backup" not in refused
    assert rest.state("ext-sink") == "RUNNING"

    done = reset(k8s, "ext-ack", {**rewind, "acknowledgeExternalOffsets": True})
    assert [c["confirmedByConnector"] for c in done["changes"]] == [False]
    external = next(c for c in done["conditions"] if c["type"] == "OffsetsExternallyManaged")
    assert external["status"] == "True"
    # Connect's real words, not ours
    assert (
        "The Connect framework-managed offsets for this connector have been altered successfully" in external["message"]
    )
    assert "manages offsets externally" in external["message"]
    wait_for(lambda: "NotConfirmedByConnector" in {e.reason for e in k8s.events("ext-ack")}, 30, "its Event")
    # the framework-managed offset really moved: the sink writes records 1 and 2 again
    again = log.after({(topic, 0): 1})
    assert out.new(again) == again
