"""Shared pydantic building blocks for the CRD models.

The models are the single source of the CRD schemas (see :mod:`connectops.crdgen`), so every
field carries a description: it becomes the ``kubectl explain`` text users read.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.alias_generators import to_camel

GROUP = "connectops.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

#: the CRD schema of a status field the model holds as a StrEnum: plain text, as it was when the
#: field was a ``str``, so the API server checks no list of values the operator alone writes
#: (``Annotated[Phase, STORED_AS_TEXT]``; the field's description lists the values)
STORED_AS_TEXT: Final = WithJsonSchema({"type": "string"})


class CamelModel(BaseModel):
    """Base for spec models: camelCase on the wire, unknown fields rejected.

    ``extra="forbid"`` mirrors the API server's structural-schema pruning with an error instead
    of a silent drop, so a typo in a spec shows up as ``Valid=False`` rather than being ignored.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class StatusModel(BaseModel):
    """Base for status models: camelCase, tolerant of fields written by newer operator versions.

    A reconciler loads an object's status once (:meth:`from_storage`, as kopf's ``HandlerState``
    does), changes it through the model and writes it back with :meth:`for_storage`: a JSON merge
    patch in which a field the reconciler cleared is an explicit null (it deletes the stored key),
    a field nobody set is absent (a field this version does not know, or another writer's, is
    left as stored), and conditions carry no empty strings (some API servers reject ``""`` in
    custom objects, kubernetes#99804).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    @classmethod
    def from_storage(cls, stored: Mapping[str, Any] | None) -> Self:
        """The status as stored on the object (kopf's own ``status.kopf`` bookkeeping and unknown
        fields are not the model's and are ignored)."""
        return cls.model_validate(dict(stored or {}))

    @classmethod
    def salvage(cls, stored: Mapping[str, Any] | None) -> Self:
        """Like :meth:`from_storage`, for a reader that must not fail (metrics, a reconcile that
        rewrites the status anyway): a field that does not read (another version's shape, or
        written by hand through the status subresource) is dropped, the rest is kept."""
        data = {str(k): v for k, v in (stored or {}).items()}
        while True:
            try:
                return cls.model_validate(data)
            except ValidationError as exc:
                bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} & set(data)
                if not bad:
                    return cls()
                for key in bad:
                    del data[key]

    def for_storage(self, *fields: str) -> dict[str, Any]:
        """The merge patch that stores this status: every field, or only ``fields`` (python names)."""
        names = fields or tuple(type(self).model_fields)
        unknown = set(names) - set(type(self).model_fields)
        if unknown:
            raise AttributeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        dumped = self.model_dump(by_alias=True, mode="json", exclude_none=True, include=set(names))
        for name in names:
            field = type(self).model_fields[name]
            alias = field.alias or name
            if getattr(self, name) is None and name in self.model_fields_set:
                dumped[alias] = None  # cleared here: delete the stored value
        if "conditions" in dumped and isinstance(dumped["conditions"], list):
            dumped["conditions"] = [
                {k: v for k, v in c.items() if v != ""} for c in dumped["conditions"] if isinstance(c, dict)
            ]
        return dumped

    def patch(self) -> dict[str, Any]:
        """The merge patch of the fields set on this instance (a reconcile that builds its status
        afresh publishes what it decided and nothing else)."""
        return self.for_storage(*(n for n in type(self).model_fields if n in self.model_fields_set))


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


def iso_ms(epoch: float) -> str:
    """A moment to the millisecond, for durations measured across writes of the status."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_of(text: str | None) -> float | None:
    """The moment an ISO 8601 time of the status names (None for none)."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


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
