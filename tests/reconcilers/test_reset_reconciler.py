"""Every step and failure path of the OffsetReset step machine (lock -> inspect -> stop -> backup
-> reset -> offsetSyncs -> resume -> verify -> unlock, and ``_fail``), through the executor's
public entry points (``run`` as kopf's create/update/resume handlers and their retries call it,
``release`` as the deletion handler does), against ``FakeConnect`` and ``FakeKube``. Each test
asserts what the worker ended up holding (offsets, target states) and which writes reached it,
the Leases and backup ConfigMaps, and the status the executor stored (steps, conditions, changes,
plan) and the Events. They add to the end-to-end suite (tests/e2e) and never replace it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import kopf
import pytest
import yaml
from pydantic import ValidationError

from connectops.adapters.connect_rest import ConnectOffsetsInvalid, ConnectRejected, ConnectUnavailable
from connectops.adapters.kafka import GroupActive, KafkaAccessDenied, KafkaUnavailable
from connectops.adapters.kube import KubeError, KubeForbidden, KubeObjectMissing, KubeUnavailable
from connectops.errors import NotReadyYet, ReferenceInvalid, as_kopf_error
from connectops.models.offset_reset import OffsetResetSpec
from connectops.planning.ownership import Claim
from connectops.reconcilers.reset_run import KafkaApi
from tests.doubles.connect import FILE_SINK, FILE_SOURCE, MSG_ALTERED, MSG_RESET, Call
from tests.reconcilers.reset_world import (
    BOOTSTRAP,
    CLUSTER,
    NAMESPACE,
    RESET,
    SCOPE,
    STEPS,
    URL,
    Crash,
    ResetWorld,
    make_reset_world,
)

pytestmark = pytest.mark.timeout(30)

NAME = "orders"
SOURCE_CONFIG = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": "/data/in.txt", "topic": "orders"}
SINK_CONFIG = {"connector.class": FILE_SINK, "tasks.max": "1", "file": "/data/out.txt", "topics": "orders"}
SOURCE_OFFSETS = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 42}}]


def sink_entry(partition: int, offset: int | None) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": "orders", "kafka_partition": partition},
        "offset": None if offset is None else {"kafka_offset": offset},
    }


SINK_OFFSETS = [sink_entry(0, 10), sink_entry(1, 20), sink_entry(2, 30)]


def reset_spec(**extra: Any) -> dict[str, Any]:
    return {"connectorName": NAME, "clusterRef": {"name": CLUSTER}, "action": "reset", **extra}


#: every step of a reset without MirrorMaker 2 done (offsetSyncs is not in its plan)
ALL_DONE = {s: "Skipped" if s == "offsetSyncs" else "Done" for s in STEPS}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> ResetWorld:
    w = make_reset_world(monkeypatch)
    w.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    w.connect.calls.clear()
    return w


# -- the whole machine --------------------------------------------------------------------------


async def test_reset_runs_every_step_and_resumes(world: ResetWorld) -> None:
    world.create(reset_spec())
    assert await world.run() is True

    # the worker: offsets gone, running again with its task, after exactly stop/delete/resume
    assert world.offsets(NAME) == []
    assert world.state(NAME) == ("STARTED", 1)
    assert world.connect.writes() == [Call("stop", (NAME,)), Call("delete_offsets", (NAME,)), Call("resume", (NAME,))]
    # the lock was taken (in the Kafka cluster's scope) and released
    assert ("acquire_lock", (NAMESPACE, SCOPE, NAME, world.holder())) in world.kube.calls
    assert world.kube.leases == {}
    # the backup holds the offsets from before, and is marked as this reset's
    backup = world.backup()
    assert backup["connectors"][NAME] == {"kind": "source", "offsets": SOURCE_OFFSETS}
    assert (backup["cluster"], backup["offsetReset"]) == (CLUSTER, f"{NAMESPACE}/{RESET}")
    assert world.backup_annotations()["connectops.io/offset-reset-uid"] == world.uid()

    status = world.status()
    assert world.steps() == ALL_DONE
    assert all(world.step(s)["attempts"] == 1 for s in STEPS if s != "offsetSyncs")
    assert status["phase"] == "Succeeded"
    assert "currentStep" not in status
    assert (status["strategy"], status["connectorKind"], status["connectors"]) == ("rest", "source", [NAME])
    assert status["lockScope"] == SCOPE
    assert status["previousStates"] == {NAME: "RUNNING"}
    assert status["backup"]["configMap"] == world.backup_name()
    assert status["backup"]["offsets"] == 1
    assert status["changes"] == [
        {
            "connector": NAME,
            "call": "DELETE offsets",
            "partitions": 0,
            "state": "Done",
            "confirmedByConnector": True,
            "message": MSG_RESET,
        }
    ]
    assert status["plan"]["current"] == {NAME: SOURCE_OFFSETS}
    assert status["plan"]["connectors"] == [{"name": NAME, "kind": "source", "state": "RUNNING", "resumeTo": "running"}]
    assert status["executedSpec"] == reset_spec()
    assert world.condition("Succeeded")["status"] == "True"
    assert world.condition("Succeeded")["reason"] == "Completed"
    reasons = [r for _, r in world.event_reasons()]
    assert reasons == [
        "Started",
        "StepLock",
        "StepInspect",
        "StepStop",
        "StepBackup",
        "StepReset",
        "StepResume",
        "StepVerify",
        "StepUnlock",
        "Completed",
    ]


async def test_each_step_boundary_is_one_durable_write_before_the_next_step_acts(world: ResetWorld) -> None:
    """A step's completion and the next step's start go in one status write (each write is
    downtime while the connector is stopped), and that write lands before the next step acts.
    The starts of the steps that need no write of their own (verify changes nothing, the backup
    is found again by name, the reset step writes each offsets call before sending it) ride on
    the next write: fewer writes, never a call the status does not announce."""
    world.seed("bystander", SOURCE_CONFIG, SOURCE_OFFSETS)
    seen_at_call: dict[str, dict[str, Any]] = {}
    args_of: dict[str, tuple[Any, ...]] = {}

    def recorded() -> dict[str, Any]:
        status = world.status()
        return {
            **{s["name"]: s["state"] for s in status.get("steps") or []},
            "changes": [(c["call"], c["state"]) for c in status.get("changes") or []],
            "lockScope": status.get("lockScope"),
        }

    for target, method in (
        (world.connect, "stop"),
        (world.connect, "delete_offsets"),
        (world.connect, "resume"),
        (world.kube, "acquire_lock"),
        (world.kube, "release_lock"),
    ):
        original = getattr(target, method)

        async def spy(*args: Any, _method: str = method, _original: Any = original) -> Any:
            seen_at_call[_method] = recorded()
            args_of[_method] = args
            return await _original(*args)

        setattr(target, method, spy)
    world.create(reset_spec())
    assert await world.run() is True

    # what the API server held when each mutating call went out
    for call, done, running in (
        ("acquire_lock", None, "lock"),
        ("stop", "inspect", "stop"),
        # the backup follows the stop: its ConfigMap exists, and the write before the first
        # offsets call carries the stop's completion, the backup's and the reset step's start
        ("delete_offsets", "backup", "reset"),
        ("resume", "reset", "resume"),
        ("release_lock", "verify", "unlock"),
    ):
        seen = seen_at_call[call]
        assert (seen.get(done) if done else "Done", seen[running]) == ("Done", "Running"), (call, seen)
    assert seen_at_call["acquire_lock"]["lockScope"]  # the Lease's name is known before it exists
    # the unlock names the Lease's version the lock step left, so the adapter deletes it without
    # reading it first (tests/adapters/test_kube_contract.py: a Lease handed over is kept)
    assert args_of["release_lock"][-1] == "1"
    assert seen_at_call["delete_offsets"]["changes"] == [("DELETE offsets", "Started")]
    assert seen_at_call["resume"]["changes"] == [("DELETE offsets", "Done")]

    # replay the writes: a step never becomes Done in a write that leaves the machine with no
    # step Running unless it was the last one (then the same write ends the reset)
    states: dict[str, str] = {}
    completions = []
    for namespace, plural, name, patch in world.kube.status_patches:
        if (namespace, plural, name) != (NAMESPACE, "offsetresets", RESET) or "steps" not in patch:
            continue
        before = dict(states)
        states = {s["name"]: s["state"] for s in patch["steps"]}
        finished = [n for n, state in states.items() if state == "Done" and before.get(n) != "Done"]
        if not finished:
            continue
        completions.append(finished)
        if finished[-1] == "unlock":
            assert patch["phase"] == "Succeeded"
        else:
            assert "Running" in states.values(), (finished, states)
    # one write per step that acts, each carrying the completions since the previous one (a
    # lock this reset took plainly is taken again the same way by a rerun: its completion
    # rides with inspect's, on the write before the stop; the stop's and the backup's ride on
    # the write of the first offsets call)
    assert completions == [["lock", "inspect"], ["stop", "backup"], ["reset"], ["resume", "verify"], ["unlock"]]
    # six status writes in all (the first, then one per boundary above): the count
    # benchmarks/reset_floor_bench.py times as the floor under the reset's overhead
    reset_writes = [
        p
        for ns, plural, name, p in world.kube.status_patches
        if (ns, plural, name) == (NAMESPACE, "offsetresets", RESET)
    ]
    assert len(reset_writes) == 6, reset_writes
    # and the worker holds what was asked: the target's offsets gone, a connector it must not
    # touch unchanged
    assert world.offsets(NAME) == []
    assert world.offsets("bystander") == SOURCE_OFFSETS
    # the reset's acceptance (its spec's hash, its steps) rides on the lock step's start: the
    # first write of all already has the lock Running, and nothing was called before it but reads
    first = next(
        patch
        for namespace, plural, name, patch in world.kube.status_patches
        if (namespace, plural, name) == (NAMESPACE, "offsetresets", RESET)
    )
    assert first["specHash"]
    assert first["executedSpec"]
    assert {s["name"]: s["state"] for s in first["steps"]}["lock"] == "Running"


async def test_alter_changes_only_the_named_partitions(world: ResetWorld) -> None:
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    entries = [sink_entry(0, 5), sink_entry(2, None)]
    world.create(reset_spec(connectorName="sink", action="alter", offsets=entries))
    assert await world.run() is True

    # p0 moved, p2 removed, p1 (not named) kept
    assert world.offsets("sink") == [sink_entry(0, 5), sink_entry(1, 20)]
    assert world.connect.writes() == [
        Call("stop", ("sink",)),
        Call("patch_offsets", ("sink", entries)),
        Call("resume", ("sink",)),
    ]
    assert world.state("sink") == ("STARTED", 1)
    status = world.status()
    assert status["phase"] == "Succeeded"
    assert status["connectorKind"] == "sink"
    # stored as the API server keeps it: the null member of an object in a list is dropped
    assert status["plan"]["entries"] == {"sink": [sink_entry(0, 5), {"partition": sink_entry(2, None)["partition"]}]}
    assert status["plan"]["configs"] == {"sink": {"kind": "sink", "group": "connect-sink"}}
    assert status["backup"]["offsets"] == 3
    assert world.backup()["connectors"]["sink"]["offsets"] == SINK_OFFSETS
    assert [(c["call"], c["partitions"], c["state"], c["message"]) for c in status["changes"]] == [
        ("PATCH offsets", 2, "Done", MSG_ALTERED)
    ]
    assert world.condition("Succeeded")["message"] == "offset alter completed"


async def test_an_alter_retried_from_the_stored_plan_sends_the_entries_as_stored(world: ResetWorld) -> None:
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    entries = [sink_entry(0, 5), sink_entry(2, None)]
    world.connect.fail_next("patch_offsets", ConnectUnavailable("alter offsets: cannot reach Connect"))
    world.create(reset_spec(connectorName="sink", action="alter", offsets=entries))
    assert await world.drive() is True

    assert [type(e) for e in world.errors] == [ConnectUnavailable]
    patches = [c.args[1] for c in world.connect.calls if c.method == "patch_offsets"]
    # the retry reads the plan back from status, where the API server dropped "offset": null;
    # the plan gives it back (a partition to remove is sent as such, not as an entry without offset)
    assert patches == [entries, entries]
    assert world.offsets("sink") == [sink_entry(0, 5), sink_entry(1, 20)]
    assert world.status()["phase"] == "Succeeded"
    assert [(c["call"], c["state"]) for c in world.status()["changes"]] == [
        ("PATCH offsets", "Started"),
        ("PATCH offsets", "Done"),
    ]


async def test_dry_run_publishes_the_plan_and_changes_nothing(world: ResetWorld) -> None:
    world.create(reset_spec(dryRun=True))
    assert await world.run() is True

    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    assert world.kube.config_maps == {}
    assert world.kube.leases == {}  # taken for the inspection, released
    assert world.steps() == {
        "lock": "Done",
        "inspect": "Done",
        "backup": "Skipped",
        "stop": "Skipped",
        "reset": "Skipped",
        "offsetSyncs": "Skipped",
        "resume": "Skipped",
        "verify": "Skipped",
        "unlock": "Done",
    }
    status = world.status()
    assert status["phase"] == "Planned"
    assert "changes" not in status or status["changes"] == []
    assert status["plan"]["strategy"] == "rest"
    assert status["plan"]["steps"] == ["lock", "inspect", "stop", "backup", "reset", "resume", "verify", "unlock"]
    assert status["plan"]["current"] == {NAME: SOURCE_OFFSETS}
    assert status["plan"]["currentCounts"] == {NAME: 1}
    # the connector ran on: its figures are its last commit's, and the outcome says what that means
    assert status["plan"]["currentAsOf"] == "lastCommit"
    assert status["plan"]["workerVersion"] == "4.3.0"
    assert world.condition("Succeeded")["reason"] == "Planned"
    assert world.condition("Succeeded")["message"] == (
        "dry run: the plan is in status.plan; nothing changed; its offsets are as the connector last "
        "committed them: the connector keeps running, so they may trail its position by up to the flush "
        "interval (offset.flush.interval.ms, 60 s); a reset reads them after stopping the connector"
    )
    # a terminal reset is not run again
    world.connect.calls.clear()
    assert await world.run() is False
    assert world.connect.calls == []


@pytest.mark.parametrize(
    ("before", "resume", "managed_state", "after"),
    [
        ("PAUSED", "desired", None, ("PAUSED", "pause")),  # unmanaged: the state it had before
        ("STOPPED", "desired", None, ("STOPPED", None)),
        ("RUNNING", "desired", "paused", ("PAUSED", "pause")),  # managed: its Connector's spec.state
        ("RUNNING", "desired", "stopped", ("STOPPED", None)),
        ("RUNNING", "stopped", None, ("STOPPED", None)),  # explicit policies win
        ("PAUSED", "running", None, ("STARTED", "resume")),
        ("RUNNING", "paused", "running", ("PAUSED", "pause")),
    ],
)
async def test_resume_policy(
    monkeypatch: pytest.MonkeyPatch, before: str, resume: str, managed_state: str | None, after: tuple[str, str | None]
) -> None:
    world = make_reset_world(monkeypatch)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS, target={"RUNNING": "STARTED"}.get(before, before))
    world.connect.calls.clear()
    if managed_state is None:
        spec = reset_spec(resume=resume)
    else:
        world.add_connector_object(
            "orders-obj",
            {
                "clusterRef": {"name": CLUSTER},
                "connectorName": NAME,
                "class": FILE_SOURCE,
                "config": {"file": "/data/in.txt", "topic": "orders"},
                "state": managed_state,
            },
        )
        spec = {"connectorRef": {"name": "orders-obj"}, "action": "reset", "resume": resume}
    world.create(spec)
    assert await world.run() is True

    target, call = after
    assert world.state(NAME)[0] == target
    assert world.writes() == ["stop", "delete_offsets", *([call] if call else [])]
    assert world.offsets(NAME) == []
    status = world.status()
    assert status["phase"] == "Succeeded"
    assert status["previousStates"] == {NAME: before}
    assert status["plan"]["connectors"][0]["resumeTo"] == {"STARTED": "running"}.get(target, target.lower())
    assert world.kube.leases == {}


async def test_managing_connectors_names_the_connector_object(world: ResetWorld) -> None:
    world.add_connector_object(
        "orders-obj",
        {"clusterRef": {"name": CLUSTER}, "connectorName": NAME, "class": FILE_SOURCE, "config": {"topic": "o"}},
    )
    world.add_connector_object("other", {"clusterRef": {"name": CLUSTER}, "class": FILE_SOURCE, "config": {}})
    world.create(reset_spec())
    await world.run()
    assert await world.executor.managing_connectors(world.body()) == ["orders-obj"]


# -- lock -----------------------------------------------------------------------------------------


async def test_lock_held_by_another_reset_fails_before_anything_changes(world: ResetWorld) -> None:
    world.create(reset_spec(), name="other")  # the holder exists: its lock is live
    other = world.holder("other")
    owner = {"apiVersion": "connectops.io/v1alpha1", "kind": "OffsetReset", "name": "other", "uid": world.uid("other")}
    await world.kube.acquire_lock(NAMESPACE, SCOPE, NAME, other, owner)
    world.create(reset_spec())
    assert await world.run() is True

    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.kube.config_maps == {}
    lock = world.lock(NAME)
    assert lock is not None
    assert lock.holder == other  # untouched
    assert world.steps() == {s: {"lock": "Failed"}.get(s, "Pending") for s in STEPS}
    assert world.status()["phase"] == "Failed"
    cond = world.condition("Succeeded")
    assert (cond["status"], cond["reason"]) == ("False", "LockFailed")
    assert other in cond["message"]
    assert ("Warning", "LockFailed") in world.event_reasons()


LOCKS = "connectops-system"  # the operator's namespace, where the chart has it keep reset locks


async def test_the_lock_lives_in_the_lock_namespace_without_an_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_reset_world(monkeypatch, lock_namespace=LOCKS)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.create(reset_spec())
    await world.run()
    assert world.status()["phase"] == "Succeeded"
    assert world.status()["lockNamespace"] == LOCKS
    assert ("acquire_lock", (LOCKS, SCOPE, NAME, world.holder())) in world.kube.calls
    assert ("release_lock", (LOCKS, SCOPE, NAME, world.holder())) in world.kube.calls
    assert world.kube.leases == {}  # released where it was taken


async def test_a_reset_from_another_namespace_holding_the_lock_is_not_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two namespaces reaching one unmanaged connector meet at one Lease; the loser learns that a
    reset holds it, not which namespace or reset (another tenant's business)."""
    world = make_reset_world(monkeypatch, lock_namespace=LOCKS)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.kube.add_object("team-b", "offsetresets", "OffsetReset", "theirs", reset_spec())
    theirs = world.kube.objects[("team-b", "offsetresets", "theirs")]["metadata"]["uid"]
    holder = f"connectops.io/offsetreset/team-b/theirs/{theirs}"
    await world.kube.acquire_lock(LOCKS, SCOPE, NAME, holder, None)
    world.create(reset_spec())
    assert await world.run() is True

    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.kube.config_maps == {}
    lock = world.lock(NAME, namespace=LOCKS)
    assert lock is not None
    assert lock.holder == holder
    cond = world.condition("Succeeded")
    assert cond["reason"] == "LockFailed"
    assert "an OffsetReset in another namespace" in cond["message"]
    assert "team-b" not in str(world.status())
    assert "theirs" not in str(world.status())
    assert all("team-b" not in e.message for e in world.events)


