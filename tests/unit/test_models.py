from __future__ import annotations

import pytest
from pydantic import ValidationError

from connectops.models.base import Condition, set_condition
from connectops.models.connector import ConnectorSpec, ProducerOverrides
from connectops.validation import describe_validation_error

BASE = {"clusterRef": {"name": "c"}, "class": "FileStreamSource"}


def test_camel_case_and_defaults() -> None:
    spec = ConnectorSpec.model_validate({**BASE, "tasksMax": 2, "config": {"file": "/x", "batch": 5}})
    assert spec.tasks_max == 2
    assert spec.state == "running"
    assert spec.auto_restart.enabled is True
    assert spec.config == {"file": "/x", "batch": 5}


@pytest.mark.parametrize("key", ["name", "connector.class", "tasks.max"])
def test_owned_keys_rejected(key: str) -> None:
    with pytest.raises(ValidationError, match="set by spec fields"):
        ConnectorSpec.model_validate({**BASE, "config": {key: "x"}})


def test_override_keys_belong_in_override_blocks() -> None:
    with pytest.raises(ValidationError, match="producerOverrides"):
        ConnectorSpec.model_validate({**BASE, "config": {"producer.override.acks": "all"}})


def test_unknown_fields_and_wrong_types_rejected() -> None:
    with pytest.raises(ValidationError):
        ConnectorSpec.model_validate({**BASE, "tasksMaxx": 2})
    with pytest.raises(ValidationError):
        ConnectorSpec.model_validate({**BASE, "state": "sleeping"})
    with pytest.raises(ValidationError):
        ConnectorSpec.model_validate({**BASE, "tasksMax": 0})


def test_validation_message_never_contains_input_values() -> None:
    secret = "hunter2-very-secret"
    with pytest.raises(ValidationError) as err:
        ConnectorSpec.model_validate({**BASE, "tasksMax": secret})
    text = describe_validation_error(err.value)
    assert "tasksMax" in text
    assert secret not in text


def test_producer_overrides_render_kafka_names() -> None:
    overrides = ProducerOverrides.model_validate(
        {
            "batchSize": 1024,
            "lingerMs": 5,
            "enableIdempotence": False,
            "compressionType": "zstd",
            "maxInFlightRequestsPerConnection": 1,
            "config": {"max.request.size": 2048},
        }
    )
    assert overrides.as_properties() == {
        "batch.size": "1024",
        "linger.ms": "5",
        "enable.idempotence": "false",
        "compression.type": "zstd",
        "max.in.flight.requests.per.connection": "1",
        "max.request.size": "2048",
    }


def test_condition_transition_time_kept_when_status_unchanged() -> None:
    conds = set_condition([], "Ready", True, "Running", "ok", 1, now="2026-01-01T00:00:00Z")
    again = set_condition(conds, "Ready", True, "Running", "still ok", 2, now="2026-01-02T00:00:00Z")
    assert again[0].last_transition_time == "2026-01-01T00:00:00Z"
    assert again[0].observed_generation == 2
    flipped = set_condition(again, "Ready", False, "Failed", "x", 2, now="2026-01-03T00:00:00Z")
    assert flipped[0].last_transition_time == "2026-01-03T00:00:00Z"
    assert isinstance(flipped[0], Condition)


@pytest.mark.parametrize("name", ["a/b", "50%", "back\\slash", ".", "..", "bad\x01name", "tab\tname", "del\x7f"])
def test_unaddressable_connector_names_rejected(name: str) -> None:
    with pytest.raises(ValidationError, match="cannot address"):
        ConnectorSpec.model_validate({**BASE, "connectorName": name})


@pytest.mark.parametrize("name", ["orders eu+west #1?", "ünï & x;=[y]", "a.b"])
def test_names_needing_encoding_accepted(name: str) -> None:
    assert ConnectorSpec.model_validate({**BASE, "connectorName": name}).connector_name == name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("1700000000000", 1_700_000_000_000),
        ("2026-01-31T12:00:00Z", 1_769_860_800_000),
        ("2026-01-31T14:00:00+02:00", 1_769_860_800_000),
        ("2026-01-31t12:00:00.5z", 1_769_860_800_500),
        ("9999-12-31T23:59:59.999Z", 253_402_300_799_999),
    ],
)
def test_timestamps_in_range(text: str, expected: int) -> None:
    from connectops.models.offset_reset import timestamp_ms

    assert timestamp_ms(text) == expected
    # and independently of the parser: the same instant through datetime's own arithmetic
    import datetime as dt

    if not text.isdigit():
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        parsed = dt.datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        assert (parsed - epoch) // dt.timedelta(milliseconds=1) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("99999999999999999999", "pattern"),
        ("2026-01-31T12:00:00", "pattern"),
        ("253402300800000", "out of range"),
        ("2026-02-30T12:00:00Z", "RFC 3339"),
    ],
)
def test_timestamps_refused(text: str, why: str) -> None:
    from pydantic import ValidationError

    from connectops.models.offset_reset import OffsetResetSpec

    with pytest.raises(ValidationError, match=why):
        OffsetResetSpec.model_validate({"connectorRef": {"name": "c"}, "action": "toTimestamp", "timestamp": text})
