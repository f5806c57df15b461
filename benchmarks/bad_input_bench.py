"""Benchmark: schema-generated bad input against the real API server and the real operator.

What is measured: Connector and OffsetReset specs are generated with hypothesis from the CRD
schemas in ``crds/`` (OpenAPI 3.0 converted to JSON Schema for hypothesis-jsonschema), biased
towards specs plausible enough to reach the operator (``clusterRef`` mostly the ConnectCluster
``main``, ``connectorRef`` mostly existing Connectors, real plugin classes half of the time,
small sizes); a share of them is then mutated into schema-INVALID variants (wrong types, missing
required keys, out-of-range / enum / pattern violations, ints beyond int64, ``null`` where not
nullable, ``""`` where the 1.20 API server mis-validates it, kubernetes#99804). Every object is
created in one namespace watched by one ``connectops run`` process, against the test
environment's kube-apiserver (1.37), an Apache Kafka broker and one Kafka Connect worker
(``benchmarks/harness.py``). Per object:

* rejected by the API server: explained when the answer is a 4xx with a message;
* accepted: polled (``--timeout``, default 30 s) until the operator has explained it in status:
  a Connector has ``observedGeneration == generation`` and a Valid/Ready/Synced condition of that
  generation with a reason (and a message unless True); an OffsetReset is Succeeded/Planned, or
  Failed with a message, or (at the deadline) Running with steps done or in flight where a retried
  step says why it failed. An operator-side rejection (Valid/Ready False, Failed) must also have
  an Event on the object, and a False condition whose message names no cause ("validate config:
  HTTP 400: ") does not count. Anything else is *unexplained* and must be 0;
* a Connector that was never Valid must not exist in Kafka Connect (nothing half-applied), and
  every deleted Connector must be gone from Connect (the finalizer did its job) within
  ``--delete-timeout``;
* objects are deleted as they finish (an OffsetReset that is visibly working first gets
  ``--drain-timeout`` to end), so load stays bounded.

At the end the operator logs are scanned for *unhandled exceptions*: kopf's "failed with an
exception" (an exception escaped a handler), the product's catch-all mapping "failed temporarily:
unexpected <Type>" (``errors.as_kopf_error`` for an exception type it does not map; the traceback
is dropped there), any other traceback, asyncio's "Task exception was never retrieved"; the
operator's own mapped TemporaryError/PermanentError lines (Connect/Kubernetes errors, invalid
specs) are counted separately as handled. The text log names no object, so lines are given a
kind by handler name and objects by the message kopf keeps in its progress annotation. The
operator process must still be alive. The canary scan (``Bench.hygiene()``) runs over the logs,
the remaining objects and Events; every object's final status and Events are checked for the
canary before it is deleted (20% of the Connectors read the canary Secret through configFrom).

Reproducible: hypothesis draws the values (schema-valid specs from hypothesis-jsonschema, free
text for names and timestamps) up front, in a ``@given`` test run programmatically with
``@seed(--seed)``, ``database=None`` and only the generate phase, whose body just collects the
draws; the biasing and mutation decisions use ``random.Random`` seeded with (seed, kind, index).
The digest of the cases is in the result file: the same seed, example count, hypothesis version
and this file (hypothesis also draws string constants from the code under test) give the same
cases. ``--generate-only`` prints them without starting anything.

    .venv/bin/python benchmarks/bad_input_bench.py                 # 200 objects (100 per kind)
    .venv/bin/python benchmarks/bad_input_bench.py --smoke         # 20 objects
    .venv/bin/python benchmarks/bad_input_bench.py --examples 400 --seed 7 --invalid-ratio 0.4
    .venv/bin/python benchmarks/bad_input_bench.py --generate-only # print the cases, no servers

Results go to ``benchmarks/results/bad_input.json`` (every case: spec, mutation, outcome,
conditions, Event reasons, kopf's stored handler errors; unhandled log lines grouped by message
with the objects that hit them). ``main`` returns 1 if anything is unexplained, any exception was
unhandled, the operator died, a Connector was half-applied or left behind in Connect, a deletion
got stuck, or the canary leaked.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import hypothesis.internal.conjecture.providers as hypothesis_providers
import hypothesis.internal.conjecture.utils as conjecture_utils
import hypothesis_jsonschema._from_schema as hjs_impl
import yaml
from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.internal.constants_ast import Constants
from hypothesis_jsonschema import from_schema
from kubernetes.client.exceptions import ApiException

from harness import GROUP, ROOT, VERSION, Bench, bench_env, log, summary, table, write_result

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
MM2_SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
MM2_CHECKPOINT = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
REAL_CLASSES = (SOURCE, SINK, MM2_SOURCE, MM2_CHECKPOINT)

# Placeholders filled in when a case is applied: generation happens before the servers exist,
# and must not depend on the run's temp directory (or the digest would change every run).
NAME = "@NAME@"
FILES = "@FILES@"

# Objects the generated OffsetResets point at. base-invalid is a Connector the API server
# accepts and the operator reports InvalidSpec on (an owned key in config): plausible input.
BASE_SOURCE, BASE_SINK, BASE_INVALID = "base-source", "base-sink", "base-invalid"
BASE_TOPIC = "bi-base-topic"
MISSING_CONNECTOR = "no-such-connector"
MISSING_CLUSTER = "no-such-cluster"

# Keys a Secret value may plausibly be used for; several of them make Connect's validate answer
# echo the value back ("Invalid value canary-… for configuration …"): the redaction test.
SECRET_KEYS = (
    "topic",
    "topics",
    "key.converter",
    "value.converter",
    "errors.tolerance",
    "batch.size",
    "transforms",
    "bench.token",
)
# Keys the model rejects in spec.config (owned by dedicated fields or belonging to overrides).
OWNED_KEYS = ("name", "connector.class", "tasks.max", "producer.override.acks", "consumer.override.group.id")

PLURALS = {"Connector": "connectors", "OffsetReset": "offsetresets"}
PREFIX = {"Connector": "c", "OffsetReset": "r"}
DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "bad_input.json"
JsonPath = tuple[str | int, ...]


# -- hypothesis-jsonschema on this hypothesis ---------------------------------------------------


class _LegacyMany:
    """``many.more()`` on top of hypothesis >= 6.1xx's context-manager ``many``.

    hypothesis-jsonschema 0.23.1 (the latest release) drives object generation with the old
    ``while elements.more():`` protocol, which the installed hypothesis no longer has; without
    this adapter every object schema fails with ``AttributeError: 'many' object has no attribute
    'more'``. Patched into hypothesis-jsonschema's module for this process only.
    """

    def __init__(self, data: Any, **kwargs: Any) -> None:
        self._many = conjecture_utils.many(data, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)

    def more(self) -> bool:
        try:
            next(self._elements)
        except StopIteration:
            self._many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


class _ConjectureUtilsShim:
    many = _LegacyMany


if not hasattr(conjecture_utils.many, "more"):
    hjs_impl.cu = _ConjectureUtilsShim  # type: ignore[assignment,attr-defined]

# hypothesis mixes in string and number constants harvested from every *local* module loaded
# (the operator's code, the tests, this file): any edit anywhere in the repository would change
# the generated cases. Reproducibility wins: only its built-in constants are used here.
hypothesis_providers._get_local_constants = Constants


# -- CRD schema -> JSON Schema -------------------------------------------------------------------


def crd_spec_schema(plural: str) -> dict[str, Any]:
    """``spec``'s openAPIV3Schema of one CRD in crds/."""
    (path,) = sorted((ROOT / "crds").glob(f"{GROUP}_{plural}.yaml"))
    crd = yaml.safe_load(path.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == VERSION)
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _types(node: dict[str, Any]) -> list[str]:
    t = node.get("type")
    return list(t) if isinstance(t, list) else [t] if t else []


