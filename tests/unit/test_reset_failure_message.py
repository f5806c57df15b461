"""What a failed reset tells the user about its offsets: never "not changed" when they may be."""

from __future__ import annotations

from connectops.models.offset_reset import StepStatus
from connectops.reconcilers.offset_reset import offsets_outcome


def test_reset_step_never_ran() -> None:
    text = offsets_outcome(StepStatus(name="reset", state="Pending", attempts=0), "reset", "b1", changed=False)
    assert text.startswith("Offsets were not changed")


def test_reset_step_attempted_but_every_call_refused() -> None:
    # Connect answered 400 to the DELETE: the change log says Refused, nothing changed
    text = offsets_outcome(StepStatus(name="reset", state="Failed", attempts=2), "reset", "b1", changed=False)
    assert text.startswith("Offsets were not changed")


def test_reset_step_done_names_the_backup() -> None:
    text = offsets_outcome(StepStatus(name="reset", state="Done", attempts=1), "alter", "bk-7", changed=True)
    assert text.startswith("The offsets WERE changed by the alter")
    assert "ConfigMap bk-7" in text


def test_reset_step_attempted_may_have_changed() -> None:
    # e.g. the DELETE reached Connect and its answer was lost, then every retry failed
    text = offsets_outcome(StepStatus(name="reset", state="Failed", attempts=3), "reset", None, changed=True)
    assert "may have been changed" in text
    assert "ConfigMap" not in text


def test_timestamp_must_parse() -> None:
    import pytest
    from pydantic import ValidationError

    from connectops.models.offset_reset import OffsetResetSpec

    base = {"connectorName": "c", "clusterRef": {"name": "m"}, "action": "toTimestamp"}
    assert OffsetResetSpec.model_validate({**base, "timestamp": "2026-01-31T12:00:00Z"}).timestamp
    assert OffsetResetSpec.model_validate({**base, "timestamp": "1700000000000"}).timestamp
    with pytest.raises(ValidationError, match="should match pattern"):
        OffsetResetSpec.model_validate({**base, "timestamp": "Q)"})
