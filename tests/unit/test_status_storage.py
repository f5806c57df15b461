"""Status is loaded once into its model, changed through it and stored as one merge patch.

What the patch must do on the API server (``merge_patch`` of tests/doubles/kube.py: RFC 7386 as
the kube contract test shows the API server applies it): a field cleared in the model deletes
the stored value (an explicit null), a field nobody touched is absent (so another writer's field
is left as stored), and a KIP-875 entry that removes a partition, whose ``offset: null`` the
server drops inside a list, still reads back as a removal.
"""

from __future__ import annotations

from typing import Any

from connectops.models.connector import ConnectorStatus
from connectops.models.offset_reset import OffsetResetStatus, ResetPhase, ResetPlanStatus, StepState
from connectops.reconcilers.common import Conditions
from tests.doubles.kube import merge_patch

STORED: dict[str, Any] = {
    "kopf": {"progress": {"h1": {"retries": 2}}},
    "phase": "Running",
    "currentStep": "reset",
    "pendingResume": True,
    "steps": [{"name": "lock", "state": "Done", "attempts": 1}, {"name": "reset", "state": "Running", "attempts": 1}],
    "fromANewerVersion": {"x": 1},
    "plan": {
        "strategy": "rest",
        "steps": ["lock", "reset"],
        "connectors": [{"name": "c", "kind": "source", "state": "RUNNING", "resumeTo": "paused"}],
        "configs": {"c": {"kind": "source", "offsetsTopic": "own-offsets"}},
        "entries": {"c": [{"partition": {"filename": "/a"}, "offset": None}]},
    },
}


def test_cleared_fields_are_deleted_and_unknown_ones_kept() -> None:
    status = OffsetResetStatus.from_storage(STORED)
    status.set_step("reset", state=StepState.DONE, finished_at="2026-11-25T10:00:00Z")
    status.current_step = None
    status.pending_resume = None
    stored = merge_patch(STORED, status.for_storage())
    assert "currentStep" not in stored
    assert "pendingResume" not in stored
    assert stored["kopf"] == STORED["kopf"]
    assert stored["fromANewerVersion"] == {"x": 1}
    assert stored["steps"][1] == {
        "name": "reset",
        "state": "Done",
        "attempts": 1,
        "finishedAt": "2026-11-25T10:00:00Z",
    }
    # the API server drops the null member of an object inside a list (the kube contract test
    # pins it): the removal of a partition reads back without its offset, and the plan restores it
    assert stored["plan"]["entries"] == {"c": [{"partition": {"filename": "/a"}}]}
    reloaded = OffsetResetStatus.from_storage(stored).plan
    assert reloaded is not None
    assert reloaded.entries_for("c") == [{"partition": {"filename": "/a"}, "offset": None}]


def test_partial_store_touches_only_the_fields_named() -> None:
    status = OffsetResetStatus.from_storage(STORED)
    status.phase = ResetPhase.FAILED
    status.current_step = None
    patch = status.for_storage("phase")
    assert patch == {"phase": "Failed"}
    assert merge_patch(STORED, patch)["currentStep"] == "reset"


def test_the_plan_reads_what_the_steps_need() -> None:
    plan = ResetPlanStatus.model_validate(STORED["plan"])
    assert plan.resume_to("c") == "paused"
    assert plan.resume_to("not-in-plan") == "running"
    assert plan.config("c").offsets_topic == "own-offsets"
    assert plan.entries_for("c") == [{"partition": {"filename": "/a"}, "offset": None}]


def test_a_fresh_status_publishes_only_what_was_decided() -> None:
    status = ConnectorStatus(observed_generation=3)
    status.connector_state = None  # decided: Connect has no such connector
    status.conditions = Conditions(None, 3, lambda *_: None).items
    patch = status.patch()
    assert patch == {"observedGeneration": 3, "connectorState": None, "conditions": []}


def test_conditions_are_stored_without_empty_strings() -> None:
    conditions = Conditions(None, 1, lambda *_: None)
    conditions.set("Ready", True, "Ok", "")
    status = ConnectorStatus(conditions=conditions.items)
    (stored,) = status.patch()["conditions"]
    assert "message" not in stored
    assert stored["reason"] == "Ok"


def test_salvage_keeps_what_reads() -> None:
    stored = {"connectorState": "RUNNING", "tasks": "not a list", "lastCheck": {"verdict": "HEALTHY"}}
    status = ConnectorStatus.salvage(stored)
    assert status.connector_state == "RUNNING"
    assert status.tasks == []
    assert status.last_check is None  # no application: not a check this version can follow
