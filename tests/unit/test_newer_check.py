"""A resync queued behind the change handler reads the body from before that handler's status
patch; the Connector reconciler must follow the check it launched last, not put the previous one
back (seen in CI: lastCheck went back from flood-check-g2 to flood-check-g1 and the cure was never
reported). The end-to-end proof is tests/e2e/test_producer_pressure_cr.py."""

from __future__ import annotations

from connectops.models.checks import LastCheck
from connectops.reconcilers.connector import _newer_check


def check(app: str, started: str | None, state: str = "SUBMITTED") -> LastCheck:
    return LastCheck(application=app, started_at=started, state=state)


def test_the_check_launched_last_wins_over_a_stale_body() -> None:
    g1 = check("c-check-g1", "2026-11-25T10:00:00Z", "COMPLETED")
    g2 = check("c-check-g2", "2026-11-25T10:05:00Z")
    assert _newer_check(g1, g2) is g2  # the stale body still names g1
    assert _newer_check(g2, g1) is g2  # a newer check stored by another process wins
    assert _newer_check(None, g2) is g2
    assert _newer_check(g1, None) is g1


def test_the_same_application_is_followed_from_the_stored_record() -> None:
    stored = check("c-check-g2", "2026-11-25T10:05:00Z", "COMPLETED")
    remembered = check("c-check-g2", "2026-11-25T10:05:00Z", "RUNNING")
    assert _newer_check(stored, remembered) is stored
