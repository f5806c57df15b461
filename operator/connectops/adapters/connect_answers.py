"""What Kafka Connect documents each REST endpoint to answer, as models.

Every answer is parsed into one of these before anything reads it, so an answer of another shape
(another service behind a ``restUrl``, a proxy's page, a truncated body) is an error naming the
endpoint and the field, never a default that reads as success: an object without ``version``
is not a worker, and a validate answer without ``error_count`` has not validated anything.
Only what the operator reads is declared; Connect's other fields are ignored, so newer workers
that add fields still parse. Shapes: Connect's REST API reference and ``shared/reference``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

_M = TypeVar("_M")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RootAnswer(_Answer):
    """``GET /``."""

    version: str = Field(min_length=1, max_length=200)
    commit: str | None = Field(default=None, max_length=200)
    kafka_cluster_id: str = Field(min_length=1, max_length=200)


class PluginAnswer(_Answer):
    """One item of ``GET /connector-plugins`` (one per installed version since KIP-891)."""

    class_: str = Field(alias="class", min_length=1)
    type: str | None = None
    version: str | None = None


class _ConfigValue(_Answer):
    name: str
    errors: list[str] = Field(default_factory=list)


class _ConfigInfo(_Answer):
    # null for a key the connector's ConfigDef defines but its validate() did not return
    # (Debezium 3.6's PostgresConnector: internal.legacy.snapshot.max.threads): Connect then
    # writes "value": null, which validated nothing and so holds no error
    value: _ConfigValue | None = None


class ValidateAnswer(_Answer):
    """``PUT /connector-plugins/{class}/config/validate``."""

    error_count: int = Field(ge=0)
    configs: list[_ConfigInfo]


class ConnectorInfoAnswer(_Answer):
    """``GET /connectors/{name}``."""

    name: str
    config: dict[str, str]
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    type: str | None = None


#: what is kept of a trace: its first line, at most this many characters
TRACE_KEPT = 500


def first_line(trace: object) -> str | None:
    """A trace's first line (``TRACE_KEPT`` characters at most); None for none or a blank one."""
    if not trace:
        return None
    lines = str(trace).strip().splitlines()
    return lines[0][:TRACE_KEPT] if lines else None


class _StateAnswer(_Answer):
    state: str = Field(min_length=1)
    worker_id: str | None = None
    #: its first line only (first_line), cut as the answer is read, which is all the operator
    #: keeps: parsed whole, a status of thousands of failed tasks with long traces held every
    #: trace at once, and a few of them read together beside a large listing took the operator
    #: past its memory bound (benchmarks/README.md, start_memory_bench.py)
    trace: str | None = None
    #: the running plugin's version (Connect 4.1+, KIP-891); absent when it reports none
    version: str | None = None

    @field_validator("trace", mode="before")
    @classmethod
    def _first_line_only(cls, value: object) -> object:
        # anything but a string is left for the type check to refuse (WrongShape)
        return first_line(value) if isinstance(value, str) else value


class _TaskStateAnswer(_StateAnswer):
    id: int = Field(ge=0)


class StatusAnswer(_Answer):
    """``GET /connectors/{name}/status``."""

    name: str
    connector: _StateAnswer
    tasks: list[_TaskStateAnswer] = Field(default_factory=list)
    type: str | None = None


class ExpandedAnswer(_Answer):
    """One value of ``GET /connectors?expand=status&expand=info`` (KIP-465, Connect 2.3+): the
    same objects as ``GET /connectors/{name}`` and ``GET /connectors/{name}/status``. A worker
    leaves out a connector it cannot describe at that moment (removed meanwhile)."""

    info: ConnectorInfoAnswer
    status: StatusAnswer


class _OffsetAnswer(_Answer):
    partition: dict[str, Any]
    offset: dict[str, Any] | None


class OffsetsAnswer(_Answer):
    """``GET /connectors/{name}/offsets`` (KIP-875)."""

    offsets: list[_OffsetAnswer]


class MessageAnswer(_Answer):
    """``PATCH`` / ``DELETE /connectors/{name}/offsets``: Connect's sentence about what it did."""

    message: str


# built once: a TypeAdapter compiles its validator
ROOT = TypeAdapter(RootAnswer)
PLUGINS = TypeAdapter(list[PluginAnswer])
VALIDATE = TypeAdapter(ValidateAnswer)
NAMES = TypeAdapter(list[str])
CONNECTOR = TypeAdapter(ConnectorInfoAnswer)
CONFIG = TypeAdapter(dict[str, str])
STATUS = TypeAdapter(StatusAnswer)
EXPANDED = TypeAdapter(dict[str, ExpandedAnswer])
EXPANDED_ITEM = TypeAdapter(ExpandedAnswer)
OFFSETS = TypeAdapter(OffsetsAnswer)
MESSAGE = TypeAdapter(MessageAnswer)


