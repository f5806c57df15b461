"""spec.offsets: which OffsetReset applies it, and which specs are refused at admission."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from connectops.models.connector import ConnectorOffsets
from connectops.models.offset_reset import OffsetResetSpec
from connectops.planning.on_create import needs_reset, offsets_hash, reset_manifest, reset_spec

ENTRY = {"partition": {"filename": "/data/in.txt"}, "offset": {"position": 12}}


@pytest.mark.parametrize(
    ("offsets", "expected"),
    [
        ({"onCreate": "clear"}, {"action": "reset"}),
        ({"onCreate": "set", "entries": [ENTRY]}, {"action": "alter", "offsets": [ENTRY]}),
        ({"onCreate": "set", "setTo": "earliest"}, {"action": "toEarliest"}),
        ({"onCreate": "set", "setTo": "latest", "topics": ["t"]}, {"action": "toLatest", "topics": ["t"]}),
        (
            {"onCreate": "set", "setTo": "timestamp", "timestamp": "2026-01-31T12:00:00Z"},
            {"action": "toTimestamp", "timestamp": "2026-01-31T12:00:00Z"},
        ),
    ],
)
def test_the_reset_that_applies_it(offsets: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = reset_spec(ConnectorOffsets.model_validate(offsets), "orders")
    assert spec == {"connectorRef": {"name": "orders"}, "resume": "desired", **expected}
    # and it is an OffsetReset the API (and its model) accepts as it is
    OffsetResetSpec.model_validate(spec)


def test_resume_needs_no_reset_and_the_reset_is_owned() -> None:
    assert not needs_reset(None)
    assert not needs_reset(ConnectorOffsets())
    assert needs_reset(ConnectorOffsets.model_validate({"onCreate": "clear"}))
    manifest = reset_manifest(ConnectorOffsets.model_validate({"onCreate": "clear"}), "ns", "orders", "0123456789ab")
    assert manifest["metadata"]["name"] == "orders-offsets-01234567"
    assert manifest["metadata"]["ownerReferences"] == [
        {"apiVersion": "connectops.io/v1alpha1", "kind": "Connector", "name": "orders", "uid": "0123456789ab"}
    ]


def test_a_changed_spec_has_another_hash() -> None:
    clear = ConnectorOffsets.model_validate({"onCreate": "clear"})
    assert offsets_hash(clear) == offsets_hash(ConnectorOffsets.model_validate({"onCreate": "clear"}))
    assert offsets_hash(clear) != offsets_hash(ConnectorOffsets.model_validate({"onCreate": "set", "entries": [ENTRY]}))


@pytest.mark.parametrize(
    ("offsets", "why"),
    [
        ({"onCreate": "set"}, "exactly one of entries or setTo"),
        ({"onCreate": "set", "entries": [ENTRY], "setTo": "earliest"}, "exactly one of entries or setTo"),
        ({"onCreate": "clear", "entries": [ENTRY]}, "apply to onCreate set"),
        ({"onCreate": "set", "setTo": "timestamp"}, "setTo timestamp needs timestamp"),
        ({"onCreate": "set", "setTo": "earliest", "timestamp": "1700000000000"}, "setTo timestamp needs timestamp"),
        ({"onCreate": "rename"}, "Input should be"),
    ],
)
def test_refused(offsets: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        ConnectorOffsets.model_validate(offsets)
