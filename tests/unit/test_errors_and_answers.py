"""One error root whose ``retryable`` decides kopf's delay; Connect's answers parsed by shape."""

from __future__ import annotations

import json
from typing import Any

import kopf
import pytest

from connectops.adapters import connect_answers as answers
from connectops.adapters.connect_rest import (
    ConnectAuthFailed,
    ConnectNotFound,
    ConnectOffsetsInvalid,
    ConnectRebalancing,
    ConnectRejected,
    ConnectUnavailable,
    NotKafkaConnect,
    offsets_refused_as_invalid,
)
from connectops.adapters.kafka import GroupActive, KafkaAccessDenied
from connectops.adapters.kube import KubeObjectMissing
from connectops.errors import NotReadyYet, SpecInvalid, as_kopf_error
from connectops.failures import ConnectopsError


@pytest.mark.parametrize(
    ("error", "delay"),
    [
        (ConnectUnavailable("x"), 8.0),  # retryable: doubling (1 s * 2**3)
        (ConnectNotFound("x"), 8.0),
        (GroupActive("x"), 8.0),
        (KubeObjectMissing("x"), 8.0),
        (NotReadyYet("x"), 8.0),
        (ConnectRebalancing("x"), 1.0),  # short: a rebalance settles in seconds
        (ConnectRejected("x"), 300.0),  # permanent: only a change cures it, re-checked slowly
        (ConnectAuthFailed("x"), 300.0),
        (NotKafkaConnect("x"), 300.0),
        (KafkaAccessDenied("x"), 300.0),
    ],
)
def test_retryable_decides_the_delay(error: ConnectopsError, delay: float) -> None:
    assert isinstance(error, ConnectopsError)
    mapped = as_kopf_error(error, retry=3, base=1.0, maximum=300.0)
    assert isinstance(mapped, kopf.TemporaryError)
    assert mapped.delay == delay
    assert str(mapped) == "x"


def test_invalid_spec_is_permanent_and_unknown_errors_say_nothing() -> None:
    assert isinstance(as_kopf_error(SpecInvalid("bad"), retry=0, base=1, maximum=5), kopf.PermanentError)
    mapped = as_kopf_error(RuntimeError("password=hunter2"), retry=0, base=1, maximum=5)
    assert "hunter2" not in str(mapped)


def test_reasons_name_the_class() -> None:
    assert NotKafkaConnect.reason == "NotKafkaConnect"
    assert SpecInvalid.reason == "InvalidSpec"


@pytest.mark.parametrize(
    ("operation", "status", "message", "invalid"),
    [
        # a source connector's alterOffsets (FileStreamSource), as Connect answers it: HTTP 500
        ("alter offsets", 500, "Offset objects should either be null or contain the key 'position'", True),
        ("alter offsets", 500, "The value for the 'position' key in the offset is expected to be a Long value", True),
        ("alter offsets", 500, "The value for the 'position' key in the offset should be a non-negative value", True),
        # the framework's own checks of a sink's entries: HTTP 400
        (
            "alter offsets",
            400,
            "The offset for a sink connector should either be null or contain the key 'kafka_offset'",
            True,
        ),
        ("alter offsets", 400, "Partition values for sink connectors need to be integers", True),
        # refused, but not for the offsets: the state, a group still in use, a passing failure
        ("alter offsets", 400, "Connectors must be in the STOPPED state before their offsets can be modified", False),
        (
            "reset offsets",
            500,
            "Failed to reset consumer group offsets for connector x either because its tasks haven't stopped "
            "completely yet or the connector was resumed before the request could be completed. If the connector "
            "is in a stopped state, this operation can be safely retried.",
            False,
        ),
        ("alter offsets", 500, "Request timed out", False),
        ("alter offsets", 503, "Offset objects should either be null or contain the key 'position'", False),
        # not an offsets write
        ("put config", 500, "Offset objects should either be null or contain the key 'position'", False),
    ],
)
def test_offsets_refused_as_invalid(operation: str, status: int, message: str, invalid: bool) -> None:
    assert offsets_refused_as_invalid(operation, status, message) is invalid