@pytest.mark.parametrize("holder_state", ["deleted", "re-created"])
async def test_a_lock_whose_holder_is_gone_is_taken_over(monkeypatch: pytest.MonkeyPatch, holder_state: str) -> None:
    """A Lease in the lock namespace has no owner to be collected with: a reset deleted without
    its finalizer leaves it behind, and the next reset takes it over instead of failing forever."""
    world = make_reset_world(monkeypatch, lock_namespace=LOCKS)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    gone = "connectops.io/offsetreset/team-b/gone/uid-gone"
    if holder_state == "re-created":  # a namesake: another uid, so not the holder
        world.kube.add_object("team-b", "offsetresets", "OffsetReset", "gone", reset_spec())
    await world.kube.acquire_lock(LOCKS, SCOPE, NAME, gone, None)
    world.create(reset_spec())
    await world.run()

    assert ("transfer_lock", (LOCKS, SCOPE, NAME, gone, world.holder())) in world.kube.calls
    assert world.status()["phase"] == "Succeeded"
    assert "took over the lock left by" in world.step("lock")["message"]
    assert world.offsets(NAME) == []  # the reset ran
    assert world.kube.leases == {}
    # the takeover is written before the next step acts: a rerun, now the holder, would say
    # only "locked", and the status would lose that a stale lock was taken
    first_lock_done = next(
        {step["name"]: step for step in patch["steps"]}
        for _, plural, name, patch in world.kube.status_patches
        if (plural, name) == ("offsetresets", RESET)
        and "steps" in patch
        and {step["name"]: step["state"] for step in patch["steps"]}["lock"] == "Done"
    )
    assert "took over the lock left by" in first_lock_done["lock"]["message"]
    assert (first_lock_done["inspect"]["state"], first_lock_done["backup"]["state"]) == ("Running", "Pending")


