"""What the operator remembers of one Connector between its passes, in one place.

Each field is something a pass cannot read back from the object yet: the body a handler gets
can predate the status patch of the handler before it (kopf patches after a handler returns,
outside the object's lock), and some runs are counted in time, not in the status. All of it is
lost with the process, which each field says the cost of; it is forgotten once, when the
Connector is deleted, so a thousand deleted Connectors leave nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from connectops.models.checks import LastCheck
from connectops.models.connector import AutoRestartStatus, VerbTokens


@dataclass
class ConnectorMemo:
    #: the annotation tokens this process acted on last (a new process reads the status's)
    acted: VerbTokens | None = None
    #: the restart bookkeeping this process wrote last (a new process reads the status's)
    book: AutoRestartStatus | None = None
    #: the generation this process reconciled last (a new process reads observedGeneration)
    generation: int = 0
    #: when the current unbroken run of Ready observations began (a new process starts the run
    #: again, which only delays clearing a restart count)
    ready_since: float | None = None
    #: when the current unbroken run of failing observations began, what the first automatic
    #: restart counts from (a new process sees the failure anew and waits ``initialSeconds``
    #: again, which only delays that restart)
    failing_since: float | None = None
    #: the class whose absence was announced (an Event once per object and class)
    missing_plugin: str | None = None
    #: the version pins whose absence was announced (an Event once per object and set of pins)
    missing_version: str | None = None
    #: the latest check this process launched or read
    last_check: LastCheck | None = None


class Memos:
    """Every Connector's memo by uid."""

    def __init__(self) -> None:
        self._by_uid: dict[str, ConnectorMemo] = {}

    def of(self, uid: str) -> ConnectorMemo:
        memo = self._by_uid.get(uid)
        if memo is None:
            memo = self._by_uid[uid] = ConnectorMemo()
        return memo

    def forget(self, uid: str) -> None:
        self._by_uid.pop(uid, None)

    def __len__(self) -> int:
        return len(self._by_uid)