def test_offsets_refused_as_invalid_are_permanent_and_changed_nothing() -> None:
    error = ConnectOffsetsInvalid("alter offsets: HTTP 500: Offset objects should ...", status=500)
    assert isinstance(error, ConnectRejected)
    assert error.changed_nothing()
    mapped = as_kopf_error(error, retry=3, base=1.0, maximum=300.0)
    assert isinstance(mapped, kopf.TemporaryError)
    assert mapped.delay == 300.0


ROOT_OK = {"version": "4.1.0", "commit": "abc", "kafka_cluster_id": "k-1"}


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"status": "ok"},
        {"version": "", "kafka_cluster_id": "k"},
        {"version": 4, "kafka_cluster_id": "k"},
        {"version": "4.1.0"},
        [],
        None,
        "4.1.0",
    ],
)
def test_a_root_answer_of_another_shape_is_not_connect(data: Any) -> None:
    with pytest.raises(answers.WrongShape):
        answers.parse(answers.ROOT, data)


def test_shapes_connect_documents_parse() -> None:
    assert answers.parse(answers.ROOT, {**ROOT_OK, "extra": 1}).kafka_cluster_id == "k-1"
    status = answers.parse(
        answers.STATUS,
        {
            "name": "c",
            "connector": {"state": "RUNNING", "worker_id": "w:8083"},
            "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:8083", "trace": "boom"}],
            "type": "source",
        },
    )
    assert status.tasks[0].trace == "boom"
    validate = answers.parse(
        answers.VALIDATE,
        {
            "name": "X",
            "error_count": 1,
            "groups": [],
            "configs": [{"definition": {}, "value": {"name": "a", "errors": ["e"]}}],
        },
    )
    assert validate.configs[0].value.errors == ["e"]
    offsets = answers.parse(answers.OFFSETS, {"offsets": [{"partition": {"f": "x"}, "offset": None}]})
    assert offsets.offsets[0].offset is None


@pytest.mark.parametrize(
    ("shape", "data"),
    [
        (answers.VALIDATE, {"status": "ok"}),  # a validate that validated nothing is not "valid"
        (answers.VALIDATE, {"error_count": -1, "configs": []}),
        (answers.STATUS, {"name": "c", "connector": {}}),
        (answers.STATUS, {"name": "c", "connector": {"state": "RUNNING"}, "tasks": [{"state": "RUNNING"}]}),
        (answers.OFFSETS, {"items": []}),
        (answers.CONFIG, {"a": {"nested": 1}}),
        (answers.NAMES, {"connectors": []}),
        (answers.MESSAGE, {}),
    ],
)
def test_wrong_shapes_are_refused(shape: Any, data: Any) -> None:
    with pytest.raises(answers.WrongShape):
        answers.parse(shape, data)


def test_wrong_shape_never_quotes_the_answer() -> None:
    secret = "hunter2-" + "x" * 100
    with pytest.raises(answers.WrongShape) as refused:
        answers.parse(answers.CONFIG, {secret: {"password": secret}})
    assert "hunter2" not in str(refused.value)
    assert "password" not in str(refused.value)
    assert str(refused.value) == "*: string type"
    with pytest.raises(answers.WrongShape) as refused:
        answers.parse(answers.STATUS, {"name": "c", "connector": {"state": "R"}, "tasks": [{"state": secret}]})
    assert str(refused.value) == "tasks.0.id: missing"
    assert len(str(refused.value)) < 300