async def test_a_lock_taken_in_the_reset_namespace_is_released_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reset that locked before the operator had a lock namespace (status without lockNamespace)
    releases where it locked, on deletion too (release reads the status, not the settings)."""
    world = make_reset_world(monkeypatch, max_step_attempts=1)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.connect.lose_answer("delete_offsets", ConnectUnavailable("HTTP 500", status=500))
    world.create(reset_spec())
    await world.run()
    assert world.lock(NAME) is not None  # failed: kept, in the reset's namespace
    assert world.status()["lockNamespace"] == NAMESPACE
    obj = world.kube.objects[(NAMESPACE, "offsetresets", RESET)]
    del obj["status"]["lockNamespace"]  # as stored by an operator before lock namespaces
    await world.release()
    assert world.kube.leases == {}


# -- inspect --------------------------------------------------------------------------------------


async def test_inspect_fails_when_the_connector_does_not_exist(world: ResetWorld) -> None:
    world.create(reset_spec(connectorName="ghost"))
    assert await world.run() is True

    assert world.connect.writes() == []
    assert world.kube.leases == {}  # taken, then released by the failure path
    assert world.steps()["lock"] == "Done"
    assert world.steps()["inspect"] == "Failed"
    assert world.step("inspect")["finishedAt"]
    assert world.steps()["backup"] == "Pending"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "connector ghost does not exist in Kafka Connect" in cond["message"]
    assert world.status()["phase"] == "Failed"


async def test_a_connector_managed_from_another_namespace_is_refused(world: ResetWorld) -> None:
    # team-b's ConnectCluster reaches the same workers (same Kafka cluster id)
    world.kube.add_connect_cluster("team-b", "theirs", {"restUrl": URL})
    claims = {NAME: [Claim("team-b", "orders-b", "uid-b", "2024-01-01T00:00:00Z", "theirs")]}
    world.create(reset_spec())
    assert await world.run(claims=claims) is False

    assert world.connect.writes() == []
    assert not [c for c in world.kube.calls if c[0] == "acquire_lock"]
    assert world.steps() == dict.fromkeys(STEPS, "Pending")
    assert world.status()["phase"] == "Failed"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ManagedElsewhere"
    assert "nothing was changed" in cond["message"]
    # a claim of this namespace is no obstacle
    mine = {NAME: [Claim(NAMESPACE, "orders-a", "uid-a", "2024-01-01T00:00:00Z", CLUSTER)]}
    world.create(reset_spec(), name="again")
    assert await world.run("again", claims=mine) is True
    assert world.status("again")["phase"] == "Succeeded"


async def test_a_missing_connector_object_waits_then_runs(world: ResetWorld) -> None:
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset"})
    with pytest.raises(KubeObjectMissing):
        await world.run()
    assert world.status()["phase"] == "Pending"
    assert world.condition("Succeeded")["reason"] == "ReferenceNotFound"
    assert world.connect.writes() == []
    # the wait's write is the reset's first: it carries the acceptance (spec hash, steps)
    assert world.status()["specHash"]
    assert world.steps() == dict.fromkeys(STEPS, "Pending")

    world.add_connector_object(
        "orders-obj",
        {"clusterRef": {"name": CLUSTER}, "connectorName": NAME, "class": FILE_SOURCE, "config": {"topic": "o"}},
    )
    assert await world.run() is True  # kopf's retry
    assert world.status()["phase"] == "Succeeded"
    assert world.offsets(NAME) == []


def _sink_world_with_checks(monkeypatch: pytest.MonkeyPatch, *, check_enabled: bool) -> ResetWorld:
    """Checks on in the executor, off by the operator's default: a sink managed by Connector
    object ``sink-obj`` whose spec.check.enabled is ``check_enabled``, and a bystander source
    the reset must not touch."""
    world = make_reset_world(monkeypatch, kafka=True, checks=True, checks_enabled=False)
    world.kafka.create_topic("orders", 3)
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    world.seed("bystander", SOURCE_CONFIG, SOURCE_OFFSETS)
    world.add_connector_object(
        "sink-obj",
        {
            "clusterRef": {"name": CLUSTER},
            "connectorName": "sink",
            "class": SINK_CONFIG["connector.class"],
            "config": {"topics": "orders"},
            "check": {"enabled": check_enabled},
        },
    )
    return world


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_finished_reset_launches_the_check_its_connector_asks_for(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """The check launched with the outcome follows the Connector object's spec.check (read
    beside the unlock): here the operator's default is off, so only the object can turn it on."""
    world = _sink_world_with_checks(monkeypatch, check_enabled=enabled)
    world.create({"connectorRef": {"name": "sink-obj"}, "action": "reset"})
    assert await world.run() is True

    assert world.status()["phase"] == "Succeeded", world.status()["conditions"]
    assert world.offsets("sink") == []
    assert world.kafka.groups.get("connect-sink", {}) == {}
    assert world.offsets("bystander") == SOURCE_OFFSETS
    launched = world.status().get("lastCheck")
    applications = [key for key in world.kube.objects if key[1] == "sparkapplications"]
    if enabled:
        assert launched is not None
        assert launched["trigger"] == "offset reset completed"
        assert applications == [(NAMESPACE, "sparkapplications", launched["application"])]
    else:
        assert launched is None
        assert applications == []
    reads = [c for c in world.kube.calls if c[0] == "custom_object" and c[1][1] == "connectors"]
    assert reads  # the object's spec, not a default, decided


