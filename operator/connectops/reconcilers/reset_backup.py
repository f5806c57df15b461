"""Offsets backups: their format and where they are kept.

A backup is a ConfigMap ``connectops-backup-<reset>-<hash>`` in the reset's namespace, not owned
by the reset (deleting the reset keeps it). It holds the KIP-875 offsets of every connector, plus
on the tombstone path the raw offsets-topic records (key and value bytes, base64) or the sink's
group offsets; above 700 KiB it is gzipped into binaryData, and above what one ConfigMap holds
the gzipped document is kept in pieces (:mod:`reconcilers.reset_chunks`). It is read after the connector is
STOPPED with no tasks (the step runs after the stop): its tasks commit their position as they
stop, and a read before that can trail it by up to the flush interval (60 s by default).

Backups are created, never replaced: the first copy is the one taken before anything changed.
One exception in name only: a reset started by an operator version that backed up before the
stop has a backup that may trail; if no offsets call has been made yet, a second backup is
taken after the stop under its own name (``...-stopped``), and the first one is kept.

Reading one back treats it as user input (anyone who may write ConfigMaps in the namespace could
have written it): inflation is capped, and a restore takes only what belongs to the target
connector.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import zlib
from typing import Any

from connectops.adapters.kafka import OffsetRecord, parse_offset_key
from connectops.adapters.kube import KubeClient, KubeError, KubeForbidden, KubeObjectMissing, KubeUnavailable
from connectops.concurrency.gather import each
from connectops.models import GROUP
from connectops.models.base import utcnow_iso
from connectops.models.offset_reset import BackupStatus, ResetStrategy
from connectops.planning.offset_reset import ConnectorKind, PlanError
from connectops.reconcilers import reset_chunks
from connectops.reconcilers.reset_changes import OffsetChanges
from connectops.reconcilers.reset_run import Run, StepFailed, backup_name

#: a ConfigMap holds at most 1 MiB; larger backups are gzipped into binaryData
INLINE_LIMIT = 700 * 1024
#: the most a backup may inflate to (a 1 MiB ConfigMap of offsets JSON compresses ~10-20x)
INFLATED_LIMIT = 64 << 20
#: how much larger than its offsets a tombstone-path backup is compressed, at most: the raw
#: records (base64 keys and values) compress less than the JSON (2.3 times the offsets alone for
#: 20,000 FileStreamSource-shaped partitions, with short or hash-long names: 4 leaves a margin)
RECORDS_FACTOR = 4


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


#: on the ConfigMap of a backup read after the stop (earlier versions' backups lack it)
READ_AFTER_STOP = f"{GROUP}/read-after-stop"


def stopped_backup_name(namespace: str, name: str, uid: str) -> str:
    """The name of the backup a reset takes after the stop when an earlier operator version had
    already backed it up before the stop (see the module docstring)."""
    return f"{backup_name(namespace, name, uid)}-stopped"


class BackupStore:
    def __init__(self, kube: KubeClient, changes: OffsetChanges) -> None:
        self._kube = kube
        self._changes = changes

    async def take(self, run: Run) -> str:
        """Save the offsets of the stopped connectors where a user can restore them; the same
        read is what the plan shows as current (``run.offsets_read``)."""
        connectors: dict[str, Any] = {}
        total = 0
        # one read per connector, all at once: the connectors are stopped while this runs; each
        # read is Connect's once it lists every partition its offsets topic holds
        read = await each(self._changes.settled_offsets(run, c) for c in run.connectors)
        run.offsets_read = {c: answer for c, (answer, _) in zip(run.connectors, read, strict=True)}
        records_read = {c: records for c, (_, records) in zip(run.connectors, read, strict=True)}
        for connector in run.connectors:
            kind = run.kind(connector)
            entry: dict[str, Any] = {"kind": kind, "offsets": run.offsets_read[connector]}
            total += len(entry["offsets"])
            if run.plan.strategy == ResetStrategy.TOMBSTONE and run.kafka is not None:
                if kind == ConnectorKind.SINK:
                    entry["group"] = run.group(connector)
                    offsets = await asyncio.to_thread(run.kafka.group_offsets, run.group(connector))
                    entry["groupOffsets"] = [[t, p, o] for (t, p), o in sorted(offsets.items())]
                else:
                    records = records_read[connector]
                    assert records is not None  # a source's settled read, with Kafka access, read them
                    entry["records"] = [record_json(r) for r in records if r.value is not None]
            connectors[connector] = entry
        document = json.dumps(
            {
                "version": 1,
                "cluster": run.cluster.name,
                "offsetReset": f"{run.namespace}/{run.name}",
                "takenAt": utcnow_iso(),
                "readAfterStop": True,
                "connectors": connectors,
            },
            sort_keys=True,
        )
        name = backup_name(run.namespace, run.name, run.uid)
        earlier = run.status.backup if run.status.backup and not run.status.backup.read_after_stop else None
        if earlier is None:
            kept = await self._create(run, name, document)
            if kept is None:
                run.status.backup = BackupStatus(
                    config_map=name, offsets=total, taken_at=utcnow_iso(), read_after_stop=True
                )
                return f"saved {total} partition offset(s), read after the stop, to ConfigMap {name}"
            if kept:
                await self._kept(run, name)
                run.status.backup = run.status.backup or BackupStatus(
                    config_map=name, offsets=total, read_after_stop=True
                )
                return f"kept the backup already taken by this reset in ConfigMap {name}"
        # An earlier operator version backed this reset up before the stop (its status says so,
        # or its ConfigMap has no read-after-stop mark): that copy may trail the position the
        # stop committed. Nothing has changed yet, so the offsets read now are still "before":
        # they go to a second ConfigMap, and the first is kept as it is.
        again = stopped_backup_name(run.namespace, run.name, run.uid)
        first = earlier.config_map if earlier is not None else name
        created = await self._create(run, again, document) is None
        if not created:
            await self._kept(run, again)
        run.status.backup = BackupStatus(
            config_map=again,
            offsets=total,
            taken_at=utcnow_iso(),
            read_after_stop=True,
            earlier_config_map=first,
        )
        said = "saved" if created else "kept the backup already taken by this reset with"
        return (
            f"{said} {total} partition offset(s), read after the stop, in ConfigMap {again} (ConfigMap {first}, "
            "taken before the stop by an earlier operator version, is kept and may trail the connector's position)"
        )

    async def _kept(self, run: Run, name: str) -> None:
        """A backup this reset took earlier is the one kept: what "before" means from here on
        (the plan's current offsets, the read-back after a failure) is what it holds."""
        saved = (await self.read(run.namespace, name)).get("connectors")
        for connector in run.connectors:
            entry = saved.get(connector) if isinstance(saved, dict) else None
            if isinstance(entry, dict) and isinstance(entry.get("offsets"), list):
                run.offsets_read[connector] = entry["offsets"]

    def check_storable(self, run: Run, offsets: dict[str, list[dict[str, Any]]]) -> None:
        """Before the stop, from the offsets the connectors have now (the stop adds at most
        their last commit): a backup that could not be stored is refused here, when nothing is
        stopped yet. On the tombstone path the backup also holds the raw offsets-topic
        records, which compress less: counted as :data:`RECORDS_FACTOR` times the offsets."""
        document = json.dumps({"connectors": offsets}, sort_keys=True).encode()
        estimate = len(reset_chunks.compress(document))
        if run.plan.strategy == ResetStrategy.TOMBSTONE:
            estimate *= RECORDS_FACTOR
        needed = reset_chunks.pieces_needed(estimate)
        if needed > reset_chunks.MAX_CHUNKS:
            total = sum(len(v) for v in offsets.values())
            raise PlanError(
                f"the backup of {total} partition offsets would take about {estimate >> 10} KiB compressed, "
                f"{needed} ConfigMaps, more than the {reset_chunks.MAX_CHUNKS} a backup may take; nothing was changed"
            )

    async def check_writable(self, run: Run) -> None:
        """Before the stop: a backup that could not be written would fail the backup step with
        the connector stopped. A dry-run create asks the API server now (the operator's RBAC,
        admission, the name): refused, or the name taken by a ConfigMap that is not this reset's,
        the reset is refused before anything is stopped. The backup step checks again when it
        creates the ConfigMap."""
        name = backup_name(run.namespace, run.name, run.uid)
        try:
            free = await self._kube.create_config_map(
                run.namespace, name, data={}, labels=self._labels(run), annotations=self._annotations(run), dry_run=True
            )
        except KubeForbidden as exc:
            raise PlanError(f"the backup cannot be written: {exc}; nothing was changed") from None
        if free:
            return
        try:
            existing = await self._kube.config_map(run.namespace, name)
        except KubeObjectMissing:
            return
        except KubeUnavailable:
            return  # cannot be told now: the create at the backup step decides
        annotations = (existing.metadata.annotations if existing.metadata else None) or {}
        if annotations.get(f"{GROUP}/offset-reset-uid") != run.uid:
            raise PlanError(f"ConfigMap {name} exists and is not this reset's backup; nothing was changed")

    @staticmethod
    def _labels(run: Run) -> dict[str, str]:
        return {f"{GROUP}/backup": "offsets", f"{GROUP}/cluster": run.cluster.name}

    @staticmethod
    def _annotations(run: Run) -> dict[str, str]:
        return {
            f"{GROUP}/offset-reset": run.name,
            f"{GROUP}/offset-reset-uid": run.uid,
            f"{GROUP}/connectors": ",".join(run.connectors),
            READ_AFTER_STOP: "true",
        }

    async def _create(self, run: Run, name: str, document: str) -> bool | None:
        """Create the backup ConfigMap: None when created; True when this reset's own backup
        read after the stop is already there (kept: never overwritten); False when this reset's
        backup there was read before the stop (an earlier operator version's). A ConfigMap of
        that name that is not this reset's is refused."""
        data: dict[str, str] | None = {"backup.json": document}
        binary: dict[str, str] | None = None
        if len(document) > INLINE_LIMIT:
            data = None
            packed = gzip.compress(document.encode())
            binary = {"backup.json.gz": base64.b64encode(packed).decode()}
            if len(packed) > reset_chunks.CHUNK_BYTES:
                # more than one ConfigMap holds: in pieces (reconcilers.reset_chunks)
                return await self._create_chunked(run, name, document)
        created = await self._kube.create_config_map(
            run.namespace,
            name,
            data=data,
            binary_data=binary,
            labels=self._labels(run),
            annotations=self._annotations(run),
        )
        if created:
            return None
        # Never overwritten: the first copy is the one taken before anything changed (a retried
        # step or a second operator process would otherwise replace it with later offsets). It
        # must be this reset's own, though.
        existing = await self._kube.config_map(run.namespace, name)
        annotations = (existing.metadata.annotations if existing.metadata else None) or {}
        if annotations.get(f"{GROUP}/offset-reset-uid") != run.uid:
            raise StepFailed(f"ConfigMap {name} exists and is not this reset's backup; nothing was changed")
        return annotations.get(READ_AFTER_STOP) == "true"

    async def _create_chunked(self, run: Run, name: str, document: str) -> bool | None:
        try:
            written = await reset_chunks.write(
                self._kube,
                run.namespace,
                name,
                document.encode(),
                labels=self._labels(run),
                annotations=self._annotations(run),
                owner=None,  # a backup outlives its reset
            )
        except reset_chunks.TooLarge as exc:
            raise StepFailed(f"the backup cannot be stored: {exc}; nothing was changed") from None
        if written.created:
            return None
        existing = await self._kube.config_map(run.namespace, name)
        annotations = (existing.metadata.annotations if existing.metadata else None) or {}
        if annotations.get(f"{GROUP}/offset-reset-uid") != run.uid:
            raise StepFailed(f"ConfigMap {name} exists and is not this reset's backup; nothing was changed")
        return annotations.get(READ_AFTER_STOP) == "true"

    async def read(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            cm = await self._kube.config_map(namespace, name)
            if reset_chunks.is_chunked(cm):
                text = await reset_chunks.read(self._kube, namespace, name)
                doc = json.loads(text)
                if not isinstance(doc, dict):
                    raise StepFailed(f"ConfigMap {name} is not a connectops offsets backup")
                return doc
        except KubeError as exc:
            raise StepFailed(f"backup ConfigMap {name}: {exc}") from None
        except (reset_chunks.ChunksInvalid, ValueError) as exc:
            raise StepFailed(f"ConfigMap {name} is not a readable connectops offsets backup: {exc}") from None
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
            if run.plan.strategy != ResetStrategy.TOMBSTONE or run.kind(connector) == ConnectorKind.SINK:
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
