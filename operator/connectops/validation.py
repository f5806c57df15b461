"""Turning pydantic validation errors into messages safe for conditions and Events."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """``spec.config: …; spec.tasksMax: …`` — locations and reasons only.

    pydantic's own ``str()`` includes the offending input value, which may be a secret.
    """
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "spec"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    extra = len(exc.errors()) - limit
    if extra > 0:
        parts.append(f"and {extra} more")
    return "; ".join(parts)
