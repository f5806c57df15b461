"""Backups an attacker (or an unlucky name) cannot turn against another connector's offsets."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes

from connectops.adapters.kafka_offsets import KafkaOffsets
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