async def test_a_check_spec_unreadable_beside_the_unlock_is_read_with_the_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Connector's spec is read ahead, beside the Lease's release; if that read fails, the
    unlock still succeeds at its first attempt and the outcome reads it again."""
    world = _sink_world_with_checks(monkeypatch, check_enabled=True)
    emit = world.emit

    def fail_at_unlock(type_: str, reason: str, message: str) -> None:
        emit(type_, reason, message)
        if reason == "StepVerify":  # verify is done: the unlock comes next
            world.kube.fail_next("custom_object", KubeUnavailable("the API server is restarting"))

    monkeypatch.setattr(world, "emit", fail_at_unlock)
    world.create({"connectorRef": {"name": "sink-obj"}, "action": "reset"})
    assert await world.run() is True

    assert world.status()["phase"] == "Succeeded"
    assert world.step("unlock")["attempts"] == 1
    assert world.kube.leases == {}
    assert world.kafka.groups.get("connect-sink", {}) == {}
    assert world.offsets("sink") == []
    assert world.offsets("bystander") == SOURCE_OFFSETS
    launched = world.status().get("lastCheck")
    assert launched is not None  # the Connector's spec.check, read with the outcome
    unlock = next(i for i, call in enumerate(world.kube.calls) if call[0] == "release_lock")
    assert [c for c in world.kube.calls[unlock:] if c[0] == "custom_object" and c[1][1] == "connectors"] == [
        ("custom_object", (NAMESPACE, "connectors", "sink-obj"))
    ] * 2


async def test_an_invalid_spec_fails_at_once(world: ResetWorld) -> None:
    world.create({"connectorName": NAME, "action": "alter"})  # no clusterRef, no offsets
    assert await world.run() is False
    assert world.status()["phase"] == "Failed"
    assert world.condition("Succeeded")["reason"] == "InvalidSpec"
    assert world.connect.calls == []
    assert await world.run() is False  # and stays so


# -- backup ---------------------------------------------------------------------------------------


async def test_a_backup_taken_before_a_crash_is_kept_not_retaken(world: ResetWorld) -> None:
    world.create(reset_spec())
    world.crash_on_event("StepBackup")  # the ConfigMap exists, the step's Done is not stored
    with pytest.raises(Crash):
        await world.run()
    # the backup's start rides on the next write (the first offsets call's): the stop is what
    # was recorded, and the connector is stopped
    steps = ("lock", "inspect", "stop", "backup")
    assert tuple(world.step(s)["state"] for s in steps) == ("Done", "Done", "Running", "Pending")
    assert world.state(NAME) == ("STOPPED", 0)
    first = world.backup()
    # someone changes the stopped connector's offsets while the operator is down
    world.connect.connectors[NAME].offsets.clear()
    world.seed_offsets(NAME, [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 99}}])

    assert await world.run() is True  # the operator restarted: kopf's resume handler
    assert world.backup() == first  # never overwritten: the offsets from before anything changed
    assert world.backup()["connectors"][NAME]["offsets"] == SOURCE_OFFSETS
    # the plan shows the backup kept, not the later read
    assert world.status()["plan"]["current"] == {NAME: SOURCE_OFFSETS}
    assert tuple(world.step(s)["attempts"] for s in steps) == (1, 1, 2, 1)
    assert "kept the backup already taken by this reset" in world.step("backup")["message"]
    assert [c[0] for c in world.kube.calls].count("create_config_map") == 2
    assert world.status()["phase"] == "Succeeded"
    assert world.offsets(NAME) == []


async def test_the_backup_holds_what_the_stop_committed(world: ResetWorld) -> None:
    """Connect commits offsets every flush interval and once more as the tasks stop: the
    connector has moved on from the last periodic commit (position 42) to 66, which only the
    stop commits. The one read before the stop only counts them (a backup that could not be
    stored is refused before anything stops); the backup, the plan and the read after the
    change all come from the reads after it (without Kafka access, until two agree)."""
    moved = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 66}}]
    world.connect.commit_at_stop(NAME, moved)
    world.create(reset_spec())
    assert await world.run() is True

    calls = [c.method for c in world.connect.calls]
    assert calls[: calls.index("stop")].count("get_offsets") == 1
    assert calls[calls.index("stop") : calls.index("delete_offsets")].count("get_offsets") == 2
    assert world.backup()["connectors"][NAME]["offsets"] == moved
    assert world.backup()["readAfterStop"] is True
    assert world.backup_annotations()["connectops.io/read-after-stop"] == "true"
    status = world.status()
    assert status["backup"]["readAfterStop"] is True
    assert status["plan"]["current"] == {NAME: moved}
    assert status["plan"]["currentAsOf"] == "stop"
    assert world.offsets(NAME) == []

    # and the restore from it puts back the position the stop committed, not the older one
    world.create(reset_spec(action="restore", restoreFrom=world.backup_name()), name="back")
    assert await world.run("back") is True
    assert world.offsets(NAME) == moved


def canon(entries: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(e, sort_keys=True) for e in entries)


async def test_a_backup_without_kafka_access_waits_for_connect_to_list_the_stops_commit(world: ResetWorld) -> None:
    """The stop commits a partition the connector never committed before, and Connect's first
    answer after it leaves the partition out (its listing trails its offsets topic): the backup
    is taken from the answer after, which lists it; the reset then clears it, the restore puts
    it back."""
    fresh = {"partition": {"filename": "/data/new.txt"}, "offset": {"position": 7}}
    before = world.offsets(NAME)
    world.connect.commit_at_stop(NAME, [fresh])
    world.connect.lag_listing(NAME)
    world.create(reset_spec())
    assert await world.run() is True

    saved = world.backup()["connectors"][NAME]["offsets"]
    assert canon(saved) == canon([*before, fresh])
    assert world.status()["backup"]["offsets"] == len(before) + 1
    assert world.offsets(NAME) == []
    world.create(reset_spec(action="restore", restoreFrom=world.backup_name()), name="back")
    assert await world.run("back") is True
    assert canon(world.offsets(NAME)) == canon([*before, fresh])


async def test_a_sinks_backup_holds_the_group_offsets_the_stop_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch, version="4.3.0")  # REST, with Kafka access for the read-back
    moved = [sink_entry(0, 11), sink_entry(1, 25), sink_entry(2, 30)]
    world.connect.commit_at_stop("sink", moved)
    world.create(reset_spec(connectorName="sink"))
    assert await world.run() is True
    assert world.backup()["connectors"]["sink"]["offsets"] == moved
    assert world.status()["plan"]["current"] == {"sink": moved}
    assert "connect-sink" not in world.kafka.groups


async def test_a_foreign_configmap_with_the_backup_name_is_refused_before_the_stop(world: ResetWorld) -> None:
    world.create(reset_spec())
    world.kube.add_config_map(
        NAMESPACE, world.backup_name(), {"backup.json": "{}"}, annotations={"connectops.io/offset-reset-uid": "other"}
    )
    assert await world.run() is True

    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    cm = world.kube.config_maps[(NAMESPACE, world.backup_name())]
    assert cm.data == {"backup.json": "{}"}  # not replaced
    assert world.kube.leases == {}
    assert world.steps()["inspect"] == "Failed"
    assert world.steps()["stop"] == "Pending"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "is not this reset's backup; nothing was changed" in cond["message"]


async def test_a_foreign_configmap_made_after_the_inspection_is_refused_and_the_connector_resumed(
    world: ResetWorld,
) -> None:
    world.create(reset_spec())
    original = world.connect.stop

    async def stop_then_squat(name: str) -> None:
        await original(name)
        world.kube.add_config_map(
            NAMESPACE, world.backup_name(), {"backup.json": "{}"}, annotations={"connectops.io/offset-reset-uid": "x"}
        )

    world.connect.stop = stop_then_squat  # type: ignore[method-assign]
    assert await world.run() is True
    assert world.writes() == ["stop", "resume"]
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    cond = world.condition("Succeeded")
    assert cond["reason"] == "BackupFailed"
    assert "is not this reset's backup; nothing was changed" in cond["message"]
    assert "the connector(s) were resumed" in cond["message"]


async def test_a_backup_the_operator_may_not_write_is_refused_before_the_stop(world: ResetWorld) -> None:
    world.kube.fail_next(
        "create_config_map_dry_run",
        KubeForbidden(
            f"ConfigMap {NAMESPACE}/x: API answered 403 Forbidden: the operator may not create ConfigMaps here"
        ),
    )
    world.create(reset_spec())
    assert await world.run() is True
    assert world.connect.writes() == []
    assert world.kube.config_maps == {}
    assert world.steps()["inspect"] == "Failed"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "the backup cannot be written" in cond["message"]
    assert "nothing was changed" in cond["message"]


async def test_a_retried_backup_first_sees_the_connector_stopped(world: ResetWorld) -> None:
    """A backup step that runs without this execution's stop (a retry after a failed attempt)
    reads nothing until the connector shows STOPPED with no tasks."""
    world.create(reset_spec())
    original = world.kube.create_config_map
    failed = False

    async def create_once_failing(*args: Any, **kwargs: Any) -> bool:
        nonlocal failed
        if not failed and not kwargs.get("dry_run"):
            failed = True
            raise KubeUnavailable("create ConfigMap: the API server did not answer")
        return await original(*args, **kwargs)

    world.kube.create_config_map = create_once_failing  # type: ignore[method-assign]
    with pytest.raises(KubeUnavailable):
        await world.run()
    assert world.steps()["backup"] == "Running"
    assert world.steps()["stop"] == "Done"
    # meanwhile the connector runs again (a person resumed it despite the lock)
    await world.connect.resume(NAME)
    with pytest.raises(NotReadyYet):
        await world.run()
    assert "not STOPPED with no tasks: not backed up" in world.step("backup")["message"]
    assert world.kube.config_maps == {}
    await world.connect.stop(NAME)
    assert await world.run() is True
    assert world.status()["phase"] == "Succeeded"
    assert world.backup()["connectors"][NAME]["offsets"] == SOURCE_OFFSETS


# -- a reset begun by an operator version that backed up before the stop -----------------------

OLD_ORDER = ("lock", "inspect", "backup", "stop", "reset", "offsetSyncs", "resume", "verify", "unlock")


def as_written_in_the_old_order(world: ResetWorld, states: dict[str, str], offsets: list[dict[str, Any]]) -> None:
    """Make the stored reset look as the earlier version left it: its steps in the old order
    with ``states``, its backup (taken before the stop, holding ``offsets``) in a ConfigMap
    without the read-after-stop mark, and its status saying so."""
    stored = world.kube.objects[(NAMESPACE, "offsetresets", RESET)]["status"]
    by_name = {
        s["name"]: {**s, **({"state": states[s["name"]]} if s["name"] in states else {})} for s in stored["steps"]
    }
    stored["steps"] = [by_name[n] for n in OLD_ORDER]
    stored["backup"] = {"configMap": world.backup_name(), "offsets": len(offsets), "takenAt": "2026-01-01T00:00:00Z"}
    doc: dict[str, Any] = {
        "version": 1,
        "cluster": CLUSTER,
        "offsetReset": f"{NAMESPACE}/{RESET}",
        "connectors": {NAME: {"kind": "source", "offsets": offsets}},
    }
    world.kube.config_maps.pop((NAMESPACE, world.backup_name()), None)
    world.kube.add_config_map(
        NAMESPACE,
        world.backup_name(),
        {"backup.json": json.dumps(doc)},
        annotations={"connectops.io/offset-reset": RESET, "connectops.io/offset-reset-uid": world.uid()},
    )


async def test_a_reset_backed_up_before_the_stop_is_backed_up_again_after_it(world: ResetWorld) -> None:
    moved = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 66}}]
    world.connect.commit_at_stop(NAME, moved)
    world.create(reset_spec())
    world.crash_on_event("StepStop")  # the earlier version: backup done, the stop sent, not recorded
    with pytest.raises(Crash):
        await world.run()
    as_written_in_the_old_order(world, {"backup": "Done", "stop": "Running"}, SOURCE_OFFSETS)
    assert world.offsets(NAME) == moved  # what the stop committed: the old backup trails it

    assert await world.run() is True  # the new version resumes it
    status = world.status()
    assert status["phase"] == "Succeeded"
    assert [s["name"] for s in status["steps"]] == list(STEPS)  # listed in the order they ran
    assert world.steps() == ALL_DONE
    again = f"{world.backup_name()}-stopped"
    assert status["backup"]["configMap"] == again
    assert status["backup"]["earlierConfigMap"] == world.backup_name()
    assert status["backup"]["readAfterStop"] is True
    cm = world.kube.config_maps[(NAMESPACE, again)]
    assert cm.data is not None
    assert json.loads(cm.data["backup.json"])["connectors"][NAME]["offsets"] == moved
    assert world.backup()["connectors"][NAME]["offsets"] == SOURCE_OFFSETS  # the first one, kept
    assert "taken before the stop by an earlier operator version" in world.step("backup")["message"]
    assert world.writes() == ["stop", "stop", "delete_offsets", "resume"]
    assert world.offsets(NAME) == []
    assert world.kube.leases == {}
    # the restore it would name puts back the position the stop committed
    world.create(reset_spec(action="restore", restoreFrom=again), name="back")
    assert await world.run("back") is True
    assert world.offsets(NAME) == moved


async def test_an_old_order_reset_past_its_first_offsets_call_keeps_its_backup(world: ResetWorld) -> None:
    world.create(reset_spec())
    world.crash_on_event("StepReset")  # the DELETE was sent; its answer not recorded
    with pytest.raises(Crash):
        await world.run()
    as_written_in_the_old_order(world, {"backup": "Done", "stop": "Done", "reset": "Running"}, SOURCE_OFFSETS)

    assert await world.run() is True
    status = world.status()
    assert status["phase"] == "Succeeded"
    assert [s["name"] for s in status["steps"]] == list(STEPS)
    assert status["backup"]["configMap"] == world.backup_name()  # the backup there is: offsets changed since
    assert (NAMESPACE, f"{world.backup_name()}-stopped") not in world.kube.config_maps
    assert world.step("backup")["attempts"] == 1
    assert world.offsets(NAME) == []


async def test_an_old_order_reset_stopped_but_not_changed_is_backed_up_again(world: ResetWorld) -> None:
    world.create(reset_spec())
    world.crash_on_event("StepBackup")
    with pytest.raises(Crash):
        await world.run()
    # the earlier version: backup, then stop, both done; the reset step's start not yet written
    as_written_in_the_old_order(world, {"backup": "Done", "stop": "Done"}, [])
    assert await world.run() is True
    status = world.status()
    assert status["phase"] == "Succeeded"
    assert status["backup"]["configMap"] == f"{world.backup_name()}-stopped"
    assert status["backup"]["offsets"] == 1
    assert world.writes() == ["stop", "delete_offsets", "resume"]  # seen STOPPED: not stopped again


# -- stop -----------------------------------------------------------------------------------------


async def test_stop_waits_until_the_worker_shows_stopped_with_no_tasks(world: ResetWorld) -> None:
    world.connect.lag_stop(NAME, reads=3)
    world.create(reset_spec())
    assert await world.run() is True
    assert world.status()["phase"] == "Succeeded"
    assert world.writes() == ["stop", "delete_offsets", "resume"]  # no offsets call before STOPPED
    status_reads = [c for c in world.connect.calls if c.method == "get_status"]
    assert len(status_reads) >= 5  # inspect, 3 lagging + 1 stopped, verify


async def test_stop_timeout_resumes_and_says_offsets_were_not_changed(world: ResetWorld) -> None:
    world.connect.lag_stop(NAME, reads=10**9)  # never shows STOPPED
    world.create(reset_spec())
    assert await world.drive() is True

    # three attempts (the executor's max here), each retried by kopf after NotReadyYet
    assert [type(e) for e in world.errors] == [NotReadyYet, NotReadyYet]
    assert world.writes() == ["stop", "stop", "stop", "resume"]
    assert world.state(NAME) == ("STARTED", 1)
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.kube.leases == {}
    assert world.steps()["stop"] == "Failed"
    assert world.step("stop")["attempts"] == 3
    assert world.step("stop")["finishedAt"]
    assert world.steps()["reset"] == "Pending"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "StopFailed"
    assert "did not reach STOPPED with no tasks" in cond["message"]
    assert (
        "Offsets were not changed (every offsets call was refused, or none was made); the connector(s) were resumed"
        in cond["message"]
    )
    assert world.status()["phase"] == "Failed"
    assert "restoreManifest" not in world.status()


# -- reset ----------------------------------------------------------------------------------------


async def test_a_failure_after_a_change_started_keeps_the_connector_stopped_and_locked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = make_reset_world(monkeypatch, max_step_attempts=1)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.connect.lose_answer(
        "delete_offsets",
        ConnectUnavailable("reset offsets: HTTP 500: Request timed out", status=500, operation="reset offsets"),
    )
    world.create(reset_spec())
    assert await world.run() is True

    # DELETE reached the worker, its answer did not: stays STOPPED, no task, locked
    assert world.writes() == ["stop", "delete_offsets"]
    assert world.state(NAME) == ("STOPPED", 0)
    lock = world.lock(NAME)
    assert lock is not None
    assert lock.holder == world.holder()
    status = world.status()
    assert status["phase"] == "Failed"
    assert world.steps()["reset"] == "Failed"
    assert world.steps()["resume"] == "Pending"
    assert [(c["call"], c["state"]) for c in status["changes"]] == [("DELETE offsets", "Started")]
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ResetFailed"
    assert "stay STOPPED and locked" in cond["message"]
    assert world.backup_name() in cond["message"]
    manifest = yaml.safe_load(status["restoreManifest"])
    assert manifest["kind"] == "OffsetReset"
    assert manifest["spec"] == {
        "action": "restore",
        "restoreFrom": world.backup_name(),
        "strategy": "rest",
        "clusterRef": {"name": CLUSTER},
        "connectorName": NAME,
        "resume": "running",
    }

    # the restoreManifest, applied: it takes over the lock and puts the old offsets back
    world.create(manifest["spec"], name=manifest["metadata"]["name"])
    restore = manifest["metadata"]["name"]
    assert await world.run(restore) is True
    assert world.status(restore)["phase"] == "Succeeded"
    assert "took over the lock of the failed reset" in world.step("lock", restore)["message"]
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    assert world.kube.leases == {}
    assert ("transfer_lock", (NAMESPACE, SCOPE, NAME, world.holder(), world.holder(restore))) in world.kube.calls
    assert [(c["call"], c["partitions"], c["state"]) for c in world.status(restore)["changes"]] == [
        ("PATCH offsets", 1, "Done")
    ]


async def test_deleting_a_failed_reset_releases_its_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_reset_world(monkeypatch, max_step_attempts=1)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.connect.lose_answer("delete_offsets", ConnectUnavailable("HTTP 500", status=500))
    world.create(reset_spec())
    await world.run()
    assert world.lock(NAME) is not None
    await world.release()
    assert world.kube.leases == {}
    assert world.state(NAME) == ("STOPPED", 0)  # unlocked as it is


async def test_a_refused_offsets_call_resumes_the_connector(world: ResetWorld) -> None:
    world.connect.fail_next(
        "delete_offsets", ConnectRejected("reset offsets: HTTP 400: bad request", status=400, operation="x")
    )
    world.create(reset_spec())
    assert await world.run() is True  # refused as such: fails at once, no retry

    assert world.writes() == ["stop", "delete_offsets", "resume"]
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    assert world.kube.leases == {}
    assert [(c["call"], c["state"]) for c in world.status()["changes"]] == [("DELETE offsets", "Refused")]
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ResetFailed"
    # read back after the failure: the offsets are the backup's, so nothing was changed
    assert (
        f"Nothing was changed: the offsets read back from Connect after the failure equal the backup in "
        f"ConfigMap {world.backup_name()}; the connector(s) were resumed"
    ) in cond["message"]
    assert "restoreManifest" not in world.status()


async def test_a_call_that_changed_nothing_resumes_the_connector_unchanged(world: ResetWorld) -> None:
    """Connect answers "altered" and changes nothing: the read-back after the change fails, and
    the offsets read back equal the backup: nothing was changed, so the connector runs again."""
    world.connect.ignore_offset_writes = True  # answers "altered", changes nothing
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    world.create(reset_spec(connectorName="sink", action="alter", offsets=[sink_entry(0, 5)]))
    assert await world.run() is True

    assert world.offsets("sink") == SINK_OFFSETS
    assert world.state("sink") == ("STARTED", 1)
    assert world.lock("sink") is None
    assert world.steps()["reset"] == "Failed"
    assert [(c["call"], c["state"], c["confirmedByConnector"]) for c in world.status()["changes"]] == [
        ("PATCH offsets", "Done", True)
    ]
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ResetFailed"
    assert "offsets after the reset differ from the plan" in cond["message"]
    assert "expected {'kafka_offset': 5}, found {'kafka_offset': 10}" in cond["message"]
    assert (
        "Nothing was changed: the offsets read back from Connect after the failure equal the backup"
        in (cond["message"])
    )
    assert "restoreManifest" not in world.status()


async def test_a_partial_write_keeps_the_connector_stopped(world: ResetWorld) -> None:
    """A PATCH that wrote some of its partitions and then failed (a 5xx): the offsets read back
    differ from the backup, so the connector stays stopped and locked, however the answer read."""
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    original = world.connect.patch_offsets

    async def half(name: str, offsets: list[dict[str, Any]]) -> str:
        await original(name, offsets[:1])
        raise ConnectUnavailable("alter offsets: HTTP 500: Request timed out", status=500, operation="alter offsets")

    world.connect.patch_offsets = half  # type: ignore[method-assign]
    entries = [sink_entry(0, 5), sink_entry(1, 6)]
    world.create(reset_spec(connectorName="sink", action="alter", offsets=entries))
    assert await world.drive() is True

    assert world.offsets("sink") == [sink_entry(0, 5), sink_entry(1, 20), sink_entry(2, 30)]
    assert world.state("sink") == ("STOPPED", 0)
    assert world.lock("sink") is not None
    cond = world.condition("Succeeded")
    assert "stay STOPPED and locked because their offsets read back differ from the backup" in cond["message"]
    assert world.backup_name() in cond["message"]
    assert world.status()["restoreManifest"]


async def test_a_server_error_that_changed_nothing_ends_in_a_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempt's DELETE answered 500 without reaching the offsets: retried (a 5xx may be
    passing), then read back, found as backed up, and the connector resumed."""
    world = make_reset_world(monkeypatch, max_step_attempts=3)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    error = ConnectUnavailable("reset offsets: HTTP 500: store unavailable", status=500, operation="reset offsets")
    world.connect.fail_next("delete_offsets", error, times=3)
    world.create(reset_spec())
    assert await world.drive() is True

    assert world.writes() == ["stop", "delete_offsets", "delete_offsets", "delete_offsets", "resume"]
    assert [c["state"] for c in world.status()["changes"]] == ["Started", "Started", "Started"]
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    assert world.kube.leases == {}
    cond = world.condition("Succeeded")
    assert "store unavailable (after 3 attempts). Nothing was changed" in cond["message"]
    assert "restoreManifest" not in world.status()


