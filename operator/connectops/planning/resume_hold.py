"""Pure decisions about a reset's ``resume`` policy once the reset has ended. No I/O.

An OffsetReset whose ``resume`` names a state (``stopped``, ``paused``, ``running``) other than
its Connector object's ``spec.state`` leaves the connector in that state. Without a hold, the
Connector's next pass would put it back as its spec says within a second of the unlock, and the
reset's "resumed to stopped" would describe nothing the connector does. So the reset marks the
Connector object (an annotation naming the state and the Connector's ``metadata.generation``
the reset acted on) and the Connector pass keeps that state while the generation is the same:
the user's next change of the Connector's spec (a new generation) is a newer decision, and the
spec wins from then on. A mark never needs cleaning up: generations only grow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from connectops.models import GROUP

#: the annotation on a Connector object that holds a finished reset's resume state
HOLD_ANNOTATION = f"{GROUP}/resume-hold"
HELD_STATES = frozenset({"running", "paused", "stopped"})


@dataclass(frozen=True)
class ResumeHold:
    """A finished reset's resume state, held on the Connector object it names."""

    reset: str
    """The OffsetReset (in the Connector's namespace) that left the state."""
    generation: int
    """The Connector's ``metadata.generation`` the reset acted on."""
    state: str
    """running, paused or stopped."""

    def annotation(self) -> dict[str, str]:
        return {
            HOLD_ANNOTATION: json.dumps(
                {"reset": self.reset, "generation": self.generation, "state": self.state}, sort_keys=True
            )
        }


def read_hold(annotations: Mapping[str, str]) -> ResumeHold | None:
    """The hold an object's annotations carry; None without one or when it is not readable (a
    hand-edited mark holds nothing: the spec applies)."""
    text = annotations.get(HOLD_ANNOTATION)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    reset, generation, state = data.get("reset"), data.get("generation"), data.get("state")
    if not isinstance(reset, str) or not isinstance(generation, int) or isinstance(generation, bool):
        return None
    if state not in HELD_STATES:
        return None
    return ResumeHold(reset=reset, generation=generation, state=str(state))


def held_state(hold: ResumeHold | None, generation: int | None, spec_state: str) -> str | None:
    """The state the Connector pass keeps instead of ``spec_state``: the hold's, while the
    Connector's generation is the one the reset acted on and the states differ; else None."""
    if hold is None or generation is None or generation != hold.generation:
        return None
    return hold.state if hold.state != spec_state else None


def needs_hold(policy: str, spec_state: str | None) -> bool:
    """Whether a reset's resume policy must be held on its Connector object: it names a state,
    and the Connector's spec says another one (no Connector object: nothing else resumes it)."""
    return spec_state is not None and policy in HELD_STATES and policy != spec_state


def resume_target(
    planned: str, seen_generation: int | None, generation_now: int | None, spec_state_now: str | None
) -> tuple[str, bool]:
    """The state a reset returns a managed connector to at its resume step, and whether that is
    the planned one. The plan's state (from its resume policy) unless the Connector's spec
    changed while the reset ran: then it is a later decision than the reset's, and it wins."""
    if spec_state_now is None or seen_generation is None or generation_now == seen_generation:
        return planned, True
    return spec_state_now, planned == spec_state_now
