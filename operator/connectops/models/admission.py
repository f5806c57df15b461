"""CEL admission rules (``x-kubernetes-validations``) declared beside the models they guard.

A spec model lists, in its ``model_config``, the checks of its validators that need no I/O, as
CEL rules with the message the validator gives; :mod:`connectops.crdgen` carries them into the
CRD, so the API server (1.30+) refuses such an object at ``kubectl apply`` and a GitOps sync fails
with the message. The validators stay: they are what an older API server, or an object stored
before a rule existed (validation ratcheting lets it be updated and deleted), is checked with.
"""

from __future__ import annotations

from pydantic import ConfigDict


def given(field: str) -> str:
    """CEL: ``field`` of ``self`` is set. An optional field is nullable in the CRD (clients and
    GitOps tools write explicit nulls); the API server's CEL reads a null as absent (``has`` is
    false), as the models do, and refuses ``!= null`` on a string or a list."""
    return f"has(self.{field})"


def filled(field: str) -> str:
    """CEL: the string, list or map ``field`` of ``self`` is set and not empty."""
    return f"(has(self.{field}) && size(self.{field}) > 0)"


def rules(*checks: tuple[str, str], immutable: str | None = None) -> ConfigDict:
    """The ``model_config`` entry of a model with CEL rules: ``(rule, message)`` pairs, and with
    ``immutable`` the message of a transition rule that refuses any change once created."""
    validations = [{"rule": rule, "message": message} for rule, message in checks]
    if immutable is not None:
        validations.append({"rule": "self == oldSelf", "message": immutable})
    return ConfigDict(json_schema_extra={"x-kubernetes-validations": validations})  # type: ignore[dict-item]
