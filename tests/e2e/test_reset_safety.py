"""Backups an attacker (or an unlucky name) cannot turn against another connector's offsets."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes

from connectops.adapters.kafka import KafkaOffsets
from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, topic_record_count
from tests.e2e.test_offset_reset_e2e import LINES, backup_doc, make_source, reset
from tests.env.servers import ConnectWorker


def _records(worker: ConnectWorker, name: str) -> list[tuple[str, int, bytes, bytes | None]]:
    return [
        (r.topic, r.partition, r.key, r.value)
        for r in KafkaOffsets(worker.bootstrap).read_connector_offsets(worker.offset_topic, {name})
    ]


def _forged(k8s: K8s, name: str, connector: str, records: list[dict[str, Any]]) -> None:
    doc = {"version": 1, "connectors": {connector: {"kind": "source", "offsets": [], "records": records}}}
    body = kubernetes.client.V1ConfigMap(metadata={"name": name}, data={"backup.json": json.dumps(doc)})
    k8s.core.create_namespaced_config_map(k8s.ns, body)


def test_forged_backup_cannot_write_another_connectors_offsets(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    """A "backup" written by hand under the attacker's own connector, carrying the victim's offsets
    key (or a record for another topic), is refused before anything is stopped."""
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    attacker, _ = make_source(k8s, tmp_path, "main", connect)
    victim, victim_topic = make_source(k8s, tmp_path, "main", connect)
    victim_before = _records(connect, victim)
    [(topic, partition, key, _)] = [r for r in victim_before if r[3] is not None][-1:]
    # the victim's key with offset 0: restored, it would make the victim re-read its whole file
    evil_value = json.dumps({"position": 0}).encode()
    forged_key = {
        "topic": topic,
        "partition": partition,
        "key": base64.b64encode(key).decode(),
        "value": base64.b64encode(evil_value).decode(),
    }
    forged_topic = {**forged_key, "topic": victim_topic, "key": base64.b64encode(b"x").decode()}
    for cm, record in (("forged-key", forged_key), ("forged-topic", forged_topic)):
        _forged(k8s, cm, attacker, [record])
        refused = reset(
            k8s,
            f"restore-{cm}",
            {"connectorRef": {"name": attacker}, "action": "restore", "strategy": "tombstone", "restoreFrom": cm},
            phase="Failed",
        )
        cond = next(c for c in refused["conditions"] if c["type"] == "Succeeded")
        assert cond["reason"] == "InspectFailed"
        assert "not its own offsets" in cond["message"]
        assert "backup" not in refused  # refused before the backup step: nothing stopped or written
    rest = ConnectREST(connect)
    assert rest.state(attacker) == "RUNNING"
    assert _records(connect, victim) == victim_before
    assert topic_record_count(connect.bootstrap, victim_topic) == len(LINES)


def test_long_names_never_share_a_backup(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    """Two resets whose names share their first 235 characters get two backups; neither replaces
    the other (backups are create-only)."""
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    name, _ = make_source(k8s, tmp_path, "main", connect)
    stem = "r" * 235
    first = reset(k8s, stem + "-first", {"connectorRef": {"name": name}, "action": "reset", "dryRun": False})
    first_doc = backup_doc(k8s, first["backup"]["configMap"])
    second = reset(k8s, stem + "-second", {"connectorRef": {"name": name}, "action": "reset"})
    assert first["backup"]["configMap"] != second["backup"]["configMap"]
    assert len(second["backup"]["configMap"]) <= 253
    assert backup_doc(k8s, first["backup"]["configMap"]) == first_doc
    assert backup_doc(k8s, second["backup"]["configMap"])["offsetReset"].endswith("-second")


def test_large_objects_are_refused_at_admission_or_always_deletable(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    """A 1 MiB config value is refused by the API server with a message; a Connector whose spec is
    300 KiB (under every bound) is reconciled and deleted cleanly: kopf's diff base is a digest,
    not a second copy that would push the annotations past the API server's 256 KiB limit."""
    import pytest
    from kubernetes.client.exceptions import ApiException

    from tests.e2e.conftest import wait_for

    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    source = tmp_path / "big.txt"
    source.write_text("a\n")
    spec = {
        "clusterRef": {"name": "main"},
        "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "config": {"file": str(source), "topic": "big-lines"},
    }
    with pytest.raises(ApiException) as refused:
        k8s.create("connectors", "huge", {**spec, "config": {**spec["config"], "pad": "x" * (1 << 20)}}, "Connector")
    assert refused.value.status == 422
    assert "spec.config.pad" in str(refused.value.body)
    padding = {f"pad.{i}": "y" * 60_000 for i in range(5)}
    k8s.create("connectors", "large", {**spec, "config": {**spec["config"], **padding}}, "Connector")
    k8s.wait_condition("connectors", "large", "Ready", "True", timeout=90)
    annotations = k8s.get("connectors", "large")["metadata"].get("annotations") or {}
    assert sum(len(k) + len(v) for k, v in annotations.items()) < 4096
    assert ConnectREST(connect).config("large")["pad.4"] == "y" * 60_000
    k8s.delete("connectors", "large")
    wait_for(lambda: not k8s.exists("connectors", "large"), 60, "large Connector deleted")
    assert not ConnectREST(connect).exists("large")


