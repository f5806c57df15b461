"""connect_answers.parse_expanded against the whole parse it replaces (pydantic's own reading of
the body), on well-formed listings and on every malformed body the whole parse refuses."""

from __future__ import annotations

import json

import pytest

from connectops.adapters import connect_answers as answers


def _entry(name: str) -> dict[str, object]:
    return {
        "info": {"name": name, "config": {"connector.class": "X", "name": name}, "tasks": [], "type": "source"},
        "status": {"name": name, "connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": [], "type": "source"},
    }


def _body(names: list[str], *, indent: int | None = None) -> bytes:
    return json.dumps({n: _entry(n) for n in names}, indent=indent).encode()


@pytest.mark.parametrize("indent", [None, 2])
def test_it_reads_what_the_whole_parse_reads_and_keeps_only_what_it_is_asked(indent: int | None) -> None:
    body = _body(["a", "b\\u00e9", "c,d"], indent=indent)
    whole = answers.EXPANDED.validate_json(body)
    assert answers.parse_expanded(body, lambda _: True) == whole
    assert answers.parse_expanded(body, lambda n: n == "c,d") == {"c,d": whole["c,d"]}
    assert answers.parse_expanded(b" {} \n", lambda _: True) == {}


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b'{"a": ',
        b'{"a": {}} trailing',
        b'{"a" {}}',
        b'{"a": {} "b": {}}',
        b"{,}",
        b'{"a": {},}',
        '{"\u00e9": 1}'.encode("latin-1"),
    ],
)
def test_a_body_that_is_not_json_is_not_json(body: bytes) -> None:
    with pytest.raises(answers.NotJson):
        answers.parse_expanded(body, lambda _: True)


def test_a_list_of_names_or_a_wrong_entry_is_the_wrong_shape_even_when_not_kept() -> None:
    with pytest.raises(answers.WrongShape):
        answers.parse_expanded(b'["a", "b"]', lambda _: True)  # a worker before 2.3
    with pytest.raises(answers.WrongShape):
        answers.parse_expanded(b'{"a": {"info": 1}}', lambda _: True)
    # an entry nobody keeps is never turned into a model: its shape does not matter here
    assert answers.parse_expanded(b'{"a": {"info": 1}}', lambda _: False) == {}
