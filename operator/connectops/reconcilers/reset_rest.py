"""The REST strategy (KIP-875, Connect 3.6+): one call per connector, never DELETE-then-PATCH.

``reset`` is ``DELETE /offsets`` (every partition of the connector); ``alter`` and the set-to
actions are one ``PATCH`` naming exactly the partitions asked for, so every other partition keeps
its offset; ``restore`` is one ``PATCH`` with the saved offsets and ``null`` for partitions the
backup did not have, so there is never a moment where the connector has no offsets at all. A
backup that holds no offsets is restored by ``DELETE /offsets`` (Connect refuses a PATCH without
offsets), or by no call when the connector holds none either.
"""

from __future__ import annotations

from typing import Any

from connectops.models.offset_reset import ResetAction
from connectops.planning.offset_reset import expected_after, restore_call
from connectops.reconcilers.reset_changes import OffsetChanges
from connectops.reconcilers.reset_run import Run, bound


async def reset(
    changes: OffsetChanges, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
) -> None:
    client = run.cluster.client
    # a whole reset is expected to leave nothing, whatever was there: no read needed first; the
    # others keep every partition not named as the backup step read it (after the stop)
    before: list[dict[str, Any]] = []
    if action is not ResetAction.RESET:
        read = run.offsets_read.get(connector)
        before = read if read is not None else await client.get_offsets(connector)
    if action is ResetAction.RESET:
        await changes.change(run, connector, "DELETE offsets", 0, bound(client.delete_offsets, connector))
    else:
        await changes.change(
            run, connector, "PATCH offsets", len(entries), bound(client.patch_offsets, connector, entries)
        )
    await changes.confirm(run, connector, expected_after(action, entries, before))


async def restore(changes: OffsetChanges, run: Run, connector: str, saved: dict[str, Any]) -> None:
    client = run.cluster.client
    call, patch = restore_call(saved["offsets"], await client.get_offsets(connector))
    if call == "delete":
        await changes.change(run, connector, "DELETE offsets", 0, bound(client.delete_offsets, connector))
    elif call == "patch" and patch:
        await changes.change(run, connector, "PATCH offsets", len(patch), bound(client.patch_offsets, connector, patch))
