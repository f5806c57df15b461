"""Offsets backups: their format and where they are kept.

A backup is a ConfigMap ``connectops-backup-<reset>-<hash>`` in the reset's namespace, not owned
by the reset (deleting the reset keeps it). It holds the KIP-875 offsets of every connector, plus
on the tombstone path the raw offsets-topic records (key and value bytes, base64) or the sink's
group offsets; above 700 KiB it is gzipped into binaryData. Backups are created, never replaced:
the first copy is the one taken before anything changed. Reading one back treats it as user
input (anyone who may write ConfigMaps in the namespace could have written it): inflation is
capped, and a restore takes only what belongs to the target connector.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import zlib
from typing import Any

from connectops.adapters.kafka import OffsetRecord, parse_offset_key
from connectops.adapters.kube import KubeClient, KubeError
from connectops.models import GROUP
from connectops.models.base import utcnow_iso
from connectops.models.offset_reset import BackupStatus
from connectops.planning.offset_reset import PlanError
from connectops.reconcilers.reset_changes import OffsetChanges
from connectops.reconcilers.reset_run import Run, StepFailed, backup_name

#: a ConfigMap holds at most 1 MiB; larger backups are gzipped into binaryData
INLINE_LIMIT = 700 * 1024
#: the most a backup may inflate to (a 1 MiB ConfigMap of offsets JSON compresses ~10-20x)
INFLATED_LIMIT = 64 << 20


def record_json(record: OffsetRecord) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "key": base64.b64encode(record.key).decode(),
        "value": base64.b64encode(record.value).decode() if record.value is not None else None,
    }


def record_from_json(item: dict[str, Any]) -> OffsetRecord:
    return OffsetRecord(
        topic=item["topic"],
        partition=int(item["partition"]),
        offset=-1,
        key=base64.b64decode(item["key"]),
        value=base64.b64decode(item["value"]) if item.get("value") is not None else None,
        connector=None,
        partition_map=None,
    )


def key_connector(key: bytes) -> str | None:
    """The connector name an offsets-topic key belongs to (None: not Connect's key shape)."""
    parsed = parse_offset_key(key)
    return parsed[0] if parsed else None


class BackupStore:
    def __init__(self, kube: KubeClient, changes: OffsetChanges) -> None:
        self._kube = kube
        self._changes = changes

    async def take(self, run: Run) -> str:
        """Save the current offsets where a user can restore them."""
        client = run.cluster.client
        connectors: dict[str, Any] = {}
        total = 0
        for connector in run.connectors:
            kind = run.kind(connector)
            read = run.offsets_read.get(connector)
            entry: dict[str, Any] = {
                "kind": kind,
                "offsets": read if read is not None else await client.get_offsets(connector),
            }
            total += len(entry["offsets"])
            if run.plan.strategy == "tombstone" and run.kafka is not None:
                if kind == "sink":
                    entry["group"] = run.group(connector)
                    offsets = await asyncio.to_thread(run.kafka.group_offsets, run.group(connector))
                    entry["groupOffsets"] = [[t, p, o] for (t, p), o in sorted(offsets.items())]
                else:
                    records = await self._changes.read_records(run, connector)
                    entry["records"] = [record_json(r) for r in records if r.value is not None]
            connectors[connector] = entry
        name = backup_name(run.namespace, run.name, run.uid)
        document = json.dumps(
            {
                "version": 1,
                "cluster": run.cluster.name,
                "offsetReset": f"{run.namespace}/{run.name}",
                "takenAt": utcnow_iso(),
                "connectors": connectors,
            },
            sort_keys=True,
        )
        data: dict[str, str] | None = {"backup.json": document}
        binary: dict[str, str] | None = None
        if len(document) > INLINE_LIMIT:
            data = None
            binary = {"backup.json.gz": base64.b64encode(gzip.compress(document.encode())).decode()}
        created = await self._kube.create_config_map(
            run.namespace,
            name,
            data=data,
            binary_data=binary,
            labels={f"{GROUP}/backup": "offsets", f"{GROUP}/cluster": run.cluster.name},
            annotations={
                f"{GROUP}/offset-reset": run.name,
                f"{GROUP}/offset-reset-uid": run.uid,
                f"{GROUP}/connectors": ",".join(run.connectors),
            },
        )
        if not created:
            # Never overwritten: the first copy is the one taken before anything changed (a
            # retried step or a second operator process would otherwise replace it with later
            # offsets). It must be this reset's own, though.
            existing = await self._kube.config_map(run.namespace, name)
            annotations = (existing.metadata.annotations if existing.metadata else None) or {}
            if annotations.get(f"{GROUP}/offset-reset-uid") != run.uid:
                raise StepFailed(f"ConfigMap {name} exists and is not this reset's backup; nothing was changed")
            run.status.backup = run.status.backup or BackupStatus(config_map=name, offsets=total)
            return f"kept the backup already taken by this reset in ConfigMap {name}"
        run.status.backup = BackupStatus(config_map=name, offsets=total, taken_at=utcnow_iso())
        return f"saved {total} partition offset(s) to ConfigMap {name}"

    async def read(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            cm = await self._kube.config_map(namespace, name)
        except KubeError as exc:
            raise StepFailed(f"backup ConfigMap {name}: {exc}") from None
        try:
            if cm.data and "backup.json" in cm.data:
                doc = json.loads(cm.data["backup.json"])
            elif cm.binary_data and "backup.json.gz" in cm.binary_data:
                # a user may write this ConfigMap: inflate with a cap (a gzip bomb would not stop)
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                text = inflate.decompress(base64.b64decode(cm.binary_data["backup.json.gz"]), INFLATED_LIMIT)
                if inflate.unconsumed_tail:
                    raise StepFailed(f"ConfigMap {name}: the backup is larger than {INFLATED_LIMIT >> 20} MiB inflated")
                doc = json.loads(text)
            else:
                raise StepFailed(f"ConfigMap {name} is not a connectops offsets backup")
        except (ValueError, zlib.error):
            raise StepFailed(f"ConfigMap {name} is not a readable connectops offsets backup") from None
        if not isinstance(doc, dict):
            raise StepFailed(f"ConfigMap {name} is not a connectops offsets backup")
        return doc

    def check(self, run: Run, doc: dict[str, Any]) -> None:
        """Restore only what belongs to the target connectors: source records must carry the
        connector's own key, for its own offsets topics; a sink's group offsets are always
        written to the sink's own group, whatever group the file names."""
        source = run.spec.restore_from
        saved_all = doc.get("connectors")
        if not isinstance(saved_all, dict):
            raise PlanError(f"ConfigMap {source} is not a connectops offsets backup (no connectors)")
        for connector in run.connectors:
            saved = saved_all.get(connector)
            if not isinstance(saved, dict) or not isinstance(saved.get("offsets"), list):
                raise PlanError(f"backup {source} holds no offsets for {connector}")
            if run.plan.strategy != "tombstone" or run.kind(connector) == "sink":
                continue
            topics = set(self._changes.offsets_topics(run, connector))
            try:
                records = [record_from_json(r) for r in saved.get("records", [])]
            except (KeyError, TypeError, ValueError):
                raise PlanError(f"backup {source}: unreadable records for {connector}") from None
            foreign = [r for r in records if r.topic not in topics or key_connector(r.key) != connector]
            if foreign:
                raise PlanError(
                    f"backup {source} holds {len(foreign)} record(s) under {connector} that are not its own "
                    "offsets (another connector's key, or a topic that is not its offsets topic); nothing was restored"
                )
