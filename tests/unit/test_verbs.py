"""Annotation verbs: a value acts once, bad values are reported, recorded tokens stop repeats."""

from __future__ import annotations

import pytest

from connectops.models.connector import VerbTokens
from connectops.planning.verbs import (
    RESTART,
    RESTART_TASKS,
    BadVerb,
    Restart,
    RestartTasks,
    acted_on,
    pending_verbs,
    reconcile_paused,
)


def test_new_values_act_once() -> None:
    none = VerbTokens()
    assert pending_verbs({}, none) == []
    verbs = pending_verbs({RESTART: "t1", RESTART_TASKS: "2,0,2:x"}, none)
    assert verbs == [Restart(RESTART, "t1"), RestartTasks(RESTART_TASKS, "2,0,2:x", (0, 2))]
    done = none
    for verb in verbs:
        done = acted_on(done, verb)
    assert pending_verbs({RESTART: "t1", RESTART_TASKS: "2,0,2:x"}, done) == []
    assert pending_verbs({RESTART: "t2", RESTART_TASKS: "2,0,2:x"}, done) == [Restart(RESTART, "t2")]
    assert pending_verbs({RESTART_TASKS: "failed:y"}, done) == [Restart(RESTART_TASKS, "failed:y", only_failed=True)]


def test_bad_values_are_reported_not_acted() -> None:
    for value in ["all of them", "0:", ":t", "x:t", "0,:t", "-1:t", "0:" + "t" * 300]:
        (verb,) = pending_verbs({RESTART_TASKS: value}, VerbTokens())
        assert isinstance(verb, BadVerb), value
    (verb,) = pending_verbs({RESTART: "with space"}, VerbTokens())
    assert isinstance(verb, BadVerb)
    # recorded like any other value: reported once
    assert pending_verbs({RESTART: "with space"}, acted_on(VerbTokens(), verb)) == []


def test_paused() -> None:
    assert reconcile_paused({"connectops.io/reconcile": "paused"})
    assert reconcile_paused({"connectops.io/reconcile": " Paused "})
    assert not reconcile_paused({"connectops.io/reconcile": "active"})
    assert not reconcile_paused({})


def test_cli_version_is_the_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    from connectops.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"connectops {version('connectops')}"
