"""Who holds a lock on behalf of an OffsetReset: the Lease holder identity the reset writes, and
its parse, read by the reset's lock and by the Connector reconciler (which names the reset that
holds its connector)."""

from __future__ import annotations

from connectops.models import GROUP


def lock_holder(namespace: str, name: str, uid: str) -> str:
    """The Lease holder identity of one OffsetReset (the uid: a re-created namesake is another holder)."""
    return f"{GROUP}/offsetreset/{namespace}/{name}/{uid}"


def parse_holder(holder: str) -> tuple[str, str, str] | None:
    """(namespace, name, uid) of an OffsetReset's holder identity; None for anything else."""
    prefix = f"{GROUP}/offsetreset/"
    if not holder.startswith(prefix):
        return None
    parts = holder[len(prefix) :].split("/")
    if len(parts) != 3 or not all(parts):
        return None
    namespace, name, uid = parts
    return namespace, name, uid