def openapi_to_jsonschema(node: dict[str, Any], *, bias: bool) -> dict[str, Any]:
    """Structural OpenAPI 3.0 (Kubernetes flavour) -> JSON Schema for hypothesis-jsonschema.

    ``nullable`` becomes a type union with null, ``x-kubernetes-int-or-string`` integer|string,
    ``x-kubernetes-preserve-unknown-fields`` an open object, other ``x-kubernetes-*`` keys are
    dropped, OpenAPI 3.0's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become numbers, and
    objects with ``properties`` are closed (the API server prunes unknown fields anyway, so
    generating them would only test pruning). With ``bias`` the result is narrowed, never
    widened: strings non-empty (kubernetes#99804 makes the 1.20 server reject "" anywhere; the
    mutations test that on purpose) and short, numbers <= 1e6, maps and lists of 3 entries at
    most, so most draws stay valid, small and cheap to apply.
    """
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("description", "nullable", "default"):
            continue
        if key == "properties":
            out[key] = {k: openapi_to_jsonschema(v, bias=bias) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = openapi_to_jsonschema(value, bias=bias)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value and bound in node:
                out[key] = node[bound]
        else:
            out[key] = copy.deepcopy(value)
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        bound = "minimum" if key == "exclusiveMinimum" else "maximum"
        if isinstance(out.get(key), int | float) and bound in out:
            del out[bound]
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("type", "object")
    elif "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    types = _types(out)
    if bias:
        if "string" in types and "enum" not in out and "pattern" not in out:
            out["minLength"] = max(1, int(out.get("minLength", 0)))
            out["maxLength"] = min(20, int(out.get("maxLength", 20)))
        if ("integer" in types or "number" in types) and "maximum" not in out:
            out["maximum"] = 10**6
        if "object" in types and "properties" not in out:
            out["maxProperties"] = min(3, int(out.get("maxProperties", 3)))
        if "array" in types:
            out["maxItems"] = min(3, int(out.get("maxItems", 3)))
    if node.get("nullable") and types and "null" not in types:
        out["type"] = [*types, "null"]
    return out


# -- schema-invalid mutations --------------------------------------------------------------------

_MISSING = object()


def _child(node: dict[str, Any], key: str | int) -> dict[str, Any] | None:
    if isinstance(key, int):
        items = node.get("items")
        return items if isinstance(items, dict) else None
    props = node.get("properties") or {}
    if key in props:
        sub: dict[str, Any] = props[key]
        return sub
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def schema_sites(
    value: Any, node: dict[str, Any], path: JsonPath = ()
) -> Iterator[tuple[JsonPath, dict[str, Any], Any]]:
    """Every schema position whose parent exists in ``value``: (path, schema, value or _MISSING)."""
    yield path, node, value
    if isinstance(value, dict):
        props = node.get("properties") or {}
        for key, sub in props.items():
            if key in value:
                yield from schema_sites(value[key], sub, (*path, key))
            else:
                yield (*path, key), sub, _MISSING
        for key in value:
            sub2 = _child(node, key)
            if key not in props and sub2 is not None:
                yield from schema_sites(value[key], sub2, (*path, key))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            yield from schema_sites(item, node["items"], (*path, i))


def bad_values(node: dict[str, Any]) -> list[tuple[str, Any]]:
    """Values this schema position must refuse, labelled by the kind of mistake."""
    out: list[tuple[str, Any]] = []
    if node.get("x-kubernetes-int-or-string"):
        return [("wrong-type", {"a": 1}), ("wrong-type", 1.5), ("wrong-type", True)]
    types = _types(node)
    if "object" in types and node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        out += [("wrong-type", "x"), ("wrong-type", [1])]
    elif "string" in types:
        out += [("wrong-type", 7), ("wrong-type", ["x"])]
        if "enum" in node:
            out.append(("out-of-range", "Bogus"))
        if "pattern" in node:
            out.append(("out-of-range", "no match!"))
        if node.get("minLength", 0) >= 1:
            out.append(("out-of-range", ""))
        else:
            out.append(("empty-string", ""))
    elif "integer" in types:
        out += [("wrong-type", "12"), ("wrong-type", 1.5), ("out-of-range", 2**64)]
        if "minimum" in node:
            out.append(("out-of-range", node["minimum"] - 1))
        if "maximum" in node:
            out.append(("out-of-range", node["maximum"] + 1))
    elif "number" in types:
        out.append(("wrong-type", "1.0"))
        if "minimum" in node:
            out.append(("out-of-range", node["minimum"] - 0.5))
        if "maximum" in node:
            out.append(("out-of-range", node["maximum"] + 0.5))
    elif "boolean" in types:
        out += [("wrong-type", "true"), ("wrong-type", 1)]
    elif "object" in types:
        out += [("wrong-type", ["x"]), ("wrong-type", "x")]
    elif "array" in types:
        out += [("wrong-type", {"a": 1}), ("wrong-type", "x")]
    if not node.get("nullable"):
        out.append(("null", None))
    return out


def set_path(doc: Any, path: JsonPath, value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    if value is _MISSING:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


def dotted(path: JsonPath) -> str:
    return "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def mutate(spec: dict[str, Any], schema: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """One schema violation applied to a valid draw: (spec, description)."""
    candidates: list[tuple[str, JsonPath, Any]] = []
    for path, node, value in schema_sites(spec, schema):
        if isinstance(value, dict):
            for req in node.get("required") or []:
                if req in value:
                    candidates.append(("missing-required", (*path, req), _MISSING))
        if path:
            candidates += [(kind, path, bad) for kind, bad in bad_values(node)]
    kind, path, bad = rng.choice(candidates)
    out = copy.deepcopy(spec)
    set_path(out, path, bad)
    shown = "(removed)" if bad is _MISSING else json.dumps(bad)
    return out, f"{kind} {dotted(path)} = {shown}"


# -- biased cases --------------------------------------------------------------------------------
#
# hypothesis draws the values (a schema-valid spec from hypothesis-jsonschema, plus free text for
# names and timestamps); a random.Random seeded with (seed, kind, index) makes the biasing
# decisions. Weighted choices drawn through hypothesis are far from the weights asked for
# (it favours its "simplest" values: the first option and 0.0), which had 72% of the objects
# mutated instead of 25%; a seeded Random gives the intended mix and stays reproducible.


def _pick(rng: random.Random, weighted: list[tuple[int, Any]]) -> Any:
    return rng.choices([v for _, v in weighted], weights=[w for w, _ in weighted])[0]


# Connector names Connect may choke on: the model refuses / \ % . .., Jetty 12 refuses ASCII
# control characters in a path segment; the rest of the alphabet is ordinary text.
_NAME_ALPHABET = st.one_of(
    st.sampled_from(list(" ;?#&+=:,.'\"!~*()[]{}<>|^`$@\\/%\t\x01\x7f")),
    st.characters(codec="utf-8"),  # utf-8: no lone surrogates (the API server could not take them)
)


@dataclass
class Case:
    kind: str
    name: str
    spec: dict[str, Any]
    mutation: str | None


def raw_draws(schema: dict[str, Any]) -> st.SearchStrategy[tuple[dict[str, Any], str, str]]:
    """(schema-valid spec, name suffix text, free text) per example."""
    return st.tuples(
        from_schema(openapi_to_jsonschema(schema, bias=True)),
        st.text(_NAME_ALPHABET, min_size=1, max_size=6),
        st.text(min_size=1, max_size=12),
    )


def bias_connector(spec: dict[str, Any], suffix: str, rng: random.Random) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    spec["clusterRef"] = {"name": _pick(rng, [(85, "main"), (5, MISSING_CLUSTER), (10, spec["clusterRef"]["name"])])}
    klass = _pick(rng, [(30, SOURCE), (25, SINK), (5, MM2_SOURCE), (5, MM2_CHECKPOINT), (35, spec["class"])])
    spec["class"] = klass
    connector_name = _pick(rng, [(55, "none"), (30, "suffix"), (5, "dots"), (10, "raw")])
    if connector_name == "none":
        spec.pop("connectorName", None)
    elif connector_name == "suffix":
        spec["connectorName"] = NAME + suffix
    elif connector_name == "raw":
        spec["connectorName"] = NAME + str(spec.get("connectorName") or "x")
    else:
        spec["connectorName"] = rng.choice([".", ".."])
    config = spec.setdefault("config", {})
    if klass in (SOURCE, SINK):
        # never let a generated path reach the file connectors: they read and write it
        config.pop("file", None)
        if rng.random() < 0.7:
            config["file"] = f"{FILES}/{NAME}.{'in' if klass == SOURCE else 'out'}"
        if rng.random() < 0.7:
            config["topic" if klass == SOURCE else "topics"] = f"bi-{NAME}"
    if klass in REAL_CLASSES and (klass != SOURCE or rng.random() < 0.9):
        # a sink or MM2 connector runs tasks.max tasks: a generated 10^6 would take the one
        # shared worker down, which is a capacity test, not a bad-input one
        spec["tasksMax"] = rng.randint(1, 3)
    if rng.random() < 0.12:
        config[rng.choice(OWNED_KEYS)] = rng.choice(["x", 1])
    secret = _pick(rng, [(65, "none"), (20, "canary"), (5, "missing"), (10, "raw")])
    if secret == "none":
        spec.pop("configFrom", None)
    elif secret == "canary":
        key = rng.choice(SECRET_KEYS)
        config.pop(key, None)
        spec["configFrom"] = {key: {"secretKeyRef": {"name": "connector-secret", "key": "token"}}}
    elif secret == "missing":
        ref = rng.choice([("connector-secret", "nope"), ("no-such-secret", "token")])
        spec["configFrom"] = {"bench.missing": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}}
    for key in ("producerOverrides", "consumerOverrides", "adminOverrides", "autoRestart", "check"):
        if key in spec and rng.random() < 0.6:
            del spec[key]
    if not config:
        spec.pop("config", None)
    return spec


def bias_reset(spec: dict[str, Any], text: str, rng: random.Random) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    target = _pick(rng, [(55, "ref"), (20, "name"), (10, "mm2"), (15, "raw")])
    if target == "ref":
        name = _pick(rng, [(40, BASE_SOURCE), (40, BASE_SINK), (10, BASE_INVALID), (10, MISSING_CONNECTOR)])
        spec["connectorRef"] = {"name": name}
        if rng.random() < 0.9:
            for key in ("connectorName", "clusterRef", "mirrorMaker2"):
                spec.pop(key, None)
    elif target == "name":
        spec["connectorName"] = _pick(
            rng, [(40, BASE_SOURCE), (40, BASE_SINK), (20, spec.get("connectorName") or text)]
        )
        spec["clusterRef"] = {"name": _pick(rng, [(9, "main"), (1, MISSING_CLUSTER)])}
        spec.pop("connectorRef", None)
        spec.pop("mirrorMaker2", None)
    elif target == "mm2":
        spec.pop("connectorRef", None)
        spec.pop("connectorName", None)
        if not spec.get("mirrorMaker2"):
            spec["mirrorMaker2"] = {"sourceConnector": BASE_SOURCE, "sourceAlias": "a", "targetAlias": "b"}
        spec["clusterRef"] = {"name": "main"}
    if rng.random() < 0.5:
        # hypothesis mostly leaves optional keys out: half of the resets get an explicit action
        spec["action"] = rng.choice(["reset", "alter", "toEarliest", "toLatest", "toTimestamp", "restore"])
    action = spec.get("action", "reset")
    if action == "alter" and rng.random() < 0.7:
        # entries shaped like the base connectors' own partitions: alter can really run
        spec["offsets"] = rng.choice(
            [
                [{"partition": {"filename": f"{FILES}/{BASE_SOURCE}.in"}, "offset": {"position": 3}}],
                [{"partition": {"kafka_topic": BASE_TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 1}}],
                [{"partition": {"kafka_topic": BASE_TOPIC, "kafka_partition": 0}, "offset": None}],
            ]
        )
    elif action != "alter" and rng.random() < 0.8:
        spec.pop("offsets", None)
    if action == "toTimestamp" or "timestamp" in spec:
        raw = spec.get("timestamp")
        spec["timestamp"] = _pick(
            rng, [(3, "2024-01-01T00:00:00Z"), (2, "1717200000000"), (5, raw if isinstance(raw, str) else text)]
        )
    if "topics" in spec and rng.random() < 0.5:
        spec["topics"] = [BASE_TOPIC]
    return spec


def collect(strategy: st.SearchStrategy[Any], count: int, start_seed: int) -> list[Any]:
    """``count`` draws of ``strategy``, reproducible from ``start_seed``.

    A ``@given`` test run programmatically: ``@seed`` fixes the PRNG, ``database=None`` keeps
    earlier runs from replaying, only the generate phase runs (no shrinking, no explicit
    examples), and the body only appends, so the same seed gives the same list (for the same
    hypothesis version and the same ``count``: hypothesis spreads its effort over max_examples).
    """
    out: list[Any] = []
    for attempt in range(20):
        need = count - len(out)
        if need <= 0:
            break

        @settings(
            max_examples=need,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
            deadline=None,
            verbosity=Verbosity.quiet,
        )
        @seed(start_seed + attempt)
        @given(strategy)
        def run(item: Any) -> None:
            out.append(item)

        run()
    return out[:count]


def substitute(value: Any, name: str, files: str) -> Any:
    text = json.dumps(value).replace(NAME, name).replace(FILES, files)
    return json.loads(text)


def generate(examples: int, seed_value: int, invalid_ratio: float) -> list[Case]:
    cases: list[Case] = []
    plans: list[tuple[str, str, int, Callable[[dict[str, Any], str, random.Random], dict[str, Any]]]] = [
        ("Connector", "connectors", examples - examples // 2, bias_connector),
        ("OffsetReset", "offsetresets", examples // 2, bias_reset),
    ]
    for kind, plural, count, bias in plans:
        schema = crd_spec_schema(plural)
        for i, (raw, text_a, text_b) in enumerate(collect(raw_draws(schema), count, seed_value)):
            rng = random.Random(f"{seed_value}:{kind}:{i}")
            spec = bias(raw, text_a if kind == "Connector" else text_b, rng)
            mutation: str | None = None
            if rng.random() < invalid_ratio:
                spec, mutation = mutate(spec, schema, rng)
            cases.append(Case(kind, f"{PREFIX[kind]}-{i:04d}", spec, mutation))
    return cases


def digest(cases: list[Case]) -> str:
    return hashlib.sha256(json.dumps([asdict(c) for c in cases], sort_keys=True).encode()).hexdigest()[:16]


# -- applying and judging ------------------------------------------------------------------------

TERMINAL = ("Succeeded", "Failed", "Planned")


@dataclass
class Record:
    kind: str
    name: str
    mutation: str | None
    spec: dict[str, Any]
    api_status: int | None = None
    api_message: str | None = None
    accepted: bool = False
    explained: bool = False
    outcome: str = ""
    why_unexplained: str | None = None
    explain_seconds: float | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    phase: str | None = None
    events: list[str] = field(default_factory=list)
    connector_name: str | None = None
    ever_valid: bool = False
    half_applied: bool = False
    left_in_connect: bool = False
    stuck_deleting: bool = False
    terminal: bool | None = None
    canary_hits: list[str] = field(default_factory=list)
    client_error: str | None = None
    vague: bool = False
    handler_errors: list[str] = field(default_factory=list)


def api_error(exc: ApiException) -> tuple[int, str]:
    try:
        message = str(json.loads(exc.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        message = str(exc.body or exc.reason or "")
    return int(exc.status or 0), message


def _cond(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def connector_explanation(obj: dict[str, Any]) -> tuple[str, bool] | None:
    """(outcome, is_rejection) once the operator has explained this generation, else None."""
    generation = obj["metadata"].get("generation")
    status = obj.get("status") or {}
    if status.get("observedGeneration") != generation:
        return None
    current = [c for c in status.get("conditions") or [] if c.get("observedGeneration") == generation]
    decisive = [
        c
        for c in current
        if c.get("type") in ("Valid", "Ready", "Synced")
        and c.get("reason")
        and c.get("status") in ("True", "False")
        and (c["status"] == "True" or c.get("message"))
    ]
    if not decisive:
        return None
    ready, valid = _cond(status, "Ready"), _cond(status, "Valid")
    if valid is not None and valid["status"] == "False":
        return f"Valid=False {valid['reason']}", True
    if ready is not None:
        rejected = ready["status"] == "False" and ready["reason"] in (
            "InvalidSpec",
            "ReferenceNotFound",
            "ConnectError",
            "ConnectUnavailable",
            "KubernetesError",
            "Unsupported",
            "ConfigInvalid",
        )
        return f"Ready={ready['status']} {ready['reason']}", rejected
    cond = decisive[0]
    return f"{cond['type']}={cond['status']} {cond['reason']}", cond["status"] == "False"


def reset_explanation(obj: dict[str, Any]) -> tuple[str, bool] | None:
    status = obj.get("status") or {}
    phase = status.get("phase")
    cond = _cond(status, "Succeeded")
    if phase in TERMINAL and cond and cond.get("reason") and (phase != "Failed" or cond.get("message")):
        return f"{phase} {cond['reason']}", phase == "Failed"
    # Running counts when visibly at work: a step done or in flight, and a step that is being
    # retried says why (the machine writes "attempt N failed: …"); a step whose attempts climb
    # with no message is failing where the user cannot see it
    steps = status.get("steps") or []
    current = next((s for s in steps if s.get("state") == "Running"), None)
    silent = current is not None and int(current.get("attempts") or 0) > 1 and not current.get("message")
    if phase == "Running" and cond and cond.get("reason") and any(s.get("state") != "Pending" for s in steps):
        return None if silent else (f"Running (step {status.get('currentStep') or '?'})", False)
    # Waiting before the first step (a reference missing or invalid, retried with back-off): the
    # Succeeded condition, Unknown, must name the reason and say what is wrong.
    if phase == "Pending" and cond and cond.get("status") == "Unknown" and cond.get("reason") and cond.get("message"):
        return f"Pending {cond['reason']}", True
    return None


# A message that names no cause: Jetty's empty 400 body for a suspicious path character, say.
VAGUE = re.compile(r"HTTP \d+:?\s*$")


def kopf_messages(obj: dict[str, Any]) -> set[str]:
    """The last failure kopf stored per handler: AnnotationsProgressStorage keeps one JSON record
    per retrying handler in an annotation under connectops.io/, with the failure's ``message``."""
    messages = set()
    for key, value in ((obj.get("metadata") or {}).get("annotations") or {}).items():
        if not key.startswith(f"{GROUP}/"):
            continue
        try:
            record = json.loads(value)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("message"):
            messages.add(str(record["message"]))
    return messages


def connect_names(http: httpx.Client) -> set[str]:
    response = http.get("/connectors")
    response.raise_for_status()
    return {str(n) for n in response.json()}


class Runner:
    """Applies cases to one namespace and judges each one; thread-safe per case."""

    def __init__(self, b: Bench, ns: str, files: Path, args: argparse.Namespace, alive: Callable[[], bool]) -> None:
        self.b = b
        self.ns = ns
        self.files = files
        self.args = args
        self.alive = alive
        self.http = httpx.Client(base_url=b.env.connect.url, timeout=10)
        self.lock = threading.Lock()
        self.done = 0
        #: the first case after which the operator process was found dead (checked per case)
        self.died_after: str | None = None

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            return self.b.get(self.ns, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def events(self, name: str) -> list[Any]:
        items = self.b.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return list(items)

    def run(self, case: Case) -> Record:
        record = Record(case.kind, case.name, case.mutation, case.spec)
        try:
            self._run(case, record)
        except Exception as exc:  # the bench's own failure must not hide the other cases
            record.why_unexplained = record.why_unexplained or f"bench error: {type(exc).__name__}: {exc}"[:500]
        with self.lock:
            if self.died_after is None and not self.alive():
                self.died_after = case.name
                log(f"the operator process exited (noticed after {case.name})")
            self.done += 1
            if self.done % 10 == 0:
                log(f"{self.done} cases done")
        return record

    def _run(self, case: Case, record: Record) -> None:
        plural = PLURALS[case.kind]
        spec = substitute(case.spec, case.name, str(self.files))
        record.spec = spec
        started = time.monotonic()
        try:
            self.b.create(self.ns, plural, case.kind, case.name, spec)
        except ApiException as exc:
            record.api_status, record.api_message = api_error(exc)
            record.explained = 400 <= record.api_status < 500 and bool(record.api_message)
            record.outcome = f"API {record.api_status}"
            if not record.explained:
                record.why_unexplained = f"API server answered {record.api_status} without a usable message"
            return
        except (ValueError, TypeError, UnicodeError) as exc:
            record.client_error = f"{type(exc).__name__}: {exc}"[:300]
            record.outcome = "client error"
            record.explained = True
            return
        record.accepted = True
        judge = connector_explanation if case.kind == "Connector" else reset_explanation
        deadline = started + self.args.timeout
        verdict: tuple[str, bool] | None = None
        obj: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            obj = self.get(plural, case.name)
            if obj is not None:
                self._observe(record, obj)
                verdict = judge(obj)
                phase = (obj.get("status") or {}).get("phase")
                # a Connector is done once explained; a reset is judged when it ends, or waits
                # for a reference (explained: nothing started), or at the deadline (a retried
                # step shows its failures only after the first attempt)
                if verdict is not None and (case.kind == "Connector" or phase in (*TERMINAL, "Pending")):
                    break
            time.sleep(0.3)
        if obj is not None:
            status = obj.get("status") or {}
            record.conditions = [
                {k: c.get(k) for k in ("type", "status", "reason", "message")} for c in status.get("conditions") or []
            ]
            record.phase = status.get("phase")
            record.connector_name = status.get("connectorName")
        if verdict is None:
            record.outcome = "unexplained"
            shown = {k: v for k, v in ((obj or {}).get("status") or {}).items() if k not in ("executedSpec", "plan")}
            record.why_unexplained = f"no explanation in {self.args.timeout:.0f}s; status: {json.dumps(shown)[:1500]}"
        else:
            record.outcome, rejection = verdict
            record.explain_seconds = round(time.monotonic() - started, 2)
            record.explained = True
            messages = [c.get("message") or "" for c in record.conditions if c.get("status") == "False"]
            vague = [m for m in messages if VAGUE.search(m)]
            if vague:
                record.explained = False
                record.vague = True
                record.why_unexplained = f"condition message names no cause: {vague[0]!r}"
            elif rejection and not self._wait_events(case.name, 10.0):
                # the condition must come with an Event (posted right after the status write)
                record.explained = False
                record.why_unexplained = "operator rejection without an Event"
        if case.kind == "Connector":
            self._finish_connector(case, record)
        else:
            # only a reset at work has something to finish; one waiting for a reference goes now
            self._finish_reset(case, record, drain=record.explained and record.phase == "Running")

    @staticmethod
    def _observe(record: Record, obj: dict[str, Any]) -> None:
        valid = _cond(obj.get("status") or {}, "Valid")
        record.ever_valid |= bool(valid and valid["status"] == "True")
        for message in sorted(kopf_messages(obj) - set(record.handler_errors)):
            record.handler_errors.append(message)

    def _wait_events(self, name: str, timeout: float) -> list[Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.events(name)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.5)

    def _scan(self, record: Record, obj: dict[str, Any] | None) -> None:
        events = self.events(record.name)
        record.events = sorted({f"{e.type}/{e.reason}" for e in events})
        canary = self.b.canary
        if obj is not None and canary in json.dumps(obj):
            record.canary_hits.append("object")
        for e in events:
            if canary in (e.message or ""):
                record.canary_hits.append(f"event {e.reason}")

    def _finish_connector(self, case: Case, record: Record) -> None:
        obj = self.get("connectors", case.name)
        if obj is not None:
            self._observe(record, obj)
        self._scan(record, obj)
        connector = record.connector_name or str(record.spec.get("connectorName") or case.name)
        record.connector_name = connector
        # Valid=False from the first reconcile on: nothing may have reached Connect
        if not record.ever_valid and connector in connect_names(self.http):
            record.half_applied = True
        self.b.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, "connectors", case.name)
        deadline = time.monotonic() + self.args.delete_timeout
        while (obj := self.get("connectors", case.name)) is not None:
            self._observe(record, obj)
            if time.monotonic() > deadline:
                record.stuck_deleting = True
                record.why_unexplained = record.why_unexplained or "deletion stuck: " + "; ".join(
                    record.handler_errors[-2:]
                )
                break
            time.sleep(0.3)
        if not record.stuck_deleting and connector in connect_names(self.http):
            record.left_in_connect = True

    def _finish_reset(self, case: Case, record: Record, *, drain: bool) -> None:
        # let a running reset finish before deleting it: a reset deleted mid-way leaves its
        # connector stopped, which would skew the cases after it (a reset that is not visibly
        # working has nothing to finish: it goes at once)
        deadline = time.monotonic() + (self.args.drain_timeout if drain else 0)
        obj = self.get("offsetresets", case.name)
        while obj is not None and (obj.get("status") or {}).get("phase") not in TERMINAL:
            self._observe(record, obj)
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
            obj = self.get("offsetresets", case.name)
        record.terminal = obj is not None and (obj.get("status") or {}).get("phase") in TERMINAL
        if obj is not None:
            self._observe(record, obj)
            record.phase = (obj.get("status") or {}).get("phase")
            if drain and not record.terminal and reset_explanation(obj) is None:
                record.explained = False
                record.why_unexplained = "went silent while draining: " + json.dumps(obj.get("status"))[:1500]
        self._scan(record, obj)
        try:
            self.b.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, "offsetresets", case.name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        deadline = time.monotonic() + self.args.delete_timeout
        while self.get("offsetresets", case.name) is not None:
            if time.monotonic() > deadline:
                record.stuck_deleting = True
                break
            time.sleep(0.3)


# -- operator logs -------------------------------------------------------------------------------

_LINE = re.compile(r"^\[(?P<time>[^\]]+)\] (?P<logger>\S+)\s+\[(?P<level>[A-Z]+)\s*\] (?P<message>.*)$")
_FAILED = re.compile(r"(?P<handler>\w+ '[^']+') failed (?P<how>temporarily|permanently|with an exception)")


def scan_logs(paths: list[Path]) -> dict[str, Any]:
    """Unhandled exceptions vs the operator's mapped errors, from the operator's text logs.

    Unhandled: an exception that escaped a handler (kopf: "failed with an exception", with its
    traceback), the catch-all "unexpected <Type>" of ``errors.as_kopf_error`` (an exception the
    product does not map; the traceback is dropped there), kopf's "unrecoverable error", asyncio's
    "Task exception was never retrieved" / "Exception in callback", or any other traceback.
    Handled: the remaining "failed temporarily/permanently" lines (ConnectError, KubeError,
    NotReadyYet, SpecInvalid mapped to kopf's retry decisions).
    """
    unhandled: list[dict[str, Any]] = []
    handled: Counter[str] = Counter()
    tracebacks = 0
    for path in paths:
        lines = path.read_text(errors="replace").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            block = [line]
            j = i + 1
            # continuation lines (tracebacks) do not start with "[timestamp]"
            while j < len(lines) and not _LINE.match(lines[j]):
                block.append(lines[j])
                j += 1
            has_tb = any(b.startswith("Traceback (most recent call last)") for b in block)
            tracebacks += has_tb
            match = _LINE.match(line)
            message = match.group("message") if match else line
            failed = _FAILED.search(message)
            handler = failed.group("handler") if failed else ""
            kind: str | None = None
            if failed and failed.group("how") == "with an exception":
                kind = "escaped handler"
            elif failed and ": unexpected " in message:
                kind = "unmapped exception"
            elif failed:
                handled[_handled_key(message[failed.end() :])] += 1
            elif "unrecoverable error" in message:
                kind = "kopf unrecoverable"
            elif "Task exception was never retrieved" in message or "Exception in callback" in message:
                kind = "asyncio"
            elif has_tb:
                kind = "traceback"
            if kind is not None:
                # the text log has no object reference (the CLI leaves kopf's log_prefix off);
                # the handler name gives the kind, the message matches kopf's progress annotation
                unhandled.append(
                    {
                        "kind": kind,
                        "resource": _resource_of(handler),
                        "handler": handler,
                        "message": message[failed.end() :].split(": ", 1)[-1] if failed else message,
                        "log": path.name,
                        "line": message[:500],
                        "traceback": block[1:60],
                    }
                )
            i = j
    return {"unhandled": unhandled, "handled": dict(handled.most_common(20)), "tracebacks": tracebacks}


def _resource_of(handler: str) -> str:
    if "connector_" in handler:
        return "Connector"
    if "offset_reset" in handler:
        return "OffsetReset"
    if "cluster_" in handler:
        return "ConnectCluster"
    return "(operator)"


def _handled_key(rest: str) -> str:
    """A handled error's message without names and numbers, to count kinds of errors."""
    text = re.sub(r"\d+", "N", rest.lstrip(": "))
    return re.sub(r"\b(c|r)-N\b", "<obj>", text)[:120]


# -- setup ---------------------------------------------------------------------------------------


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ApiException as exc:
            last = exc
        if last:
            return last
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"[:1500])


def condition_is(b: Bench, ns: str, plural: str, name: str, type_: str, status: str) -> bool:
    cond = _cond(b.get(ns, plural, name).get("status") or {}, type_)
    return bool(cond and cond.get("status") == status)


def setup(b: Bench, ns: str, files: Path) -> None:
    """ConnectCluster "main", the canary Secret, and the Connectors resets point at."""
    b.cluster(ns)
    b.connector_secret(ns)
    files.mkdir(parents=True, exist_ok=True)
    (files / f"{BASE_SOURCE}.in").write_text("one\ntwo\nthree\n")
    base = {"clusterRef": {"name": "main"}, "tasksMax": 1}
    b.create(
        ns, "connectors", "Connector", BASE_SOURCE,
        {**base, "class": SOURCE, "config": {"file": str(files / f"{BASE_SOURCE}.in"), "topic": BASE_TOPIC}},
    )  # fmt: skip
    b.create(
        ns, "connectors", "Connector", BASE_SINK,
        {**base, "class": SINK, "config": {"file": str(files / f"{BASE_SINK}.out"), "topics": BASE_TOPIC}},
    )  # fmt: skip
    # invalid where only the operator can tell (the schema and its CEL rules accept it): a
    # calendar date that does not exist
    invalid_offsets = {"onCreate": "set", "setTo": "timestamp", "timestamp": "2026-02-30T00:00:00Z"}
    b.create(
        ns, "connectors", "Connector", BASE_INVALID,
        {**base, "class": SOURCE, "config": {"file": str(files / "invalid.in"), "topic": BASE_TOPIC},
         "offsets": invalid_offsets},
    )  # fmt: skip
    wait_for(lambda: condition_is(b, ns, "connectclusters", "main", "Ready", "True"), 120, "ConnectCluster main Ready")
    for name in (BASE_SOURCE, BASE_SINK):
        wait_for(partial(condition_is, b, ns, "connectors", name, "Ready", "True"), 120, f"{name} Ready")
    wait_for(
        lambda: condition_is(b, ns, "connectors", BASE_INVALID, "Valid", "False"), 60, f"{BASE_INVALID} Valid=False"
    )


# -- report --------------------------------------------------------------------------------------


def report(records: list[Record], logs: dict[str, Any], alive: bool) -> tuple[str, dict[str, Any]]:
    by_kind = Counter(hit["resource"] for hit in logs["unhandled"])
    rows: list[list[Any]] = []
    totals: dict[str, Any] = {}
    for kind in ("Connector", "OffsetReset"):
        mine = [r for r in records if r.kind == kind]
        counts = {
            "generated": len(mine),
            "schema_invalid_variants": sum(r.mutation is not None for r in mine),
            "rejected_by_api_server": sum(r.api_status is not None for r in mine),
            "accepted": sum(r.accepted for r in mine),
            "explained_by_condition": sum(r.accepted and r.explained for r in mine),
            "unexplained": sum(not r.explained for r in mine),
            "unhandled_exceptions": by_kind[kind],
            "half_applied": sum(r.half_applied for r in mine),
            "left_in_connect": sum(r.left_in_connect for r in mine),
            "stuck_deleting": sum(r.stuck_deleting for r in mine),
            "not_terminal": sum(r.terminal is False for r in mine),
            "canary_hits": sum(bool(r.canary_hits) for r in mine),
            "vague_messages": sum(r.vague for r in mine),
            "objects_with_unmapped_exception": sum(
                any(m.startswith("unexpected ") for m in r.handler_errors) for r in mine
            ),
        }
        totals[kind] = counts
        rows.append([kind, *(counts[k] for k in list(counts)[:7])])
    for other in ("ConnectCluster", "(operator)"):
        if by_kind[other]:
            rows.append([other, 0, 0, 0, 0, 0, 0, by_kind[other]])
    header = [
        "kind",
        "generated",
        "schema-invalid variants",
        "rejected by API server",
        "accepted",
        "explained by condition",
        "unexplained",
        "unhandled exceptions",
    ]
    outcomes = Counter(f"{r.kind}: {r.outcome}" for r in records)
    text = table(header, rows)
    text += "\n\n" + table(["outcome", "objects"], sorted(outcomes.items()))
    extra = [[k, *(totals[k][c] for c in list(totals[k])[7:])] for k in totals]
    text += "\n\n" + table(
        [
            "kind",
            "half-applied",
            "left in Connect",
            "stuck deleting",
            "reset not terminal",
            "canary in status/Event",
            "vague message",
            "objects hitting an unmapped exception",
        ],
        extra,
    )
    signatures = unhandled_signatures(records, logs)
    if signatures:
        text += "\n\n" + table(
            ["unhandled", "resource", "message", "log lines", "objects"],
            [
                [s["kind"], s["resource"], s["message"][:80], s["lines"], ", ".join(s["objects"][:8])]
                for s in signatures
            ],
        )
    text += f"\n\noperator alive throughout: {alive}"
    return text, totals


def unhandled_signatures(records: list[Record], logs: dict[str, Any]) -> list[dict[str, Any]]:
    """Unhandled log lines grouped by (kind, resource, message), with the objects whose
    kopf's progress annotation held that message (the log lines themselves name no object)."""
    groups: dict[tuple[str, str, str], int] = Counter(
        (h["kind"], h["resource"], h["message"]) for h in logs["unhandled"]
    )
    out = []
    for (kind, resource, message), lines in sorted(groups.items(), key=lambda kv: -kv[1]):
        objects = sorted({r.name for r in records if r.kind == resource and message in r.handler_errors})
        out.append({"kind": kind, "resource": resource, "message": message, "lines": lines, "objects": objects})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="objects in total, split between the kinds")
    parser.add_argument("--smoke", action="store_true", help="20 objects")
    parser.add_argument("--seed", type=int, default=20240601, help="hypothesis seed (default fixed)")
    parser.add_argument("--invalid-ratio", type=float, default=0.25, help="share of schema-invalid variants")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for the operator to explain an object")
    parser.add_argument("--drain-timeout", type=float, default=150.0, help="seconds for a reset to end before delete")
    parser.add_argument("--delete-timeout", type=float, default=60.0, help="seconds for a deletion to complete")
    parser.add_argument("--concurrency", type=int, default=4, help="objects in flight (OffsetResets: half)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--keep", action="store_true", help="keep the servers' work directory (logs)")
    parser.add_argument("--generate-only", action="store_true", help="print the generated cases and exit")
    args = parser.parse_args(argv)
    examples = 20 if args.smoke else args.examples

    t0 = time.monotonic()
    cases = generate(examples, args.seed, args.invalid_ratio)
    generated_in = time.monotonic() - t0
    case_digest = digest(cases)
    log(f"generated {len(cases)} cases in {generated_in:.1f}s (digest {case_digest})")
    if args.generate_only:
        for case in cases:
            print(json.dumps(asdict(case), ensure_ascii=False))
        return 0

    with bench_env(keep=args.keep) as b:
        ns = b.namespace("badin")
        files = b.workdir / "files"
        op = b.operator([ns])
        op.start()
        setup(b, ns, files)
        log(f"operator up, base objects ready in {ns}; applying {len(cases)} objects")
        runner = Runner(b, ns, files, args, op.alive)
        t1 = time.monotonic()
        records: list[Record] = []
        # Connectors first, then resets (which point at the base Connectors and at each other's
        # locks: fewer of them in flight, so more get past the lock step)
        for kind, workers in (("Connector", args.concurrency), ("OffsetReset", max(1, args.concurrency // 2))):
            batch = [c for c in cases if c.kind == kind]
            with ThreadPoolExecutor(workers) as pool:
                records += list(pool.map(runner.run, batch))
            if not op.alive():
                log("the operator process exited")
                break
        applied_in = time.monotonic() - t1
        alive = op.alive() and runner.died_after is None
        remaining = sorted(connect_names(runner.http) - {BASE_SOURCE, BASE_SINK})
        hygiene = b.hygiene()
        op.stop()
        logs = scan_logs(op.log_paths)
        exit_code = op.proc.returncode if op.proc is not None else None
        text, totals = report(records, logs, alive)
        print(text)
        failures = {
            "unexplained": sum(not r.explained for r in records),
            "unhandled": len(logs["unhandled"]),
            "operator_died": int(not alive),
            "half_applied": sum(r.half_applied for r in records),
            "left_in_connect": sum(r.left_in_connect for r in records) + len(remaining),
            "stuck_deleting": sum(r.stuck_deleting for r in records),
            "vague_messages": sum(r.vague for r in records),
            "canary": sum(bool(r.canary_hits) for r in records) + len(hygiene["hits"]),
        }
        explain = [r.explain_seconds for r in records if r.explain_seconds is not None]
        write_result(
            "bad_input",
            {
                "parameters": {
                    "examples": len(cases),
                    "seed": args.seed,
                    "invalid_ratio": args.invalid_ratio,
                    "timeout": args.timeout,
                    "concurrency": args.concurrency,
                },
                "generation": {"digest": case_digest, "seconds": round(generated_in, 2)},
                "apply_seconds": round(applied_in, 1),
                "explain_seconds": summary(explain) if explain else None,
                "totals": totals,
                "failures": failures,
                "api_rejections": dict(Counter(f"{r.api_status}" for r in records if r.api_status)),
                "outcomes": dict(Counter(f"{r.kind}: {r.outcome}" for r in records)),
                "operator": {
                    "alive_throughout": alive,
                    "died_after_case": runner.died_after,
                    "exit_code_after_stop": exit_code,
                    "logs": logs,
                },
                "unhandled_signatures": unhandled_signatures(records, logs),
                "connectors_left_in_connect": remaining,
                "hygiene": hygiene,
                "unexplained": [asdict(r) for r in records if not r.explained],
                "cases": [asdict(r) for r in records],
            },
            args.output,
        )
    bad = {k: v for k, v in failures.items() if v}
    if bad:
        log(f"FAILED: {bad}")
        return 1
    log("OK: every object explained, no unhandled exception, operator alive, nothing left behind")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