async def test_offsets_refused_as_invalid_are_not_retried(world: ResetWorld) -> None:
    """A source connector's alterOffsets refusing the offsets is a 500 from Connect: not worth a
    retry. Said once, read back, resumed."""
    world.create(
        reset_spec(action="alter", offsets=[{"partition": {"filename": "/data/in.txt"}, "offset": {"pos": 1}}])
    )
    world.connect.fail_next(
        "patch_offsets",
        ConnectOffsetsInvalid(
            "alter offsets: HTTP 500: Offset objects should either be null or contain the key 'position'",
            status=500,
            operation="alter offsets",
        ),
        times=5,
    )
    assert await world.run() is True  # no kopf retry: failed in the first call

    assert world.writes() == ["stop", "patch_offsets", "resume"]
    assert world.step("reset")["attempts"] == 1
    assert [c["state"] for c in world.status()["changes"]] == ["Refused"]
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    message = world.condition("Succeeded")["message"]
    assert message.count("not retried") == 1
    assert "Connect refused these offsets as invalid: the same request cannot succeed, so it was not retried" in message
    assert "Nothing was changed" in message


# -- resume, verify -------------------------------------------------------------------------------


async def test_a_failed_resume_is_retried_until_it_works(world: ResetWorld) -> None:
    world.connect.fail_next("delete_offsets", ConnectRejected("reset offsets: HTTP 400: no", status=400))
    world.connect.fail_next("resume", ConnectUnavailable("resume: cannot reach Connect"))
    world.create(reset_spec())
    with pytest.raises(ConnectUnavailable):
        await world.run()

    status = world.status()
    assert status["phase"] == "Failed"
    assert status["pendingResume"] is True
    assert world.state(NAME) == ("STOPPED", 0)
    assert world.kube.leases == {}  # unlocked either way
    assert "Resuming failed too (resume: cannot reach Connect)" in world.condition("Succeeded")["message"]

    assert await world.run() is True  # kopf's retry
    assert world.state(NAME) == ("STARTED", 1)
    assert world.writes() == ["stop", "delete_offsets", "resume", "resume"]
    status = world.status()
    assert "pendingResume" not in status
    assert status["phase"] == "Failed"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ResetFailed"
    assert "Resuming failed too" not in cond["message"]
    assert cond["message"].endswith("The connector(s) were resumed afterwards.")
    assert ("Normal", "Resumed") in world.event_reasons()
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert await world.run() is False  # done with
    assert world.writes() == ["stop", "delete_offsets", "resume", "resume"]