class WrongShape(ValueError):
    """The answer is not of the documented shape; ``str()`` names fields, never values."""


class NotJson(ValueError):
    """The body is not JSON at all (nor UTF-8)."""


def parse_json(adapter: TypeAdapter[_M], body: bytes) -> _M:
    """The raw body as ``adapter``'s type: :class:`NotJson`, or :class:`WrongShape` as
    :func:`parse` says.

    pydantic reads the JSON itself, without Python's json tree first: the expanded listing of
    10,000 connectors (the largest answer) needed 42 MiB at its height decoded by ``json`` and then
    validated, 27 MiB read this way (tracemalloc, the listing's shape)."""
    try:
        return adapter.validate_json(body)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors(include_input=False, include_url=False)):
            raise NotJson("not JSON") from None
        raise _wrong_shape(exc) from None


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, at: int) -> int:
    """The first index from ``at`` that is not JSON whitespace."""
    space = _SPACE.match(text, at)
    return at if space is None else space.end()


def parse_expanded(body: bytes, keep: Callable[[str], bool]) -> dict[str, ExpandedAnswer]:
    """The expanded listing's entries that ``keep`` names, each parsed on its own as the whole
    body is read: a worker shared by many teams lists every team's connectors, and parsed whole
    (models for all of them, then filtered) a 30 MiB listing of 50,000 took 141 MiB more at its
    height; here what is not kept is decoded one entry at a time and dropped. An answer that is
    not one JSON object of entries is :class:`NotJson`, or :class:`WrongShape` as a whole parse
    says (a worker before 2.3 answers a list of names)."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise NotJson("not UTF-8") from None
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        return parse_json(EXPANDED, body)
    kept: dict[str, Any] = {}
    at = _skip(text, at + 1)
    try:
        if text[at : at + 1] == "}":
            at += 1
        else:
            while True:
                if text[at : at + 1] != '"':
                    raise NotJson("not JSON")
                key, at = _DECODER.raw_decode(text, at)
                at = _skip(text, at)
                if text[at : at + 1] != ":":
                    raise NotJson("not JSON")
                value, at = _DECODER.raw_decode(text, _skip(text, at + 1))
                if keep(key):
                    kept[key] = value
                at = _skip(text, at)
                sep, at = text[at : at + 1], at + 1
                if sep == "}":
                    break
                if sep != ",":
                    raise NotJson("not JSON")
                at = _skip(text, at)
    except json.JSONDecodeError:
        raise NotJson("not JSON") from None
    if _skip(text, at) != len(text):
        raise NotJson("not JSON")
    # validated once the whole body is known to be JSON, as the whole parse would say
    return {key: parse(EXPANDED_ITEM, value) for key, value in kept.items()}


def parse(adapter: TypeAdapter[_M], data: Any) -> _M:
    """``data`` as ``adapter``'s type, or :class:`WrongShape` naming the first fields that differ.

    pydantic's own message quotes the input, which here is whatever the other side sent (a
    secret-looking body, megabytes): only the location and the kind of mismatch are kept.
    """
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise _wrong_shape(exc) from None


def _wrong_shape(exc: ValidationError) -> WrongShape:
    problems = []
    for error in exc.errors(include_input=False, include_url=False)[:3]:
        # a location may hold the other side's own keys: only our field names and indexes are shown
        where = ".".join(_shown(part) for part in error["loc"]) or "the answer"
        problems.append(f"{where}: {error['type'].replace('_', ' ')}")
    return WrongShape("; ".join(problems))


def _shown(part: str | int) -> str:
    return str(part) if isinstance(part, int) or part in _FIELD_NAMES else "*"


_FIELD_NAMES = frozenset(
    name
    for model in (
        RootAnswer,
        PluginAnswer,
        _ConfigValue,
        _ConfigInfo,
        ValidateAnswer,
        ConnectorInfoAnswer,
        _StateAnswer,
        _TaskStateAnswer,
        StatusAnswer,
        ExpandedAnswer,
        _OffsetAnswer,
        OffsetsAnswer,
        MessageAnswer,
    )
    for field_name, info in model.model_fields.items()
    for name in (field_name, info.alias)
    if name
)
