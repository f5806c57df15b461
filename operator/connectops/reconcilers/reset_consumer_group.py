"""Sinks on the tombstone strategy (workers older than 3.6): the admin API on the sink's own
consumer group (``connect-<name>`` unless overridden), which Kafka only accepts while the group
has no members, i.e. after the connector is stopped.

``reset`` deletes the group; ``alter`` and the set-to actions commit only the named partitions
(the group's other offsets stay); ``restore`` commits the saved offsets, clearing the group first
only when it holds partitions the backup did not (the admin API has no per-partition delete); a
backup with no offsets is restored by that clearing alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from connectops.models.offset_reset import ResetAction
from connectops.planning.offset_reset import expected_after
from connectops.reconcilers.reset_changes import OffsetChanges
from connectops.reconcilers.reset_run import Run, bound


async def reset(
    changes: OffsetChanges, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
) -> None:
    kafka = run.kafka
    assert kafka is not None
    group = run.group(connector)
    before = await changes.broker_offsets(run, connector) or []
    if action is ResetAction.RESET:
        await changes.change(run, connector, "delete group", 0, bound(asyncio.to_thread, kafka.delete_group, group))
    else:
        wanted = {
            (e["partition"]["kafka_topic"], int(e["partition"]["kafka_partition"])): int(e["offset"]["kafka_offset"])
            for e in entries
        }
        await changes.change(
            run,
            connector,
            "commit group offsets",
            len(wanted),
            bound(asyncio.to_thread, kafka.alter_group_offsets, group, wanted),
        )
    await changes.confirm(run, connector, expected_after(action, entries, before))


async def restore(changes: OffsetChanges, run: Run, connector: str, saved: dict[str, Any]) -> None:
    """Only the connector's own group is written, whatever group the backup names."""
    kafka = run.kafka
    assert kafka is not None
    group = run.group(connector)
    wanted = {(str(t), int(p)): int(o) for t, p, o in saved.get("groupOffsets", [])}
    extra = set(await asyncio.to_thread(kafka.group_offsets, group)) - set(wanted)
    if extra:
        # a failure between the two calls keeps the connector stopped (see reset_changes)
        await changes.change(run, connector, "delete group", 0, bound(asyncio.to_thread, kafka.delete_group, group))
    if not wanted:
        # a backup of a group with no offsets: deleting what it holds now is the whole restore
        return
    await changes.change(
        run,
        connector,
        "commit group offsets",
        len(wanted),
        bound(asyncio.to_thread, kafka.alter_group_offsets, group, wanted),
    )
