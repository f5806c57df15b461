"""``connectops plan``'s pure half (planning/preview.py): documents, schema errors, the sentences
for the reconciler's own planned actions, a reset's partition moves, exit statuses and output.
The online half runs against the real API server and Connect in tests/e2e/test_plan.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectops.cli import main
from connectops.models.connector import ConnectorSpec, DesiredState
from connectops.models.offset_reset import ResetAction
from connectops.planning.connector import Create, SetState, UpdateConfig
from connectops.planning.preview import (
    MASK,
    Exit,
    ObjectPlan,
    as_json,
    connector_changes,
    documents,
    exit_status,
    markdown,
    reset_moves,
    validate,
)

CONNECTOR = {
    "apiVersion": "connectops.io/v1alpha1",
    "kind": "Connector",
    "metadata": {"name": "orders"},
    "spec": {"clusterRef": {"name": "main"}, "class": "FileStreamSource", "config": {"file": "/f", "topic": "t"}},
}


def test_documents_keep_only_connectops_objects_and_default_the_namespace() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    unknown = {"apiVersion": "connectops.io/v1alpha1", "kind": "Nope", "metadata": {"name": "x"}}
    docs, bad = documents([CONNECTOR, other, None, unknown], "team-a")
    assert [(d.kind, d.namespace, d.name) for d in docs] == [("Connector", "team-a", "orders")]
    assert [p.errors for p in bad] == [["not a known connectops object (kind 'Nope', name 'x')"]]


def test_a_schema_error_names_the_field() -> None:
    docs, _ = documents([{**CONNECTOR, "spec": {**CONNECTOR["spec"], "tasksMax": 0}}], "ns")
    spec, plan = validate(docs[0])
    assert spec is None
    assert plan.errors
    assert plan.errors[0].startswith("spec.tasksMax:")


def test_changes_show_new_values_from_git_and_mask_secrets() -> None:
    desired = {"name": "c", "topic": "new", "db.password": "hunter2", "token.file": "/t", "from.secret": "s3cr3t"}
    live = {"name": "c", "topic": "old", "gone": "x", "db.password": "old-pass", "from.secret": "old"}
    said = connector_changes(
        "c",
        desired,
        live,
        [UpdateConfig(("db.password", "from.secret", "gone", "token.file", "topic"))],
        frozenset({"from.secret"}),
    )
    text = "\n".join(said)
    assert "change topic to new" in text
    assert "remove gone" in text
    assert f"change db.password to {MASK}" in text
    assert f"change from.secret to {MASK}" in text
    assert f"add token.file={MASK}" in text
    # live values never appear (a worker's config may hold what a PR comment must not repeat)
    for secret in ("hunter2", "s3cr3t", "old-pass", "old\n", "x\n"):
        assert secret not in text + "\n"
    created = connector_changes("c", {"name": "c", "topic": "t"}, None, [Create(initial_state="PAUSED")], frozenset())
    assert created == [
        "create connector c in state PAUSED: topic=t",
        "  offsets: any Connect still holds under c are resumed (onCreate resume)",
    ]
    moved = connector_changes("c", {}, {}, [SetState(DesiredState.PAUSED, "RUNNING")], frozenset())
    assert moved == ["move c from RUNNING to PAUSED"]


@pytest.mark.parametrize(
    ("offsets", "said"),
    [
        ({"onCreate": "clear"}, "  offsets: any Connect holds under c are removed through an OffsetReset"),
        (
            {"from": {"connector": "old-c"}},
            "  offsets: carried over from connector old-c (stopped first, deleted once they are written)",
        ),
        (
            {"onCreate": "set", "entries": [{"partition": {"f": "x"}, "offset": {"pos": 1}}] * 2},
            "  offsets: set to the 2 partition offsets of spec.offsets.entries",
        ),
        (
            {"onCreate": "set", "setTo": "timestamp", "timestamp": "2026-01-31T12:00:00Z", "topics": ["t"]},
            "  offsets: set to timestamp 2026-01-31T12:00:00Z on t",
        ),
    ],
)
def test_a_created_connector_says_what_spec_offsets_does(offsets: dict[str, object], said: str) -> None:
    """spec.offsets applies only when the operator creates the connector: the plan says what it
    will do then, and that the connector is created STOPPED until the offsets are written."""
    spec = ConnectorSpec.model_validate({**CONNECTOR["spec"], "offsets": offsets})
    lines = connector_changes(
        "c", {"name": "c", "topic": "t"}, None, [Create(initial_state=None)], frozenset(), offsets=spec.offsets
    )
    assert lines[0] == "create connector c in state STOPPED: topic=t"
    assert lines[1].startswith(said), lines[1]
    assert lines[1].endswith("; then it moves to its desired state")
    # a connector that exists already: spec.offsets does nothing, and nothing is said of it
    changed = connector_changes(
        "c", {"topic": "t"}, {"topic": "u"}, [UpdateConfig(("topic",))], frozenset(), offsets=spec.offsets
    )
    assert not any("offsets" in line for line in changed)


def test_reset_moves_name_what_changes_and_count_what_stays() -> None:
    before = [
        {"partition": {"kafka_topic": "t", "kafka_partition": p}, "offset": {"kafka_offset": 10 * p}} for p in range(3)
    ]
    moves, kept = reset_moves(
        ResetAction.ALTER, [{"partition": before[1]["partition"], "offset": {"kafka_offset": 5}}], before
    )
    assert moves == ['{"kafka_partition": 1, "kafka_topic": "t"}: {"kafka_offset": 10} -> {"kafka_offset": 5}']
    assert kept == 2
    moves, kept = reset_moves(ResetAction.RESET, [], before)
    assert len(moves) == 3
    assert all(m.endswith("-> removed") for m in moves)
    assert kept == 0


def test_exit_statuses_and_outputs() -> None:
    quiet, busy, broken = (
        ObjectPlan("Connector", "ns", "a"),
        ObjectPlan("Connector", "ns", "b"),
        ObjectPlan("Connector", "ns", "c"),
    )
    busy.changes.append("update the config of b")
    broken.errors.append("spec.tasksMax: too small")
    assert exit_status([quiet]) is Exit.NO_CHANGE
    assert exit_status([quiet, busy]) is Exit.CHANGES
    assert exit_status([quiet, busy, broken]) is Exit.INVALID
    text = markdown([quiet, busy, broken], online=True)
    assert "#### Connector ns/a: no change" in text
    assert "#### Connector ns/c: invalid" in text
    assert json.loads(as_json([busy], online=True))["exit"] == 2


def test_the_offline_command_on_a_broken_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(json.dumps({**CONNECTOR, "spec": {**CONNECTOR["spec"], "tasksMax": 0}}))
    (tmp_path / "b.yml").write_text(json.dumps(CONNECTOR))
    assert main(["plan", "-f", str(tmp_path), "--offline", "-o", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in out["objects"]] == ["orders", "orders"]
    assert out["objects"][0]["errors"]
    assert not out["objects"][1]["errors"]
    assert main(["plan", "-f", str(tmp_path / "b.yml"), "--offline"]) == 0
