"""Pieces every reconciler shares: Events, status diffs, conditions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from connectops.models.base import Condition, get_condition, set_condition

A = TypeVar("A")

#: (type "Normal"|"Warning", reason, message) -> posts a Kubernetes Event on the object
EmitEvent = Callable[[str, str, str], None]


async def each_object(pages: AsyncIterator[list[A]]) -> AsyncIterator[A]:
    """The objects of a paged listing one at a time, so a scan keeps one page, not the list."""
    async for page in pages:
        for obj in page:
            yield obj


@dataclass
class Outcome:
    """What a reconcile decided: a status to publish and, maybe, an error to retry on."""

    status: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    #: when (wall-clock seconds) the object is to be reconciled again, sooner than its resync
    #: would: an automatic restart falling due (None: the resync is soon enough)
    look_at: float | None = None


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Only the top-level status fields whose value changed (Strimzi: write status only on
    change), so a resync that finds nothing new makes no API write at all."""
    return {k: v for k, v in new.items() if old.get(k) != v}


class Conditions:
    """Collects condition updates and emits an Event only when a condition really changes."""

    def __init__(
        self, current: Sequence[Condition | dict[str, Any]] | None, generation: int | None, emit: EmitEvent
    ) -> None:
        self._items = [c if isinstance(c, Condition) else Condition.model_validate(c) for c in current or []]
        self._generation = generation
        self._emit = emit

    def set(
        self,
        type_: str,
        status: bool | None,
        reason: str,
        message: str,
        *,
        event_on_change: bool = False,
        warning: bool = False,
    ) -> None:
        before = get_condition(self._items, type_)
        self._items = set_condition(self._items, type_, status, reason, message, self._generation)
        changed = before is None or (before.status, before.reason, before.message) != (
            "Unknown" if status is None else str(status),
            reason,
            message,
        )
        if changed and event_on_change:
            self._emit("Warning" if warning else "Normal", reason, message)

    def get(self, type_: str) -> Condition | None:
        return get_condition(self._items, type_)

    @property
    def items(self) -> list[Condition]:
        """The conditions as models, for a status model (its ``for_storage`` drops empty strings:
        some API servers, 1.20 built with Go >= 1.16, kubernetes#99804, reject "" in custom objects)."""
        return list(self._items)
