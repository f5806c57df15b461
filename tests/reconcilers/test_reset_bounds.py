"""A reset's status stays bounded whatever the partition count (models.bounds), through the
executor against FakeConnect and FakeKube: the plan's entries and the backup kept in chunked
ConfigMaps (reconcilers.reset_chunks), read back by a rerun, and what cannot be stored refused
before the stop, or, found after it, resumed with nothing changed. The same at 20,000
partitions against a real worker: tests/e2e/test_reset_many_partitions.py."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

import pytest

from connectops.adapters.kube import KubeClient
from connectops.models.bounds import STATUS_MAX_BYTES, STATUS_SAMPLE
from connectops.models.offset_reset import ALTER_MAX_BYTES, ALTER_MAX_ENTRIES, OffsetResetSpec
from connectops.reconcilers import reset_chunks
from tests.doubles.connect import FILE_SINK, FILE_SOURCE
from tests.doubles.kube import FakeKube
from tests.reconcilers.reset_world import CLUSTER, NAMESPACE, Crash, ResetWorld, make_reset_world

pytestmark = pytest.mark.timeout(60)

NAME = "many"
SOURCE_CONFIG = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": "/data/in.txt", "topic": "many"}
SINK_CONFIG = {"connector.class": FILE_SINK, "tasks.max": "1", "file": "/data/out.txt", "topics": "many"}


def source_offsets(count: int) -> list[dict[str, Any]]:
    # names that do not compress away: the backup needs several ConfigMaps at 20,000
    return [
        {
            "partition": {"filename": f"/data/{hashlib.sha256(str(i).encode()).hexdigest()}.txt"},
            "offset": {"position": i},
        }
        for i in range(count)
    ]


def sink_entry(partition: int, offset: int) -> dict[str, Any]:
    return {"partition": {"kafka_topic": "many", "kafka_partition": partition}, "offset": {"kafka_offset": offset}}


def by_key(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: json.dumps(e["partition"], sort_keys=True))


def status_bytes(world: ResetWorld) -> int:
    return len(json.dumps(world.status(), separators=(",", ":")))


async def test_chunks_reassemble_and_refuse_what_does_not_add_up() -> None:
    kube = FakeKube()
    real = cast(KubeClient, kube)  # FakeKube implements the ConfigMap calls these make
    document = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(100_000))  # 3.2 MB, incompressible
    written = await reset_chunks.write(real, NAMESPACE, "doc", document, labels={}, annotations={}, owner=None)
    assert written.created
    assert len(written.names) == reset_chunks.pieces_needed(written.compressed) >= 4
    assert await reset_chunks.read(real, NAMESPACE, "doc") == document
    # written again: the head is there, kept as it is
    again = await reset_chunks.write(real, NAMESPACE, "doc", b"other", labels={}, annotations={}, owner=None)
    assert not again.created
    assert await reset_chunks.read(real, NAMESPACE, "doc") == document
    # a piece changed by someone: refused
    piece = kube.config_maps[(NAMESPACE, written.names[2])]
    piece.binary_data = {reset_chunks.KEY: "AAAA"}
    with pytest.raises(reset_chunks.ChunksInvalid, match="do not add up"):
        await reset_chunks.read(real, NAMESPACE, "doc")


def test_an_alter_list_beyond_one_object_is_refused_with_the_way_to_do_it() -> None:
    base = {"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "alter"}
    entries = [sink_entry(p, 1) for p in range(ALTER_MAX_ENTRIES + 1)]
    with pytest.raises(ValueError, match=f"at most {ALTER_MAX_ENTRIES}"):
        OffsetResetSpec.model_validate({**base, "offsets": entries})
    wide = [{"partition": {"filename": "x" * 2000 + str(i)}, "offset": {"position": 1}} for i in range(80)]
    with pytest.raises(ValueError, match=f"at most {ALTER_MAX_BYTES >> 10} KiB") as refused:
        OffsetResetSpec.model_validate({**base, "offsets": wide})
    assert "action restore with restoreFrom" in str(refused.value)


#: the partition counts the status size is reported at (benchmarks/README.md)
COUNTS = (2_000, 5_000, 10_000, 20_000)


async def test_a_resets_status_stays_flat_from_2000_to_20000_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {}
    for count in COUNTS:
        world = make_reset_world(monkeypatch)
        offsets = source_offsets(count)
        world.seed(NAME, SOURCE_CONFIG, offsets)
        world.create({"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "reset"})
        assert await world.run() is True
        assert world.status()["phase"] == "Succeeded"
        assert world.offsets(NAME) == []
        sizes[count] = status_bytes(world)
        plan = world.status()["plan"]
        assert plan["currentCounts"] == {NAME: count}
        assert len(plan["current"][NAME]) == STATUS_SAMPLE
        assert (await world.backup_doc())["connectors"][NAME]["offsets"] == offsets
    print(f"\nOffsetReset status bytes by partition count (reset, rest): {sizes}")
    # flat: only the counts' digits grow
    assert max(sizes.values()) - min(sizes.values()) < 64
    assert max(sizes.values()) < STATUS_MAX_BYTES // 8
    # at 20,000 the backup is in pieces, and the restore from it puts every offset back
    head = world.kube.config_maps[(NAMESPACE, world.backup_name())]
    assert reset_chunks.is_chunked(head)
    world.create(
        {
            "connectorName": NAME,
            "clusterRef": {"name": CLUSTER},
            "action": "restore",
            "restoreFrom": world.backup_name(),
        },
        name="back",
    )
    assert await world.run("back") is True
    assert by_key(world.offsets(NAME)) == by_key(offsets)


async def test_a_plan_larger_than_status_shows_is_kept_in_its_configmaps_and_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = make_reset_world(monkeypatch)
    world.seed(NAME, SINK_CONFIG, [sink_entry(p, 5) for p in range(ALTER_MAX_ENTRIES)])
    entries = [sink_entry(p, 100 + p) for p in range(ALTER_MAX_ENTRIES)]
    world.create({"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "alter", "offsets": entries})
    world.crash_on_event("StepBackup")  # the plan is stored; the operator dies before the change
    with pytest.raises(Crash):
        await world.run()
    plan = world.status()["plan"]
    assert plan["entryCounts"] == {NAME: ALTER_MAX_ENTRIES}
    assert len(plan["entries"][NAME]) == STATUS_SAMPLE
    stored = world.kube.config_maps[(NAMESPACE, plan["entriesConfigMap"])]
    assert stored.metadata is not None
    assert stored.metadata.owner_references
    assert stored.metadata.owner_references[0].uid == world.uid()
    assert by_key(world.offsets(NAME)) == by_key([sink_entry(p, 5) for p in range(ALTER_MAX_ENTRIES)])

    assert await world.run() is True  # restarted: the entries are read back from the ConfigMap
    assert world.status()["phase"] == "Succeeded"
    assert by_key(world.offsets(NAME)) == by_key(entries)


async def test_a_backup_that_cannot_be_stored_is_refused_before_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reset_chunks, "MAX_CHUNKS", 1)
    world = make_reset_world(monkeypatch)
    offsets = source_offsets(20_000)
    world.seed(NAME, SOURCE_CONFIG, offsets)
    world.connect.calls.clear()
    world.create({"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "reset"})
    assert await world.run() is True

    assert world.writes() == []  # never stopped
    assert world.state(NAME) == ("STARTED", 1)
    assert by_key(world.offsets(NAME)) == by_key(offsets)
    cond = world.condition("Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "the backup of 20000 partition offsets would take about" in cond["message"]
    assert "nothing was changed" in cond["message"]


async def test_a_backup_grown_past_storage_at_the_stop_resumes_with_nothing_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reset_chunks, "MAX_CHUNKS", 1)
    world = make_reset_world(monkeypatch)
    world.seed(NAME, SOURCE_CONFIG, source_offsets(10))
    grown = source_offsets(20_000)
    world.connect.commit_at_stop(NAME, grown)  # the tasks commit 20,000 partitions as they stop
    world.connect.calls.clear()
    world.create({"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "reset"})
    assert await world.run() is True

    assert world.writes() == ["stop", "resume"]
    assert world.state(NAME) == ("STARTED", 1)
    assert len(world.offsets(NAME)) == 20_000
    cond = world.condition("Succeeded")
    assert cond["reason"] == "BackupFailed"
    assert "the backup cannot be stored" in cond["message"]
    assert "the connector(s) were resumed" in cond["message"]


async def test_offsets_beyond_an_alter_come_from_a_configmap_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The way the alter's limit names: a ConfigMap in a backup's format, written by the user,
    and action restore with restoreFrom; the connector ends with exactly its offsets."""
    world = make_reset_world(monkeypatch)
    world.seed(NAME, SOURCE_CONFIG, source_offsets(10))
    wanted = source_offsets(5_000)[5:]
    document = json.dumps({"version": 1, "connectors": {NAME: {"kind": "source", "offsets": wanted}}})
    world.kube.add_config_map(NAMESPACE, "my-offsets", {"backup.json": document})
    world.create(
        {"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "restore", "restoreFrom": "my-offsets"}
    )
    assert await world.run() is True

    assert world.status()["phase"] == "Succeeded"
    assert by_key(world.offsets(NAME)) == by_key(wanted)
    assert status_bytes(world) < STATUS_MAX_BYTES // 8