async def test_an_error_in_verify_is_retried_without_repeating_done_steps(world: ResetWorld) -> None:
    world.create(reset_spec())
    # inspect reads the status once, stop once; the third read is verify's
    reads = 0
    original = world.connect.get_status

    async def get_status(name: str) -> Any:
        nonlocal reads
        reads += 1
        if reads == 3:
            raise ConnectUnavailable("get status: cannot reach Connect")
        return await original(name)

    world.connect.get_status = get_status  # type: ignore[method-assign]
    with pytest.raises(ConnectUnavailable):
        await world.run()
    assert world.steps()["verify"] == "Running"
    assert world.step("verify")["message"] == "attempt 1 failed: get status: cannot reach Connect"
    assert world.status()["currentStep"] == "verify"
    assert world.status()["phase"] == "Running"
    assert world.lock(NAME) is not None

    writes = world.writes()
    assert await world.run() is True
    assert world.writes() == writes == ["stop", "delete_offsets", "resume"]
    assert world.steps() == ALL_DONE
    assert world.step("verify")["attempts"] == 2
    assert world.step("reset")["attempts"] == 1
    assert world.kube.leases == {}


# -- crash and resume -----------------------------------------------------------------------------


async def test_a_crash_after_the_reset_acted_reruns_only_that_step(world: ResetWorld) -> None:
    world.create(reset_spec())
    world.crash_on_event("StepReset")
    with pytest.raises(Crash):
        await world.run()
    assert world.steps() == {
        "lock": "Done",
        "inspect": "Done",
        "backup": "Done",
        "stop": "Done",
        "reset": "Running",
        "offsetSyncs": "Pending",
        "resume": "Pending",
        "verify": "Pending",
        "unlock": "Pending",
    }
    assert world.offsets(NAME) == []
    assert world.state(NAME) == ("STOPPED", 0)

    assert await world.run() is True  # the restarted operator's resume handler
    assert world.writes() == ["stop", "delete_offsets", "delete_offsets", "resume"]
    assert world.step("reset")["attempts"] == 2
    assert all(world.step(s)["attempts"] == 1 for s in ("lock", "inspect", "backup", "stop", "resume"))
    # the first call's answer was lost with the crash: it stays "may have changed"
    assert [(c["call"], c["state"]) for c in world.status()["changes"]] == [
        ("DELETE offsets", "Started"),
        ("DELETE offsets", "Done"),
    ]
    assert [c[0] for c in world.kube.calls].count("create_config_map") == 1
    assert world.backup()["connectors"][NAME]["offsets"] == SOURCE_OFFSETS
    assert world.status()["phase"] == "Succeeded"
    assert world.kube.leases == {}


# -- immutable spec -------------------------------------------------------------------------------


async def test_a_spec_edited_after_the_start_is_ignored(world: ResetWorld) -> None:
    world.create(reset_spec())
    world.crash_on_event("StepStop")
    with pytest.raises(Crash):
        await world.run()
    world.edit(reset_spec(dryRun=True))  # while it runs

    assert await world.run() is True
    assert world.offsets(NAME) == []  # the reset as first written ran on
    assert world.status()["executedSpec"] == reset_spec()
    assert world.status()["phase"] == "Succeeded"
    cond = world.condition("SpecChangeIgnored")
    assert (cond["status"], cond["reason"]) == ("True", "Immutable")
    assert ("Warning", "Immutable") in world.event_reasons()

    # and after the end: reported, not obeyed
    world.connect.calls.clear()
    world.edit(reset_spec(action="alter", offsets=SOURCE_OFFSETS))
    assert await world.run() is False
    assert world.connect.calls == []
    assert world.status()["phase"] == "Succeeded"
    assert world.condition("SpecChangeIgnored")["observedGeneration"] == 3


# -- restore --------------------------------------------------------------------------------------


async def test_restore_puts_a_backup_back(world: ResetWorld) -> None:
    world.create(reset_spec())
    await world.run()
    assert world.offsets(NAME) == []
    # the connector ran on and committed a partition the backup does not have
    world.seed_offsets(NAME, [{"partition": {"filename": "/data/new.txt"}, "offset": {"position": 1}}])
    backup = world.backup_name()

    world.create(reset_spec(action="restore", restoreFrom=backup), name="put-back")
    assert await world.run("put-back") is True
    assert world.offsets(NAME) == SOURCE_OFFSETS  # the saved offsets, the later partition cleared
    patch = [c for c in world.connect.writes() if c.method == "patch_offsets"]
    assert patch == [
        Call(
            "patch_offsets",
            (NAME, [*SOURCE_OFFSETS, {"partition": {"filename": "/data/new.txt"}, "offset": None}]),
        )
    ]
    assert world.state(NAME) == ("STARTED", 1)
    assert world.status("put-back")["phase"] == "Succeeded"
    assert world.step("reset", "put-back")["message"] == (f"restored {NAME} (1 partition(s)) from ConfigMap {backup}")


async def test_restore_refuses_a_backup_of_another_connector(world: ResetWorld) -> None:
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    world.create(reset_spec(connectorName="sink"), name="sink-reset")
    await world.run("sink-reset")
    world.connect.calls.clear()

    world.create(reset_spec(action="restore", restoreFrom=world.backup_name("sink-reset")))
    assert await world.run() is True
    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.steps()["inspect"] == "Failed"
    assert f"holds no offsets for {NAME}" in world.condition("Succeeded")["message"]
    assert world.kube.leases == {}


