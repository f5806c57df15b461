"""A status write the API server refuses as invalid (StatusGuard, behind KubeClient.patch_status),
over ``FakeKube`` refusing as a 1.30-1.32 API server refuses one for an object stored before a
rule it breaks (422 Invalid, the rule's field and message: ``FakeKube.refuse_status``, held to
the real answer by tests/e2e/test_kube_oldest.py, which also runs this end to end).

What the user and the API server see: the user is told once (one refusal handed to
``on_refused``, the Warning Event's source), the write is not made again for the same spec, no
spec is applied meanwhile, and once the spec changes the status is written."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

import kopf
import pytest

from connectops.adapters.kube import StatusRefused, refusal_causes
from connectops.errors import as_kopf_error
from connectops.reconcilers.connector_pass import Trigger
from tests.reconcilers.reset_world import RESET, ResetWorld, make_reset_world
from tests.reconcilers.test_connector_pass import SPEC, Rig
from tests.reconcilers.world import CLUSTER, NAMESPACE, make_world

pytestmark = pytest.mark.timeout(30)

RULE = "onCreate set needs exactly one of entries or setTo"
#: a spec the CRD's rules (and the model) refuse now: stored before the rule
LEGACY = {**SPEC, "offsets": {"onCreate": "set"}}
CAUSES = [("spec.offsets", RULE)]


class Told:
    """What ``on_refused`` was handed: (object name, refusal)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, StatusRefused]] = []

    def __call__(self, obj: Any, exc: StatusRefused) -> None:
        self.items.append((obj["metadata"]["name"], exc))


def legacy_rig() -> tuple[Rig, Told, dict[str, Any]]:
    rig = Rig(make_world())
    told = Told()
    rig.kube.statuses.on_refused = told
    body = rig.kube.add_object(NAMESPACE, "connectors", "Connector", "orders", copy.deepcopy(LEGACY))
    rig.indexes.connector_event(copy.deepcopy(body), deleted=False)
    rig.kube.refuse_status(NAMESPACE, "connectors", "orders", CAUSES)
    return rig, told, body


async def test_a_refused_status_is_told_once_and_not_written_again_for_the_same_spec() -> None:
    rig, told, body = legacy_rig()
    for _ in range(20):  # twenty resyncs
        published = await rig.passes.by_uid(body["metadata"]["uid"], Trigger.RESYNC)
        assert published is not None
        assert published.error is None
    assert rig.kube.status_attempts == 1
    assert [name for name, _ in told.items] == ["orders"]
    message = str(told.items[0][1])
    assert RULE in message
    assert "spec.offsets" in message
    assert told.items[0][1].spec_refused
    # the reconciler's own word on the invalid spec, once (the first pass), and nothing applied
    assert [e.reason for e in rig.events] == ["InvalidSpec"]
    assert rig.world.connect.connectors == {}
    assert rig.kube.objects[(NAMESPACE, "connectors", "orders")].get("status") is None


async def test_the_status_is_written_once_the_spec_is_fixed() -> None:
    rig, told, body = legacy_rig()
    uid = body["metadata"]["uid"]
    await rig.passes.by_uid(uid, Trigger.RESYNC)
    assert rig.kube.status_attempts == 1
    # the user fixes the spec: the generation moves on, and the API server accepts the status
    rig.kube.replace_spec(NAMESPACE, "connectors", "orders", copy.deepcopy(SPEC))
    rig.kube.refuse_status(NAMESPACE, "connectors", "orders", None)
    rig.indexes.connector_event(copy.deepcopy(rig.kube.objects[(NAMESPACE, "connectors", "orders")]), deleted=False)
    await rig.passes.by_uid(uid, Trigger.RESYNC)
    stored = rig.kube.objects[(NAMESPACE, "connectors", "orders")]["status"]
    assert stored["observedGeneration"] == 2
    assert stored["connectorState"] == "RUNNING"
    assert "orders" in rig.world.connect.connectors
    assert len(told.items) == 1


async def test_a_change_of_a_spec_still_refused_is_told_again_once() -> None:
    """A spec change that keeps the broken part (ratcheting lets it through) is a new spec: its
    status is tried, refused, and told, once."""
    rig, told, body = legacy_rig()
    uid = body["metadata"]["uid"]
    await rig.passes.by_uid(uid, Trigger.RESYNC)
    config = cast("dict[str, str]", LEGACY["config"])
    changed = {**LEGACY, "config": {**config, "topic": "orders-2"}}
    rig.kube.replace_spec(NAMESPACE, "connectors", "orders", changed)
    rig.indexes.connector_event(copy.deepcopy(rig.kube.objects[(NAMESPACE, "connectors", "orders")]), deleted=False)
    for _ in range(5):
        await rig.passes.by_uid(uid, Trigger.RESYNC)
    assert rig.kube.status_attempts == 2
    assert len(told.items) == 2
    assert rig.world.connect.connectors == {}


async def test_a_change_pass_is_skipped_while_its_spec_stands_refused() -> None:
    """kopf's change handler hands the pass's status to KubeClient.patch_status (handlers.py):
    the same guard; a change of the same generation (a retry) applies nothing."""
    rig, told, body = legacy_rig()
    await rig.passes.by_uid(body["metadata"]["uid"], Trigger.RESYNC)
    published = await rig.passes.on_change(copy.deepcopy(rig.kube.objects[(NAMESPACE, "connectors", "orders")]))
    assert published.changes == {}
    assert published.error is None
    assert rig.kube.status_attempts == 1
    assert len(told.items) == 1


