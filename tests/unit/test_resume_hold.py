"""The held resume state of a finished reset (planning.resume_hold), and the Connector pass's
use of it (reconcilers.connector_hold.hold_spec): the decisions as a table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connectops.models.base import Condition
from connectops.models.connector import ConnectorSpec
from connectops.planning.resume_hold import (
    HOLD_ANNOTATION,
    ResumeHold,
    held_state,
    needs_hold,
    read_hold,
    resume_target,
)
from connectops.reconcilers.common import Conditions
from connectops.reconcilers.connector_hold import hold_spec

HOLD = ResumeHold(reset="rewind", generation=3, state="stopped")


def test_the_annotation_reads_back_as_written() -> None:
    assert read_hold(HOLD.annotation()) == HOLD


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        json.dumps({"reset": "r", "generation": "3", "state": "stopped"}),
        json.dumps({"reset": "r", "generation": True, "state": "stopped"}),
        json.dumps({"reset": "r", "generation": 3, "state": "deleted"}),
        json.dumps({"generation": 3, "state": "stopped"}),
    ],
)
def test_an_unreadable_mark_holds_nothing(text: str) -> None:
    assert read_hold({HOLD_ANNOTATION: text}) is None


@pytest.mark.parametrize(
    ("hold", "generation", "spec_state", "held"),
    [
        (HOLD, 3, "running", "stopped"),  # the generation the reset acted on: held
        (HOLD, 4, "running", None),  # the spec changed since: the spec wins
        (HOLD, 3, "stopped", None),  # the spec says the same: nothing to hold
        (HOLD, None, "running", None),
        (None, 3, "running", None),
        (ResumeHold("r", 3, "paused"), 3, "running", "paused"),
    ],
)
def test_held_state(hold: ResumeHold | None, generation: int | None, spec_state: str, held: str | None) -> None:
    assert held_state(hold, generation, spec_state) == held


@pytest.mark.parametrize(
    ("policy", "spec_state", "expected"),
    [
        ("stopped", "running", True),
        ("paused", "running", True),
        ("running", "stopped", True),
        ("stopped", "stopped", False),
        ("desired", "running", False),  # desired is the spec's state: nothing to hold
        ("stopped", None, False),  # no Connector object: nothing else resumes it
    ],
)
def test_needs_hold(policy: str, spec_state: str | None, expected: bool) -> None:
    assert needs_hold(policy, spec_state) is expected


def test_a_spec_changed_during_the_reset_wins_over_the_plan() -> None:
    assert resume_target("stopped", 3, 3, "running") == ("stopped", True)
    assert resume_target("stopped", 3, 4, "running") == ("running", False)
    assert resume_target("stopped", 3, 4, "stopped") == ("stopped", True)
    assert resume_target("stopped", None, 4, "running") == ("stopped", True)
    assert resume_target("running", 3, 5, None) == ("running", True)


def spec(state: str = "running") -> ConnectorSpec:
    return ConnectorSpec.model_validate(
        {"clusterRef": {"name": "c"}, "class": "org.example.Source", "config": {}, "state": state}
    )


def conditions(items: list[Any] | None = None) -> tuple[Conditions, list[tuple[str, str, str]]]:
    events: list[tuple[str, str, str]] = []
    return Conditions(items, 3, lambda t, r, m: events.append((t, r, m))), events


def test_the_connector_pass_keeps_the_held_state_and_says_so() -> None:
    conds, events = conditions()
    held = hold_spec(spec(), HOLD.annotation(), 3, conds)
    assert str(held.state) == "stopped"
    condition = conds.get("ResumeHeld")
    assert condition is not None
    assert condition.status == "True"
    assert condition.reason == "OffsetResetResume"
    assert "OffsetReset rewind" in condition.message
    assert "until this Connector's spec changes" in condition.message
    assert [e[1] for e in events] == ["OffsetResetResume"]
    # said once: the same condition again is no new Event
    hold_spec(spec(), HOLD.annotation(), 3, Conditions(conds.items, 3, lambda *a: events.append(a)))
    assert len(events) == 1


def test_once_the_spec_changes_the_spec_applies_and_the_condition_says_so() -> None:
    conds, _ = conditions()
    hold_spec(spec(), HOLD.annotation(), 3, conds)
    after, events = conditions(conds.items)
    kept = hold_spec(spec(), HOLD.annotation(), 4, after)
    assert str(kept.state) == "running"
    condition = after.get("ResumeHeld")
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "SpecChanged")
    assert [e[1] for e in events] == ["SpecChanged"]


def test_a_connector_never_held_gets_no_condition() -> None:
    conds, events = conditions([Condition(type="Ready", status="True", reason="Running", message="")])
    assert hold_spec(spec(), {}, 3, conds) == spec()
    assert conds.get("ResumeHeld") is None
    assert events == []