def test_check_policy_allows_defaults_and_listed_patterns_only() -> None:
    from connectops.models.checks import SparkCheckDefaults
    from connectops.planning.checks import BUILTIN_DEFAULTS, CheckPolicy, not_allowed

    none = CheckPolicy()
    assert not_allowed(None, BUILTIN_DEFAULTS, none) == []
    assert (
        not_allowed(SparkCheckDefaults(image=BUILTIN_DEFAULTS.image, spark_version="9"), BUILTIN_DEFAULTS, none) == []
    )
    asked = SparkCheckDefaults(image="registry.example/data/check:2", service_account="data-spark")
    refused = not_allowed(asked, BUILTIN_DEFAULTS, none)
    assert len(refused) == 2
    assert "sparkCheck.allowed.images" in refused[0]
    assert "sparkCheck.allowed.serviceAccounts" in refused[1]
    policy = CheckPolicy(images=("registry.example/data/*",), service_accounts=("data-*",))
    assert not_allowed(asked, BUILTIN_DEFAULTS, policy) == []
    assert not_allowed(SparkCheckDefaults(image="registry.example/Data/x"), BUILTIN_DEFAULTS, policy)  # case matters
    url = SparkCheckDefaults(main_application_file="https://attacker.example/x.py")
    assert "mainApplicationFile" in not_allowed(url, BUILTIN_DEFAULTS, policy)[0]


#: (shape, answer) pairs of both kinds above: the raw body's parse must agree with the tree's
_BOTH_KINDS: list[tuple[Any, Any]] = [
    (answers.ROOT, {**ROOT_OK, "extra": 1}),
    (answers.ROOT, {"version": 4, "kafka_cluster_id": "k"}),
    (answers.ROOT, []),
    (answers.STATUS, {"name": "c", "connector": {"state": "RUNNING"}, "tasks": [{"state": "RUNNING"}]}),
    (answers.STATUS, {"name": "c", "connector": {"state": "PAUSED", "worker_id": "w"}, "tasks": []}),
    (answers.OFFSETS, {"offsets": [{"partition": {"f": "x"}, "offset": None}]}),
    (answers.OFFSETS, {"items": []}),
    (answers.CONFIG, {"a": "1", "b": "2"}),
    (answers.CONFIG, {"a": {"nested": 1}}),
    (
        answers.EXPANDED,
        {
            "c": {
                "info": {"name": "c", "config": {"k": "v"}, "tasks": [], "type": "source"},
                "status": {"name": "c", "connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": []},
            }
        },
    ),
    (answers.EXPANDED, ["c"]),  # a worker before 2.3 ignores expand and lists names
    (answers.NAMES, ["a", "b"]),
    (answers.MESSAGE, {}),
]


@pytest.mark.parametrize(("shape", "data"), _BOTH_KINDS)
def test_the_raw_body_parses_as_its_json_tree_does(shape: Any, data: Any) -> None:
    body = json.dumps(data).encode()
    outcomes = []
    for read in (lambda: answers.parse(shape, data), lambda: answers.parse_json(shape, body)):
        try:
            outcomes.append(("parsed", read()))
        except answers.WrongShape as exc:
            outcomes.append(("refused", str(exc)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    "body",
    [b"<html><body>Welcome to nginx! hunter2</body></html>", b'{"a": "hunter2"', b"\xff\xfe{}", b"hunter2"],
)
def test_a_body_that_is_not_json_is_told_apart_and_never_quoted(body: bytes) -> None:
    with pytest.raises(answers.NotJson) as refused:
        answers.parse_json(answers.CONFIG, body)
    assert "hunter2" not in str(refused.value)


def test_a_wrong_shape_read_from_the_raw_body_never_quotes_it() -> None:
    secret = "hunter2-" + "x" * 100
    with pytest.raises(answers.WrongShape) as refused:
        answers.parse_json(answers.CONFIG, json.dumps({secret: {"password": secret}}).encode())
    assert str(refused.value) == "*: string type"


def test_validate_answer_with_an_unvalidated_key_parses() -> None:
    """Connect writes ``"value": null`` for a key the connector defines but its validate() leaves
    out (Debezium 3.6's PostgresConnector does, for one internal key): no error there, and the
    answer is still Connect's."""
    validate = answers.parse(
        answers.VALIDATE,
        {
            "name": "io.debezium.connector.postgresql.PostgresConnector",
            "error_count": 0,
            "groups": [],
            "configs": [
                {"definition": {"name": "internal.legacy.snapshot.max.threads"}, "value": None},
                {"definition": {}, "value": {"name": "slot.name", "errors": []}},
            ],
        },
    )
    assert validate.configs[0].value is None
    assert validate.error_count == 0
