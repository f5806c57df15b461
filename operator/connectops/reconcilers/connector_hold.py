"""The Connector pass's side of a reset's held resume state (:mod:`planning.resume_hold`).

One call from the Connector reconcile, before it plans: the spec it acts on, with ``state``
replaced by the held one while the hold applies, and the ``ResumeHeld`` condition saying so
(set False once the Connector's spec changed and its own state applies again).
"""

from __future__ import annotations

from collections.abc import Mapping

from connectops.models.connector import ConnectorSpec
from connectops.planning.resume_hold import held_state, read_hold
from connectops.reconcilers.common import Conditions

CONDITION = "ResumeHeld"


def hold_spec(
    spec: ConnectorSpec, annotations: Mapping[str, str], generation: int | None, conditions: Conditions
) -> ConnectorSpec:
    hold = read_hold(annotations)
    spec_state = str(spec.state)
    state = held_state(hold, generation, spec_state)
    if hold is not None and state is not None:
        conditions.set(
            CONDITION,
            True,
            "OffsetResetResume",
            f"OffsetReset {hold.reset} left the connector {state} (its resume policy); it stays {state} "
            f"until this Connector's spec changes (spec.state {spec_state} applies from then on)",
            event_on_change=True,
        )
        return spec.model_copy(update={"state": state})
    previous = conditions.get(CONDITION)
    if previous is not None and previous.status == "True":
        conditions.set(
            CONDITION,
            False,
            "SpecChanged",
            f"the Connector's spec changed after the reset: spec.state {spec_state} applies",
            event_on_change=True,
        )
    return spec
