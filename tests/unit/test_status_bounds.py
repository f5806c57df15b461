"""The Connector status bounds (connectops.planning.status_bounds), computed independently."""

from __future__ import annotations

import json
from dataclasses import dataclass

from connectops.planning.status_bounds import KEPT, shed, shown_tasks, size_of


@dataclass(frozen=True)
class Task:
    id: int
    state: str


def test_every_task_is_shown_up_to_the_limit_and_past_it_the_failed_first() -> None:
    few = [Task(i, "RUNNING") for i in range(3)]
    assert shown_tasks(few, 5) == few
    many = [Task(i, "FAILED" if i % 7 == 3 else "RUNNING") for i in range(100)]
    shown = shown_tasks(many, 20)
    failed = sorted(t.id for t in many if t.state == "FAILED")  # 15 of them
    assert [t.id for t in shown[: len(failed)]] == failed
    assert [t.id for t in shown[len(failed) :]] == [i for i in range(100) if i % 7 != 3][: 20 - len(failed)]


def test_a_patch_over_the_bound_sheds_its_largest_fields_to_null_and_keeps_its_conditions() -> None:
    patch = {
        "conditions": [{"type": "Ready", "message": "c" * 300}],
        "observedGeneration": 4,
        "tasks": ["t" * 5000],
        "lastCheck": {"x": "l" * 3000},
        "small": "s",
    }
    assert size_of(patch) == len(json.dumps(patch, separators=(",", ":")).encode())
    fits, dropped = shed(patch, 10_000)
    assert (fits, dropped) == (patch, [])
    out, dropped = shed(patch, 4000)
    assert dropped == ["tasks"]
    assert out["tasks"] is None
    assert size_of(out) <= 4000
    out, dropped = shed(patch, 500)
    assert dropped == ["tasks", "lastCheck"]
    assert out["small"] == "s"
    assert all(out[k] == patch[k] for k in KEPT)
