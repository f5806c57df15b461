"""The REST strategy (KIP-875, Connect 3.6+): one call per connector, never DELETE-then-PATCH.

``reset`` is ``DELETE /offsets`` (every partition of the connector); ``alter`` and the set-to
actions are one ``PATCH`` naming exactly the partitions asked for, so every other partition keeps
its offset; ``restore`` is one ``PATCH`` with the saved offsets and ``null`` for partitions the
backup did not have, so there is never a moment where the connector has no offsets at all.
"""

from __future__ import annotations

from typing import Any

from connectops.models.offset_reset import ResetAction
from connectops.planning.offset_reset import expected_after, restore_entries
from connectops.reconcilers.reset_changes import OffsetChanges
from connectops.reconcilers.reset_run import Run, bound


async def reset(
    changes: OffsetChanges, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
) -> None:
    client = run.cluster.client
    # a whole reset is expected to leave nothing, whatever was there: no read needed first
    before = [] if action is ResetAction.RESET else await client.get_offsets(connector)
    if action is ResetAction.RESET:
        await changes.change(run, connector, "DELETE offsets", 0, bound(client.delete_offsets, connector))
    else:
        await changes.change(
            run, connector, "PATCH offsets", len(entries), bound(client.patch_offsets, connector, entries)
        )
    await changes.confirm(run, connector, expected_after(action, entries, before))


async def restore(changes: OffsetChanges, run: Run, connector: str, saved: dict[str, Any]) -> None:
    client = run.cluster.client
    entries = [e for e in saved["offsets"] if e.get("offset") is not None]
    patch = restore_entries(entries, await client.get_offsets(connector))
    if patch:
        await changes.change(run, connector, "PATCH offsets", len(patch), bound(client.patch_offsets, connector, patch))
