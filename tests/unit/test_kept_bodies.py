"""The body each Connector's resync acts on (handlers.connector_bodies): kept as compact JSON,
everything the resync reads and nothing else."""

from __future__ import annotations

import copy
import json
from typing import Any

import kopf

from connectops.handlers import connector_bodies


def _raw() -> dict[str, Any]:
    return {
        "apiVersion": "connectops.io/v1alpha1",
        "kind": "Connector",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "u-1",
            "generation": 3,
            "annotations": {"connectops.io/restart": "1"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"class": "X", "config": {"topics": "t"}},
        "status": {"autoRestart": {"count": 1}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_the_kept_body_is_the_event_less_managed_fields_as_compact_json() -> None:
    raw = _raw()
    event = copy.deepcopy(raw)
    kept = connector_bodies(kopf.Body(event))
    assert kept is not None
    assert list(kept) == ["u-1"]
    text = kept["u-1"]
    assert ", " not in text
    assert ": " not in text
    expected = copy.deepcopy(raw)
    del expected["metadata"]["managedFields"]
    assert json.loads(text) == expected
    assert event == raw  # the event kopf handles is not changed


def test_an_object_without_a_uid_is_not_kept() -> None:
    raw = _raw()
    del raw["metadata"]["uid"]
    assert connector_bodies(kopf.Body(raw)) is None
