"""A Connector's status stays storable whatever Connect answers.

Connect reports every task with its trace; a connector with thousands of failed tasks made a
status patch of megabytes, which the API server refuses ("larger than max"): kopf retried it for
ever and the object never showed a condition at all. So the tasks list is a sample (the failed
ones first: they are what a reader looks for), counted where it is cut, and a patch that is
still over the bound (connectops.models.bounds.STATUS_MAX_BYTES) sheds its largest fields, so
that what remains, the conditions above all, is stored and says what was left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

#: never shed: what says what happened, and what a shed patch is measured against
KEPT = frozenset({"conditions", "observedGeneration"})


class _Task(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def state(self) -> str: ...


T = TypeVar("T", bound=_Task)


def shown_tasks(tasks: Sequence[T], limit: int) -> list[T]:
    """Every task up to ``limit``; past it the failed ones first, then the others, by id."""
    if len(tasks) <= limit:
        return list(tasks)
    return sorted(tasks, key=lambda t: (t.state != "FAILED", t.id))[:limit]


def size_of(patch: Mapping[str, Any]) -> int:
    """The patch's size as the API server receives it (compact JSON)."""
    return len(json.dumps(patch, separators=(",", ":"), ensure_ascii=False).encode())


def shed(patch: Mapping[str, Any], limit: int) -> tuple[dict[str, Any], list[str]]:
    """``patch`` under ``limit`` bytes: its largest fields (never those in :data:`KEPT`) set to
    null, largest first, until it fits; and the names of those shed (none: it fitted)."""
    out = dict(patch)
    dropped: list[str] = []
    by_size = sorted((k for k in out if k not in KEPT), key=lambda k: size_of({k: out[k]}), reverse=True)
    for key in by_size:
        if size_of(out) <= limit:
            break
        out[key] = None  # null: a merge patch removes it, so no stale large value stays stored
        dropped.append(key)
    return out, dropped