async def test_a_refusal_of_the_status_alone_keeps_reconciling() -> None:
    """A refused status field (not the spec): the spec is still applied; the same status is not
    sent again until the spec changes."""
    rig, told, body = legacy_rig()
    rig.kube.replace_spec(NAMESPACE, "connectors", "orders", copy.deepcopy(SPEC))
    rig.indexes.connector_event(copy.deepcopy(rig.kube.objects[(NAMESPACE, "connectors", "orders")]), deleted=False)
    rig.kube.refuse_status(NAMESPACE, "connectors", "orders", [("status.message", "too long")])
    for _ in range(3):
        await rig.passes.by_uid(body["metadata"]["uid"], Trigger.RESYNC)
    assert not told.items[0][1].spec_refused
    assert "orders" in rig.world.connect.connectors
    assert rig.kube.status_attempts == 1
    assert len(told.items) == 1


async def test_a_deleted_and_recreated_object_is_written_afresh() -> None:
    """The refusal is the object's (its uid), not its name's."""
    rig, _told, body = legacy_rig()
    await rig.passes.by_uid(body["metadata"]["uid"], Trigger.RESYNC)
    await rig.passes.delete(copy.deepcopy(rig.kube.objects[(NAMESPACE, "connectors", "orders")]))
    rig.kube.refuse_status(NAMESPACE, "connectors", "orders", None)
    del rig.kube.objects[(NAMESPACE, "connectors", "orders")]
    again = rig.kube.add_object(NAMESPACE, "connectors", "Connector", "orders", copy.deepcopy(SPEC))
    rig.indexes.connector_event(copy.deepcopy(again), deleted=False)
    await rig.passes.by_uid(again["metadata"]["uid"], Trigger.RESYNC)
    assert rig.kube.objects[(NAMESPACE, "connectors", "orders")]["status"]["observedGeneration"] == 1


async def test_a_writer_without_the_metadata_reads_it_and_is_refused_without_a_write() -> None:
    """A status writer that passes no metadata (the checks', the failovers') is guarded too: a
    read for the generation, no write."""
    world = make_world()
    told = Told()
    world.kube.statuses.on_refused = told
    world.kube.add_object(NAMESPACE, "connectclusters", "ConnectCluster", CLUSTER + "-2", {"restUrl": "http://x"})
    world.kube.refuse_status(NAMESPACE, "connectclusters", CLUSTER + "-2", [("spec", "a rule")])
    for _ in range(3):
        with pytest.raises(StatusRefused):
            await world.kube.patch_status(NAMESPACE, "connectclusters", CLUSTER + "-2", {"observedGeneration": 1})
    assert world.kube.status_attempts == 1
    assert len(told.items) == 1
    world.kube.replace_spec(NAMESPACE, "connectclusters", CLUSTER + "-2", {"restUrl": "http://y"})
    world.kube.refuse_status(NAMESPACE, "connectclusters", CLUSTER + "-2", None)
    await world.kube.patch_status(NAMESPACE, "connectclusters", CLUSTER + "-2", {"observedGeneration": 2})
    assert world.kube.objects[(NAMESPACE, "connectclusters", CLUSTER + "-2")]["status"] == {"observedGeneration": 2}


@pytest.fixture
def resets(monkeypatch: pytest.MonkeyPatch) -> ResetWorld:
    return make_reset_world(monkeypatch)


async def test_an_offset_reset_whose_status_is_refused_changes_nothing_and_is_not_retried(
    resets: ResetWorld,
) -> None:
    """A legacy OffsetReset: its first status write (its acceptance or its refusal) comes before
    anything is done, so a refused one leaves Connect, Kafka and the locks untouched, and kopf
    is told not to retry it (its spec is immutable: it can only be deleted, which works)."""
    told = Told()
    resets.kube.statuses.on_refused = told
    resets.create({"connectorName": "x", "action": "alter"})  # breaks a rule added since
    resets.kube.refuse_status(
        NAMESPACE, "offsetresets", RESET, [("spec", "connectorName and mirrorMaker2 need clusterRef")]
    )
    with pytest.raises(StatusRefused) as refused:
        await resets.run()
    assert isinstance(as_kopf_error(refused.value, retry=0, base=1, maximum=60), kopf.PermanentError)
    assert resets.connect.calls == []
    assert resets.kube.leases == {}
    assert resets.status() == {}
    assert [name for name, _ in told.items] == [RESET]
    await resets.release()


def test_a_refusal_keeps_the_field_and_the_rule_never_the_value() -> None:
    """A field error's message starts with the value refused (Go-quoted, or as printed): a config
    value the user wrote. Only the field and what the rule says are kept."""
    body = json.dumps(
        {
            "kind": "Status",
            "reason": "Invalid",
            "code": 422,
            "details": {
                "causes": [
                    {"field": "spec.config.x", "message": 'Invalid value: "s3cr\\"et: 1": must be short'},
                    {"field": "spec.tasks", "message": "Invalid value: 99: must be at most 10"},
                    {"field": "spec.offsets", "message": f'Invalid value: "object": {RULE}'},
                ]
            },
        }
    )
    causes = refusal_causes(422, body)
    assert causes == (("spec.config.x", "must be short"), ("spec.tasks", "must be at most 10"), ("spec.offsets", RULE))
    assert "s3cr" not in str(StatusRefused("connectors ns/x", causes))
    # anything else is not a refusal of the object's content
    assert refusal_causes(409, body) is None
    assert refusal_causes(422, json.dumps({"kind": "Status", "reason": "Conflict", "code": 422})) is None
    assert refusal_causes(422, "not json") is None