def test_timestamps_are_bounded(k8s: K8s) -> None:
    """Issue 13, finding 10: an epoch that overflows int64, or a time without its UTC offset, is
    refused by the API server itself (the schema's pattern and maxLength: no CEL here); one the
    pattern admits but no clock can reach ends Failed with InvalidSpec, a Warning Event, and no
    call to anything."""
    import pytest
    from kubernetes.client.exceptions import ApiException

    from tests.e2e.conftest import wait_for

    base = {"connectorRef": {"name": "nobody"}, "action": "toTimestamp"}
    for i, text in enumerate(["99999999999999999999", "2026-01-31T12:00:00", "x" * 41, "-1"]):
        with pytest.raises(ApiException) as refused:
            k8s.create("offsetresets", f"refused-{i}", {**base, "timestamp": text}, "OffsetReset")
        assert refused.value.status == 422, text
        assert "spec.timestamp" in str(refused.value.body), text
    k8s.create("offsetresets", "far-future", {**base, "timestamp": "999999999999999"}, "OffsetReset")
    status = wait_for(
        lambda: (s := k8s.get("offsetresets", "far-future").get("status") or {}).get("phase") == "Failed" and s,
        60,
        "far-future reset refused",
    )
    (succeeded,) = [c for c in status["conditions"] if c["type"] == "Succeeded"]
    assert succeeded["reason"] == "InvalidSpec"
    assert "out of range" in succeeded["message"]
    assert "253402300799999" in succeeded["message"]
    assert not status.get("steps") or all(s["state"] == "Pending" for s in status["steps"])
    wait_for(
        lambda: any(e.type == "Warning" and "out of range" in e.message for e in k8s.events("far-future")),
        30,
        "a Warning Event",
    )


def test_kafka_settings_from_secrets_reach_the_kafka_client(
    k8s: K8s, connect: ConnectWorker, tmp_path: Path, caplog: Any
) -> None:
    """Issue 13, finding 8: ``spec.kafka.configFrom`` used to be read by nothing. A missing Secret
    is now a clear ReferenceNotFound; a Secret's value is the setting the tombstone reset's Kafka
    client uses (a protocol librdkafka refuses makes the reset fail before any change, without
    showing the value; the right one makes it succeed), and the value appears nowhere."""
    import uuid

    from tests.e2e.conftest import wait_for
    from tests.e2e.test_offset_reset_e2e import assert_tombstoned_after, offsets

    spec = connect_cluster_spec(connect)
    spec["kafka"]["configFrom"] = {"security.protocol": {"name": "kafka-creds", "key": "protocol"}}
    k8s.create("connectclusters", "kc", spec, "ConnectCluster")
    missing = k8s.wait_condition("connectclusters", "kc", "Ready", "False", reason="ReferenceNotFound")
    assert "kafka-creds" in missing["message"]
    bogus = f"bogus-{uuid.uuid4().hex[:8]}"
    k8s.create_secret("kafka-creds", {"protocol": bogus})
    k8s.wait_condition("connectclusters", "kc", "Ready", "True", timeout=90)
    name, topic = make_source(k8s, tmp_path, "kc", connect)
    rest = ConnectREST(connect)
    before = offsets(rest, name)
    status = reset(
        k8s, "tomb-bogus", {"connectorRef": {"name": name}, "action": "reset", "strategy": "tombstone"}, "Failed"
    )
    assert "security.protocol" in str(status["conditions"])
    assert not status.get("changes"), status.get("changes")
    assert offsets(rest, name) == before
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "the connector running again")
    for said in [str(status), *(f"{e.message}" for e in k8s.events("tomb-bogus")), caplog.text]:
        assert bogus not in said
    k8s.core.patch_namespaced_secret("kafka-creds", k8s.ns, {"stringData": {"protocol": "plaintext"}})
    k8s.delete("offsetresets", "tomb-bogus")
    wait_for(lambda: not k8s.exists("offsetresets", "tomb-bogus"), 30, "the failed reset deleted")
    kafka = KafkaOffsets(connect.bootstrap)
    latest = {r.key: r for r in kafka.read_connector_offsets(connect.offset_topic, {name})}
    assert latest
    status = reset(k8s, "tomb-ok", {"connectorRef": {"name": name}, "action": "reset", "strategy": "tombstone"})
    assert status["strategy"] == "tombstone"
    assert_tombstoned_after(connect.bootstrap, connect.offset_topic, list(latest.values()))
    # and nothing committed between the tombstone and the resume: the source reads its file again
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES), 60, "re-read")
