"""An alter whose entries come from ConfigMaps (``spec.offsetsFrom``), through the executor
against FakeConnect and FakeKube: entries beyond what an inline list may hold, read once at
inspect and pinned by the stored plan, and every way such a request can be wrong refused before
the connector is stopped. End to end with 20,000 partitions on a real worker:
tests/e2e/test_reset_many_partitions.py."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from kubernetes import client

from connectops.models.offset_reset import (
    ALTER_FROM_MAX_ENTRIES,
    ALTER_FROM_MAX_INFLATED_BYTES,
    ALTER_MAX_ENTRIES,
    OffsetResetSpec,
)
from tests.doubles.connect import FILE_SOURCE
from tests.reconcilers.reset_world import CLUSTER, NAMESPACE, Crash, ResetWorld, make_reset_world

pytestmark = pytest.mark.timeout(120)

NAME = "wide"
CONFIG = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": "/data/in.txt", "topic": "wide"}
TARGET = {"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "alter"}


def entry(i: int, position: int) -> dict[str, Any]:
    return {"partition": {"filename": f"/data/{i:05d}.txt"}, "offset": {"position": position}}


def by_key(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {json.dumps(e["partition"], sort_keys=True): e["offset"] for e in entries}


def config_map(
    world: ResetWorld, name: str, *, data: dict[str, str] | None = None, binary: dict[str, str] | None = None
) -> None:
    world.kube.config_maps[(NAMESPACE, name)] = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, namespace=NAMESPACE, resource_version="41"),
        data=data,
        binary_data=binary or None,
    )


def gz(entries: list[dict[str, Any]]) -> str:
    return base64.b64encode(gzip.compress(json.dumps(entries).encode())).decode()


def seeded(world: ResetWorld, count: int) -> list[dict[str, Any]]:
    before = [entry(i, 1) for i in range(count)]
    world.seed(NAME, CONFIG, before)
    return before


async def test_entries_from_configmaps_and_inline_are_altered_together_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = make_reset_world(monkeypatch)
    before = seeded(world, 3_000)
    inline = [entry(0, 500)]
    plain = [entry(i, 1_000 + i) for i in range(1, 1_500)]
    packed = [entry(i, 2_000 + i) for i in range(1_500, 2_500)]
    config_map(world, "plain", data={"offsets.json": json.dumps(plain)})
    config_map(world, "packed", binary={"more.json.gz": gz(packed)})
    world.create(
        {
            **TARGET,
            "offsets": inline,
            "offsetsFrom": [{"name": "plain"}, {"name": "packed", "key": "more.json.gz"}],
        }
    )
    assert await world.run() is True
    status = world.status()
    assert status["phase"] == "Succeeded", status
    assert status["plan"]["entryCounts"] == {NAME: 1 + len(plain) + len(packed)}
    # inside the inline limit's reason: status holds a sample, the ConfigMaps the whole plan
    assert len(json.dumps(status)) < 64 * 1024
    inspect = world.step("inspect")
    assert "plain/offsets.json (resourceVersion 41, 1499 entries)" in inspect["message"]
    # what the worker holds: the 2,500 named moved, the other 500 kept
    assert by_key(world.offsets(NAME)) == {**by_key(before), **by_key(inline + plain + packed)}


async def test_an_edit_of_the_configmap_after_inspect_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan stored at inspect is what the reset writes: an operator that dies after the
    backup and finds the ConfigMap changed writes what was read before the stop."""
    world = make_reset_world(monkeypatch)
    seeded(world, 10)
    asked = [entry(i, 100 + i) for i in range(10)]
    config_map(world, "offs", data={"offsets.json": json.dumps(asked)})
    world.create({**TARGET, "offsetsFrom": [{"name": "offs"}]})
    world.crash_on_event("StepBackup")
    with pytest.raises(Crash):
        await world.run()
    config_map(world, "offs", data={"offsets.json": json.dumps([entry(i, 9_999) for i in range(10)])})
    assert await world.run() is True
    assert world.status()["phase"] == "Succeeded"
    assert by_key(world.offsets(NAME)) == by_key(asked)


@pytest.mark.parametrize(
    ("maps", "refs", "words"),
    [
        ({}, [{"name": "absent"}], "no such ConfigMap in namespace"),
        ({"m": {"data": {"other": "[]"}}}, [{"name": "m"}], "has no key 'offsets.json' in data"),
        ({"m": {"data": {"offsets.json": "{not json"}}}, [{"name": "m"}], "is not a JSON list"),
        ({"m": {"data": {"offsets.json": '[{"offset": {"position": 1}}]'}}}, [{"name": "m"}], "at [0].partition"),
        ({"m": {"binary": {"x.gz": "bm90IGd6aXA="}}}, [{"name": "m", "key": "x.gz"}], "is not gzip data"),
        (
            {
                "m": {
                    "binary": {
                        "x.gz": base64.b64encode(gzip.compress(b" " * (ALTER_FROM_MAX_INFLATED_BYTES + 1))).decode()
                    }
                }
            },
            [{"name": "m", "key": "x.gz"}],
            "inflates to more than",
        ),
        (
            {"m": {"data": {"offsets.json": json.dumps([entry(i, 2) for i in range(ALTER_FROM_MAX_ENTRIES + 1)])}}},
            [{"name": "m"}],
            f"more than {ALTER_FROM_MAX_ENTRIES} entries",
        ),
        (
            {
                "m": {"data": {"offsets.json": json.dumps([entry(3, 7)])}},
                "n": {"data": {"offsets.json": json.dumps([entry(3, 8)])}},
            },
            [{"name": "m"}, {"name": "n"}],
            "named more than once",
        ),
    ],
)
async def test_a_bad_offsets_from_is_refused_before_the_stop(
    monkeypatch: pytest.MonkeyPatch, maps: dict[str, dict[str, dict[str, str]]], refs: list[dict[str, str]], words: str
) -> None:
    world = make_reset_world(monkeypatch)
    before = seeded(world, 5)
    for name, parts in maps.items():
        config_map(world, name, data=parts.get("data"), binary=parts.get("binary"))
    world.create({**TARGET, "offsetsFrom": refs})
    await world.run()
    status = world.status()
    assert status["phase"] == "Failed", status
    message = json.dumps(status)
    assert words in message, message[:2000]
    assert "nothing was changed" in message
    # nothing was stopped, nothing written, no backup
    assert world.writes() == []
    assert world.state(NAME)[0] == "STARTED"
    assert by_key(world.offsets(NAME)) == by_key(before)
    assert (NAMESPACE, world.backup_name()) not in world.kube.config_maps


def test_offsets_from_is_for_alter_only_and_bounded_at_admission() -> None:
    ref = {"name": "m"}
    OffsetResetSpec.model_validate({**TARGET, "offsetsFrom": [ref]})  # no inline list needed
    with pytest.raises(ValueError, match="offsetsFrom is only used by action alter"):
        OffsetResetSpec.model_validate({**TARGET, "action": "reset", "offsetsFrom": [ref]})
    with pytest.raises(ValueError, match="needs a non-empty offsets list or offsetsFrom"):
        OffsetResetSpec.model_validate(TARGET)
    with pytest.raises(ValueError, match="String should match pattern"):
        OffsetResetSpec.model_validate({**TARGET, "offsetsFrom": [{"name": "../etc"}]})
    # the inline list keeps its own bound; the API server's refusal names the way past it
    schema = json.dumps(OffsetResetSpec.model_json_schema())
    assert (
        f"an alter takes at most {ALTER_MAX_ENTRIES} offsets; for more, list them in ConfigMaps named in offsetsFrom"
        in schema
    )