async def test_a_restore_from_an_empty_backup_clears_the_connector(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backup of a connector that held no offsets: restoring it is making the connector hold
    none (one DELETE; Connect refuses a PATCH without offsets), read back, then resumed."""
    world = kafka_world(monkeypatch, version="4.3.0")
    world.kube.add_config_map(
        NAMESPACE,
        "empty-backup",
        {"backup.json": json.dumps({"version": 1, "connectors": {"sink": {"kind": "sink", "offsets": []}}})},
    )
    world.create(reset_spec(connectorName="sink", action="restore", restoreFrom="empty-backup"))
    assert await world.run() is True
    status = world.status()
    assert status["phase"] == "Succeeded", world.condition("Succeeded")
    assert world.writes() == ["stop", "delete_offsets", "resume"]
    assert "connect-sink" not in world.kafka.groups
    assert world.state("sink") == ("STARTED", 1)
    assert world.step("reset")["message"] == "restored sink (0 partition(s)) from ConfigMap empty-backup"

    # the sink holds nothing now: restoring nothing again is no call at all
    world.connect.calls.clear()
    world.create(reset_spec(connectorName="sink", action="restore", restoreFrom="empty-backup"), name="again")
    assert await world.run("again") is True
    assert world.status("again")["phase"] == "Succeeded"
    assert world.writes() == ["stop", "resume"]
    assert world.status("again").get("changes", []) == []


async def test_a_tombstone_restore_from_an_empty_backup_deletes_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch)  # 3.5: the consumer group itself
    doc = {"version": 1, "connectors": {"sink": {"kind": "sink", "offsets": [], "group": "connect-sink"}}}
    world.kube.add_config_map(NAMESPACE, "empty-backup", {"backup.json": json.dumps(doc)})
    world.create(reset_spec(connectorName="sink", action="restore", restoreFrom="empty-backup"))
    assert await world.run() is True
    assert world.status()["phase"] == "Succeeded", world.condition("Succeeded")
    assert "connect-sink" not in world.kafka.groups
    assert [(c["call"], c["state"]) for c in world.status()["changes"]] == [("delete group", "Done")]


async def test_a_dry_run_names_the_clusters_flush_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_reset_world(monkeypatch)
    world.kube.add_connect_cluster(
        NAMESPACE,
        CLUSTER,
        {"restUrl": URL, "workerMetrics": {"urls": ["http://connect-0:9404/metrics"], "offsetFlushIntervalMs": 10000}},
    )
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.create(reset_spec(dryRun=True))
    assert await world.run() is True
    assert (
        "may trail its position by up to the flush interval (offset.flush.interval.ms, 10 s)"
        in (world.condition("Succeeded")["message"])
    )


# -- Kafka access: sinks' consumer groups, set-to actions -----------------------------------------

GROUP_OFFSETS = {("orders", 0): 10, ("orders", 1): 20, ("orders", 2): 30}


def kafka_world(monkeypatch: pytest.MonkeyPatch, *, version: str = "3.5.1", **kw: Any) -> ResetWorld:
    """ConnectCluster with spec.kafka; a 3.5 worker can stop but has no offsets PATCH/DELETE,
    so ``auto`` resolves to the tombstone strategy (a sink: its consumer group)."""
    world = make_reset_world(monkeypatch, kafka=True, version=version, **kw)
    world.kafka.create_topic("orders", 3)
    world.seed("sink", SINK_CONFIG, SINK_OFFSETS)
    assert world.kafka.groups == {"connect-sink": GROUP_OFFSETS}
    world.connect.calls.clear()
    return world


async def test_sink_reset_deletes_its_consumer_group(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch)
    world.create(reset_spec(connectorName="sink"))
    assert await world.run() is True

    assert world.kafka.opened == [(BOOTSTRAP, {})]
    assert "connect-sink" not in world.kafka.groups
    assert world.offsets("sink") == []
    assert ("delete_group", ("connect-sink",)) in world.kafka.calls
    assert world.writes() == ["stop", "resume"]  # no offsets call to Connect
    assert world.state("sink") == ("STARTED", 1)
    assert world.kube.leases == {}
    backup = world.backup()["connectors"]["sink"]
    assert backup["group"] == "connect-sink"
    assert backup["groupOffsets"] == [["orders", 0, 10], ["orders", 1, 20], ["orders", 2, 30]]
    status = world.status()
    assert (status["phase"], status["strategy"]) == ("Succeeded", "tombstone")
    assert [(c["call"], c["state"]) for c in status["changes"]] == [("delete group", "Done")]
    assert world.steps() == ALL_DONE

    # and back, from the backup: the group's offsets committed again
    world.create(reset_spec(connectorName="sink", action="restore", restoreFrom=world.backup_name()), name="back")
    assert await world.run("back") is True
    assert world.kafka.groups["connect-sink"] == GROUP_OFFSETS
    assert world.status("back")["phase"] == "Succeeded"
    assert [(c["call"], c["partitions"]) for c in world.status("back")["changes"]] == [("commit group offsets", 3)]


async def test_a_kafka_that_does_not_answer_at_inspect_stops_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A sink's reset reads the broker back after its change (the group's offsets): a Kafka that
    # does not answer is found while inspecting, beside the other reads, before the connector
    # stops, not after the change with the connector left stopped.
    world = kafka_world(monkeypatch)

    def unreachable(topic: str) -> bool:
        raise KafkaUnavailable(f"describe topic {topic!r}: all brokers are down", operation="metadata")

    monkeypatch.setattr(world.kafka, "topic_exists", unreachable)
    world.create(reset_spec(connectorName="sink"))
    with pytest.raises(KafkaUnavailable):
        await world.run()
    assert world.writes() == []
    assert world.state("sink") == ("STARTED", 1)
    assert world.kafka.groups == {"connect-sink": GROUP_OFFSETS}
    assert world.steps()["inspect"] == "Running"
    failed = "attempt 1 failed: describe topic 'connect-offsets': all brokers are down"
    assert world.step("inspect")["message"] == failed


async def test_sink_alter_commits_only_the_named_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch)
    world.create(reset_spec(connectorName="sink", action="alter", offsets=[sink_entry(1, 7)]))
    assert await world.run() is True

    assert world.kafka.groups["connect-sink"] == {("orders", 0): 10, ("orders", 1): 7, ("orders", 2): 30}
    assert ("alter_group_offsets", ("connect-sink", {("orders", 1): 7})) in world.kafka.calls
    assert world.status()["phase"] == "Succeeded"
    assert world.state("sink") == ("STARTED", 1)


async def test_a_group_with_members_is_retried_until_it_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch)
    world.kafka.members["connect-sink"] = ["connector-consumer-sink-0@/10.0.0.7"]  # its task is leaving
    world.create(reset_spec(connectorName="sink"))
    with pytest.raises(GroupActive):
        await world.run()
    assert world.step("reset")["state"] == "Running"
    assert "still has members" in world.step("reset")["message"]
    assert world.kafka.groups["connect-sink"] == GROUP_OFFSETS
    assert world.state("sink") == ("STOPPED", 0)

    del world.kafka.members["connect-sink"]  # the task left the group
    assert await world.run() is True
    assert "connect-sink" not in world.kafka.groups
    assert world.status()["phase"] == "Succeeded"
    # the coordinator refused the first call as a whole (the group had members): Refused
    assert [(c["call"], c["state"]) for c in world.status()["changes"]] == [
        ("delete group", "Refused"),
        ("delete group", "Done"),
    ]


async def test_a_group_that_keeps_its_members_is_resumed_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch, max_step_attempts=2)
    world.kafka.members["connect-sink"] = ["connector-consumer-sink-0@/10.0.0.7"]
    world.create(reset_spec(connectorName="sink"))
    assert await world.drive() is True

    assert [type(e) for e in world.errors] == [GroupActive]
    assert world.kafka.groups["connect-sink"] == GROUP_OFFSETS  # nothing changed …
    assert [c["state"] for c in world.status()["changes"]] == ["Refused", "Refused"]
    assert world.state("sink") == ("STARTED", 1)  # … so the sink runs again, unlocked
    assert world.lock("sink") is None
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ResetFailed"
    assert "Nothing was changed: the offsets read back from Connect and Kafka after the failure" in cond["message"]
    assert "restoreManifest" not in world.status()


async def test_to_latest_on_named_topics_leaves_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_reset_world(monkeypatch, kafka=True)  # 4.3: the REST strategy, Kafka for ListOffsets
    world.kafka.create_topic("orders", 2)
    world.kafka.create_topic("payments", 1)
    world.kafka.produce("orders", 0, 5)
    world.kafka.produce("orders", 1, 3)
    world.kafka.produce("payments", 0, 9)
    config = {**SINK_CONFIG, "topics": "orders,payments"}
    world.seed(
        "sink",
        config,
        [sink_entry(0, 1), {**sink_entry(0, 2), "partition": {"kafka_topic": "payments", "kafka_partition": 0}}],
    )
    world.connect.calls.clear()
    world.create(reset_spec(connectorName="sink", action="toLatest", topics=["orders"]))
    assert await world.run() is True

    latest = [sink_entry(0, 5), sink_entry(1, 3)]
    assert world.connect.writes()[1] == Call("patch_offsets", ("sink", latest))
    assert world.offsets("sink") == [
        *latest,
        {"partition": {"kafka_topic": "payments", "kafka_partition": 0}, "offset": {"kafka_offset": 2}},
    ]
    plan = world.status()["plan"]
    assert plan["entries"] == {"sink": latest}
    assert plan["scope"]["sink"]["topics"] == ["orders"]
    assert plan["scope"]["sink"]["untouchedTopics"] == ["payments"]
    assert plan["scope"]["sink"]["untouchedPartitions"] == 1
    assert world.status()["strategy"] == "rest"
    assert world.status()["phase"] == "Succeeded"


async def test_a_set_to_action_on_a_topic_the_sink_does_not_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    world = kafka_world(monkeypatch, version="4.3.0")
    world.create(reset_spec(connectorName="sink", action="toEarliest", topics=["payments"]))
    assert await world.run() is True
    assert world.connect.writes() == []
    assert world.steps()["inspect"] == "Failed"
    assert "sink does not read topic(s) payments (it reads orders)" in world.condition("Succeeded")["message"]
    assert world.kafka.groups["connect-sink"] == GROUP_OFFSETS


# -- MirrorMaker 2: the offsetSyncs step ------------------------------------------------------------

MIRROR_SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
SYNCS = "mm2-offset-syncs.b.internal"  # on the source cluster (the default), named after the target alias


def mirror_world(monkeypatch: pytest.MonkeyPatch, *flows: str) -> ResetWorld:
    """MirrorSourceConnectors a -> b on a 4.3 worker; the reset reaches the source cluster (where
    the offset-syncs topic lives) through mirrorMaker2.sourceCluster, the ConnectCluster has no
    spec.kafka (the REST strategy, read back from Connect). Each flow replicated partition 0 of
    ``orders`` up to offset 7."""
    from tests.doubles.connect import FakePlugin

    world = make_reset_world(monkeypatch)
    world.connect.plugins.append(FakePlugin(MIRROR_SOURCE, "source"))
    world.kafka.create_topic(SYNCS, 1)
    world.kafka.produce(SYNCS, 0, 3)
    config = {
        "connector.class": MIRROR_SOURCE,
        "tasks.max": "1",
        "source.cluster.alias": "a",
        "target.cluster.alias": "b",
        "source.cluster.bootstrap.servers": BOOTSTRAP,
        "target.cluster.bootstrap.servers": BOOTSTRAP,
        "topics": "orders",
    }
    replicated = {"partition": {"cluster": "a", "topic": "orders", "partition": 0}, "offset": {"offset": 7}}
    for flow in flows:
        world.seed(flow, config, [replicated])
    world.connect.calls.clear()
    return world


def mirror_spec(**mm2: Any) -> dict[str, Any]:
    block = {
        "sourceConnector": "mm2-source",
        "sourceAlias": "a",
        "targetAlias": "b",
        "sourceCluster": {"bootstrapServers": BOOTSTRAP},
        **mm2,
    }
    return {"clusterRef": {"name": CLUSTER}, "action": "reset", "mirrorMaker2": block}


async def test_offset_syncs_deleted_when_the_reset_covers_every_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    world = mirror_world(monkeypatch, "mm2-source")
    world.create(mirror_spec(offsetSyncs="auto"))
    assert await world.run() is True

    assert SYNCS not in world.kafka.topics  # auto resolved to delete: no other flow uses it
    assert ("delete_topic", (SYNCS,)) in world.kafka.calls
    assert world.kafka.opened == [(BOOTSTRAP, {})]  # through mirrorMaker2.sourceCluster
    assert world.offsets("mm2-source") == []
    assert world.state("mm2-source") == ("STARTED", 1)
    assert world.steps() == dict.fromkeys(STEPS, "Done")
    assert world.step("offsetSyncs")["message"] == f"deleted offset-syncs topic {SYNCS}"
    plan = world.status()["plan"]
    assert (plan["offsetSyncsTopic"], plan["offsetSyncsCleanup"], plan["offsetSyncsCluster"]) == (
        SYNCS,
        "delete",
        "source",
    )


async def test_offset_syncs_shared_with_another_flow_refuses_before_any_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = mirror_world(monkeypatch, "mm2-source", "mm2-other")
    world.create(mirror_spec(offsetSyncs="auto"))
    assert await world.run() is True

    assert world.kafka.topics[SYNCS] != []  # still there
    assert ("delete_topic", (SYNCS,)) not in world.kafka.calls
    assert world.connect.writes() == []  # nothing stopped, nothing changed
    assert world.offsets("mm2-source") == world.offsets("mm2-other") != []
    assert world.steps()["inspect"] == "Failed"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "also used by 1 other MirrorSourceConnector flow" in cond["message"]
    assert world.kube.leases == {}


async def test_offset_syncs_kept_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    world = mirror_world(monkeypatch, "mm2-source", "mm2-other")
    world.create(mirror_spec(offsetSyncs="keep"))
    assert await world.run() is True

    assert SYNCS in world.kafka.topics
    assert world.offsets("mm2-source") == []
    assert world.offsets("mm2-other") != []  # the other flow is not touched
    assert world.steps()["offsetSyncs"] == "Skipped"
    assert world.status()["phase"] == "Succeeded"


#: the source cluster's SASL password, kept in a Secret of the reset's namespace
MM2_PASSWORD = "s3cret-mm2-password"
SASL_ACCESS = {
    "bootstrapServers": BOOTSTRAP,
    "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "mm2"},
    "configFrom": {"sasl.password": {"name": "mm2-kafka", "key": "password"}},
}


def everything_written(world: ResetWorld) -> str:
    """The stored OffsetReset (spec, status) and every Event, as one text to search."""
    return json.dumps([world.kube.objects[(NAMESPACE, "offsetresets", RESET)], world.events], default=str)


async def test_offset_syncs_cluster_credentials_come_from_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    world = mirror_world(monkeypatch, "mm2-source")
    world.kube.add_secret(NAMESPACE, "mm2-kafka", {"password": MM2_PASSWORD})
    world.create(mirror_spec(offsetSyncs="delete", sourceCluster=SASL_ACCESS))
    assert await world.run() is True

    assert SYNCS not in world.kafka.topics
    # the Kafka client of the source cluster got the plain settings and the Secret's value
    assert world.kafka.opened == [
        (
            BOOTSTRAP,
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "mm2",
                "sasl.password": MM2_PASSWORD,
            },
        )
    ]
    assert world.steps() == dict.fromkeys(STEPS, "Done")
    assert MM2_PASSWORD not in everything_written(world)


async def test_a_kafka_error_echoing_the_secret_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    world = mirror_world(monkeypatch, "mm2-source")
    world.kube.add_secret(NAMESPACE, "mm2-kafka", {"password": MM2_PASSWORD})

    def echoing_factory(bootstrap: str, config: Mapping[str, str]) -> KafkaApi:
        # a client that quotes a setting's value in its error (as librdkafka does for an invalid one)
        raise KafkaAccessDenied(f"authentication failed with password {config['sasl.password']}")

    monkeypatch.setattr(world.executor, "_kafka_factory", echoing_factory)
    world.create(mirror_spec(offsetSyncs="delete", sourceCluster=SASL_ACCESS))
    await world.drive()

    assert world.steps()["offsetSyncs"] == "Failed"
    assert "authentication failed with password [redacted]" in world.step("offsetSyncs")["message"]
    assert MM2_PASSWORD not in everything_written(world)


async def test_an_invalid_connector_object_waits_then_runs_once_fixed(world: ResetWorld) -> None:
    """The invalid object is the Connector, not the reset: fixing it never re-runs the reset's
    handler, so the reset must not fail for good (kopf-permanent) while it says "retrying"."""
    world.add_connector_object(
        "orders-obj",
        {"clusterRef": {"name": CLUSTER}, "connectorName": NAME, "class": FILE_SOURCE, "config": {"name": "x"}},
    )
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset"})
    with pytest.raises(ReferenceInvalid) as raised:
        await world.run()
    assert world.status()["phase"] == "Pending"
    cond = world.condition("Succeeded")
    assert (cond["status"], cond["reason"]) == ("Unknown", "InvalidTarget")
    assert "Connector orders-obj is invalid" in cond["message"]
    assert world.connect.writes() == []
    assert world.kube.leases == {}
    # re-checked on the capped delay, not abandoned
    error = as_kopf_error(raised.value, retry=3, base=2.0, maximum=300.0)
    assert isinstance(error, kopf.TemporaryError)
    assert error.delay == 300.0

    world.add_connector_object(
        "orders-obj",
        {"clusterRef": {"name": CLUSTER}, "connectorName": NAME, "class": FILE_SOURCE, "config": {"topic": "o"}},
    )
    assert await world.run() is True  # kopf's retry, after the fix
    assert world.status()["phase"] == "Succeeded"


@pytest.mark.parametrize("secret", [None, {"other": "x"}], ids=["no-secret", "no-key"])
async def test_a_missing_credential_secret_waits_before_any_change(
    monkeypatch: pytest.MonkeyPatch, secret: dict[str, str] | None
) -> None:
    world = mirror_world(monkeypatch, "mm2-source")
    if secret is not None:
        world.kube.add_secret(NAMESPACE, "mm2-kafka", secret)
    world.create(mirror_spec(offsetSyncs="delete", sourceCluster=SASL_ACCESS))
    with pytest.raises(KubeError):
        await world.run()

    assert world.status()["phase"] == "Pending"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "ReferenceNotFound"
    assert f"Secret {NAMESPACE}/mm2-kafka" in cond["message"]
    assert world.connect.writes() == []  # nothing stopped, nothing changed
    assert world.kafka.opened == []
    assert SYNCS in world.kafka.topics
    assert world.kube.leases == {}

    world.kube.add_secret(NAMESPACE, "mm2-kafka", {"password": MM2_PASSWORD})
    assert await world.run() is True  # kopf's retry, once the Secret is there
    assert world.status()["phase"] == "Succeeded"
    assert world.kafka.opened[0][1]["sasl.password"] == MM2_PASSWORD


def test_a_setting_in_both_config_and_config_from_is_invalid() -> None:
    access = {**SASL_ACCESS, "config": {"sasl.password": "inline"}}
    with pytest.raises(ValidationError, match=r"\['sasl.password'\] are set in both config and configFrom"):
        OffsetResetSpec.model_validate(mirror_spec(sourceCluster=access))


async def test_an_offsets_topic_that_is_not_there_is_refused_before_any_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the ConnectCluster names no spec.topics: the default connect-offsets, which this Kafka lacks
    world = make_reset_world(monkeypatch, kafka=True)
    world.seed(NAME, SOURCE_CONFIG, SOURCE_OFFSETS)
    world.connect.calls.clear()
    world.create(reset_spec())
    assert await world.run() is True

    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.state(NAME) == ("STARTED", 1)
    assert world.steps()["inspect"] == "Failed"
    cond = world.condition("Succeeded")
    assert cond["reason"] == "InspectFailed"
    assert "'connect-offsets' (ConnectCluster main spec.topics.offsets) does not exist" in cond["message"]
    assert world.kube.leases == {}


async def test_a_new_reset_that_cannot_read_its_references_says_it_started(world: ResetWorld) -> None:
    """Its acceptance rides on the lock step's start, but a failure before that (here the API
    server not answering the ConnectCluster read) still writes it, so the object says what it
    is doing while kopf retries; nothing was locked or called."""
    world.seed("bystander", SOURCE_CONFIG, SOURCE_OFFSETS)
    world.create(reset_spec())
    world.kube.fail_next("connect_cluster", KubeUnavailable("get connectclusters: HTTP 503"))
    with pytest.raises(KubeUnavailable):
        await world.run()
    status = world.status()
    assert status["phase"] == "Running"
    assert status["specHash"]
    assert world.steps() == dict.fromkeys(STEPS, "Pending")
    assert world.condition("Succeeded")["reason"] == "Running"
    assert world.connect.writes() == []
    assert not [c for c in world.kube.calls if c[0] == "acquire_lock"]
    # the offsets as the worker holds them: nothing moved, the target's or another's
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert world.offsets("bystander") == SOURCE_OFFSETS
    assert await world.run() is True  # kopf's retry
    assert world.status()["phase"] == "Succeeded"
    assert world.offsets(NAME) == []
    assert world.offsets("bystander") == SOURCE_OFFSETS


async def test_a_waiting_reset_whose_read_fails_again_writes_nothing_new(world: ResetWorld) -> None:
    """Only a reset of which nothing is written yet is written on a failed read: one already
    waiting (its acceptance and its reason on the object) is left as it is while kopf retries."""
    world.seed("bystander", SOURCE_CONFIG, SOURCE_OFFSETS)
    world.create({"connectorRef": {"name": "orders-obj"}, "action": "reset"})
    with pytest.raises(KubeObjectMissing):
        await world.run()
    writes = len(world.kube.status_patches)
    world.add_connector_object(
        "orders-obj",
        {"clusterRef": {"name": CLUSTER}, "connectorName": NAME, "class": FILE_SOURCE, "config": {"topic": "o"}},
    )
    world.kube.fail_next("connect_cluster", KubeUnavailable("get connectclusters: HTTP 503"))
    with pytest.raises(KubeUnavailable):
        await world.run()
    assert len(world.kube.status_patches) == writes
    assert world.status()["phase"] == "Pending"
    assert world.connect.writes() == []
    assert world.offsets(NAME) == SOURCE_OFFSETS
    assert await world.run() is True
    assert world.status()["phase"] == "Succeeded"
    assert world.offsets(NAME) == []
    assert world.offsets("bystander") == SOURCE_OFFSETS
