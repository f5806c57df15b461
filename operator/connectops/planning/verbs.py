"""One-shot verbs a user (or a GitOps tool) asks for through annotations.

Strimzi and CFK take one-shot annotations and remove them when done; Argo CD and Flux then see
the removal as drift and put the annotation back, and the verb runs again. Here the operator
never writes or removes these annotations: the value carries a token, the status records the
last value acted on, and a value acts exactly once, when it differs from the recorded one.

- ``connectops.io/restart: "<token>"``: restart the connector and all its tasks;
- ``connectops.io/restart-tasks: "<ids>:<token>"``: ``<ids>`` is ``failed`` (the connector and
  its failed tasks, Connect's ``onlyFailed=true&includeTasks=true``) or task ids such as ``0,2``;
- ``connectops.io/reconcile: paused``: leave the connector alone (no call that changes it)
  until the annotation goes; status keeps being reported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from connectops.models import GROUP
from connectops.models.connector import VerbTokens

RESTART = f"{GROUP}/restart"
RESTART_TASKS = f"{GROUP}/restart-tasks"
RECONCILE = f"{GROUP}/reconcile"

_TOKEN = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.:]{0,252}$")
_IDS = re.compile(r"^(failed|[0-9]{1,4}(,[0-9]{1,4}){0,99})$")


@dataclass(frozen=True)
class Restart:
    """Restart the connector; ``only_failed``: the connector if failed and its failed tasks."""

    annotation: str
    value: str
    only_failed: bool = False


@dataclass(frozen=True)
class RestartTasks:
    annotation: str
    value: str
    task_ids: tuple[int, ...]


@dataclass(frozen=True)
class BadVerb:
    """A value that cannot act; reported once (it is recorded as handled like any other)."""

    annotation: str
    value: str
    why: str


Verb = Restart | RestartTasks | BadVerb


def asked(annotations: Mapping[str, str]) -> tuple[str | None, str | None, bool] | None:
    """What the verb annotations ask, as one value: when it changes, the object is looked at
    at once rather than at its next resync (None: no verb annotation at all)."""
    asks = (annotations.get(RESTART), annotations.get(RESTART_TASKS), reconcile_paused(annotations))
    return None if asks == (None, None, False) else asks


def reconcile_paused(annotations: Mapping[str, str]) -> bool:
    return annotations.get(RECONCILE, "").strip().lower() == "paused"


def pending_verbs(annotations: Mapping[str, str], acted: VerbTokens) -> list[Verb]:
    """The verbs whose annotation value differs from the last one acted on, in a fixed order."""
    verbs: list[Verb] = []
    restart = annotations.get(RESTART)
    if restart is not None and restart != acted.restart:
        if _TOKEN.match(restart):
            verbs.append(Restart(RESTART, restart))
        else:
            verbs.append(BadVerb(RESTART, restart, "the value must be a token (letters, digits, -_.:)"))
    tasks = annotations.get(RESTART_TASKS)
    if tasks is not None and tasks != acted.restart_tasks:
        ids, _, token = tasks.partition(":")
        if not _IDS.match(ids) or not _TOKEN.match(token):
            verbs.append(BadVerb(RESTART_TASKS, tasks, 'the value must be "<failed|ids>:<token>", e.g. "0,2:t1"'))
        elif ids == "failed":
            verbs.append(Restart(RESTART_TASKS, tasks, only_failed=True))
        else:
            verbs.append(RestartTasks(RESTART_TASKS, tasks, tuple(sorted({int(i) for i in ids.split(",")}))))
    return verbs


def acted_on(acted: VerbTokens, verb: Verb) -> VerbTokens:
    """The tokens once ``verb`` has been handled (done, or reported as bad)."""
    if verb.annotation == RESTART:
        return acted.model_copy(update={"restart": verb.value})
    return acted.model_copy(update={"restart_tasks": verb.value})
