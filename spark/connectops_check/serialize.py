"""The verdict document's one serializer, :func:`to_json`, and the marks its parts carry.

The rules: a :class:`Doc` dataclass becomes an object whose keys are its fields' names in
camelCase (a field may name its own key with :func:`key`, as ``time_lag_s`` -> ``timeLagSeconds``);
a field marked ``OMIT_NONE`` is left out while None, one marked ``EMPTY_NONE`` is ``{}`` while
None. Any other dataclass (the pressure figures, the task figures) keeps its field names, as
``dataclasses.asdict`` does; an enum becomes its value; lists, tuples and dicts are walked.
Keys come in the order the fields are declared.

Why a module of its own: the metric engines' results (``results``) are parts of the document
too, and ``document`` builds on them.
"""

from __future__ import annotations

import dataclasses
import re
from enum import Enum
from typing import Any, Final, cast

_KEY, _OMIT_NONE, _EMPTY_NONE = "json_key", "json_omit_none", "json_empty_none"
_CAMEL = re.compile(r"_([a-z0-9])")

OMIT_NONE: Final = {_OMIT_NONE: True}
EMPTY_NONE: Final = {_EMPTY_NONE: True}


def key(name: str) -> dict[str, Any]:
    """Field metadata: the field's JSON key is ``name``."""
    return {_KEY: name}


class Doc:
    """A part of the verdict document: its keys are camelCase."""

    __slots__ = ()


def _camel(name: str) -> str:
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def to_json(value: Any) -> Any:
    """The JSON value (dicts, lists, text, numbers, booleans, None) of a document or its part."""
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        camel = isinstance(value, Doc)
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is None and f.metadata.get(_OMIT_NONE):
                continue
            name = f.metadata.get(_KEY) or (_camel(f.name) if camel else f.name)
            out[name] = {} if item is None and f.metadata.get(_EMPTY_NONE) else to_json(item)
        return out
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def document(value: Doc) -> dict[str, Any]:
    """A whole document's JSON object (a ``Doc`` always serializes to one)."""
    return cast(dict[str, Any], to_json(value))
