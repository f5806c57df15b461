"""Shared pydantic building blocks for the CRD models.

The models are the single source of the CRD schemas (see :mod:`connectops.crdgen`), so every
field carries a description: it becomes the ``kubectl explain`` text users read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "connectops.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class CamelModel(BaseModel):
    """Base for spec models: camelCase on the wire, unknown fields rejected.

    ``extra="forbid"`` mirrors the API server's structural-schema pruning with an error instead
    of a silent drop, so a typo in a spec shows up as ``Valid=False`` rather than being ignored.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", use_enum_values=True)


class StatusModel(BaseModel):
    """Base for status models: camelCase, tolerant of fields written by newer operator versions."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class SecretKeyRef(CamelModel):
    """A key of a Secret in the same namespace as the referring object."""

    name: Annotated[str, Field(min_length=1, description="Name of the Secret.")]
    key: Annotated[str, Field(min_length=1, description="Key within the Secret's data.")]


class SecretValueSource(CamelModel):
    """Where a sensitive value comes from (shaped like a Pod's ``env[].valueFrom``)."""

    secret_key_ref: Annotated[SecretKeyRef, Field(description="The Secret key holding the value.")]


class LocalObjectRef(CamelModel):
    """A reference to an object of a known kind in the same namespace."""

    name: Annotated[str, Field(min_length=1, description="Name of the referenced object.")]


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(StatusModel):
    """A kubebuilder/KEP-1623 style condition.

    ``lastTransitionTime`` changes only when ``status`` flips, so repeated reconciles that reach
    the same conclusion write nothing (GitOps tools and watchers see a quiet object).
    """

    type: str = Field(description="Condition type, e.g. Ready.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="CamelCase machine-readable reason.")
    message: str = Field(default="", description="Human-readable detail.")
    observed_generation: int | None = Field(
        default=None, description="metadata.generation this condition was computed for."
    )
    last_transition_time: str | None = Field(default=None, description="When status last changed (RFC 3339).")


def utcnow_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    generation: int | None,
    now: str | None = None,
) -> list[Condition]:
    """Return ``conditions`` with ``type_`` set, keeping lastTransitionTime unless status flips."""
    status_text: Literal["True", "False", "Unknown"] = "Unknown" if status is None else ("True" if status else "False")
    out: list[Condition] = []
    found = False
    for cond in conditions:
        if cond.type != type_:
            out.append(cond)
            continue
        found = True
        transition = cond.last_transition_time if cond.status == status_text else (now or utcnow_iso())
        out.append(
            Condition(
                type=type_,
                status=status_text,
                reason=reason,
                message=message,
                observed_generation=generation,
                last_transition_time=transition,
            )
        )
    if not found:
        out.append(
            Condition(
                type=type_,
                status=status_text,
                reason=reason,
                message=message,
                observed_generation=generation,
                last_transition_time=now or utcnow_iso(),
            )
        )
    return out


def get_condition(conditions: list[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)
