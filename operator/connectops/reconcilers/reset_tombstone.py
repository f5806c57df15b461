"""Sources on the tombstone strategy (workers older than 3.6): records in Connect's offsets topics.

Every record reuses the exact key bytes read from the topic and goes to the exact partition that
key was read from (Connect keys its offsets by the raw bytes, and the Java producer places them
with murmur2, which librdkafka's default partitioner does not reproduce). ``reset`` writes a
tombstone for every live key and reads back until each key's latest value is null; ``alter``
rewrites the values of existing keys (a partition with no record cannot be created safely);
``restore`` writes the saved records back, plus tombstones for keys that exist now and did not
then.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from connectops.models.offset_reset import ResetAction
from connectops.planning.offset_reset import expected_after
from connectops.reconcilers.reset_backup import key_connector, record_from_json
from connectops.reconcilers.reset_changes import OffsetChanges
from connectops.reconcilers.reset_run import Run, StepFailed, bound


async def reset(
    changes: OffsetChanges, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
) -> None:
    kafka = run.kafka
    assert kafka is not None
    before = await changes.broker_offsets(run, connector) or []
    records = await changes.read_records(run, connector)
    if action is ResetAction.RESET:
        live = [r for r in records if r.value is not None]
        await changes.change(
            run, connector, "tombstones", len(live), bound(asyncio.to_thread, kafka.write_tombstones, live)
        )
        for topic in changes.offsets_topics(run, connector):
            await asyncio.to_thread(kafka.verify_tombstones, topic, [r for r in live if r.topic == topic])
        await changes.confirm(run, connector, [])
        return
    by_partition = {json.dumps(r.partition_map, sort_keys=True): r for r in records}
    rewritten = []
    for entry in entries:
        rec = by_partition.get(json.dumps(entry["partition"], sort_keys=True))
        if rec is None:
            raise StepFailed(
                f"{connector}: partition {entry['partition']} has no record in the offsets topic; "
                "strategy tombstone can only alter existing partitions (Connect's key bytes "
                "cannot be reproduced safely); use strategy rest"
            )
        value = None if entry["offset"] is None else json.dumps(entry["offset"], separators=(",", ":")).encode()
        rewritten.append(rec.rewritten(value))
    await changes.change(
        run, connector, "offsets records", len(rewritten), bound(asyncio.to_thread, kafka.restore_records, rewritten)
    )
    await changes.confirm(run, connector, expected_after(action, entries, before))


async def restore(changes: OffsetChanges, run: Run, connector: str, saved: dict[str, Any]) -> None:
    """Only records keyed by this connector, into its own offsets topics (checked again here,
    after the inspect step's check, because this is where they are written)."""
    kafka = run.kafka
    assert kafka is not None
    topics = set(changes.offsets_topics(run, connector))
    records = [record_from_json(r) for r in saved.get("records", [])]
    foreign = [r for r in records if r.topic not in topics or key_connector(r.key) != connector]
    if foreign:
        raise StepFailed(
            f"backup {run.spec.restore_from} holds {len(foreign)} record(s) for {connector} that are not "
            "its own offsets (another connector's key, or another topic); nothing was restored"
        )
    keys = {r.key for r in records}
    stale = [r for r in await changes.read_records(run, connector) if r.value is not None and r.key not in keys]
    if records:
        await changes.change(
            run, connector, "offsets records", len(records), bound(asyncio.to_thread, kafka.restore_records, records)
        )
    if stale:
        await changes.change(
            run, connector, "tombstones", len(stale), bound(asyncio.to_thread, kafka.write_tombstones, stale)
        )
