"""Checks batched per Connect cluster: one SparkApplication per group and window, capped, newer
requests superseding waiting ones, and every member reading its own verdict.

The manifest is read back the way the job reads it (``connectops_check.cli``'s parser with
``--each``), so a member's arguments are what the job will see, not what the batcher meant."""

from __future__ import annotations

import asyncio
import copy
import json
import shlex
from typing import Any, cast

from kubernetes import client

from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.models.checks import CheckSpec, LastCheck
from connectops.models.connect_cluster import ConnectClusterSpec
from connectops.planning.checks import BUILTIN_DEFAULTS, LABEL_BATCH, SPARK_PLURAL, CheckContext
from connectops.reconcilers.checks import CheckRunner
from connectops.settings import Settings
from connectops_check.cli import parser
from tests.doubles.kube import FakeKube

WINDOW = 0.2


def _cluster(bootstrap: str = "kafka:9092") -> ConnectClusterSpec:
    return ConnectClusterSpec.model_validate(
        {"restUrl": "http://connect:8083", "kafka": {"bootstrapServers": bootstrap}}
    )


def _runner(kube: FakeKube, *, max_connectors: int = 50, max_running: int = 4) -> CheckRunner:
    settings = Settings(
        check_batch_window_seconds=WINDOW, check_batch_max_connectors=max_connectors, check_max_running=max_running
    )
    runner = CheckRunner(cast(KubeClient, kube), settings, BUILTIN_DEFAULTS)
    runner.batches._slot_poll = 0.05  # the test's clock, not the operator's 2 s
    return runner


async def _request(
    runner: CheckRunner,
    name: str,
    *,
    namespace: str = "ns",
    cluster: ConnectClusterSpec | None = None,
    generation: int = 1,
    state: str = "running",
    check: CheckSpec | None = None,
) -> LastCheck:
    last = await runner.request(
        namespace=namespace,
        owner={
            "apiVersion": "connectops.io/v1alpha1",
            "kind": "Connector",
            "metadata": {"name": name, "uid": f"u-{name}"},
        },
        suffix=f"g{generation}",
        connector=f"c-{name}",
        cluster=cluster or _cluster(),
        cluster_name="connect",
        check=check or CheckSpec(),
        trigger=f"generation {generation}",
        context=CheckContext(desired_state=state),
    )
    assert last is not None
    return last


def _apps(kube: FakeKube) -> list[dict[str, Any]]:
    return [obj for (_, plural, _), obj in sorted(kube.objects.items()) if plural == SPARK_PLURAL]


def _members(app: dict[str, Any]) -> dict[str, Any]:
    """connector -> the arguments the job parses for it."""
    common = parser().parse_args(app["spec"]["arguments"])
    return {
        m.connector: m
        for m in (parser().parse_args(shlex.split(each), namespace=copy.copy(common)) for each in common.each)
    }


async def _settle(runner: CheckRunner, launched: int, timeout: float = 5.0) -> None:
    async def wait() -> None:
        while runner.batches.launched < launched:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout)


async def test_changes_within_the_window_share_one_application() -> None:
    kube = FakeKube()
    runner = _runner(kube)
    lasts = [await _request(runner, f"s{i}", state="paused" if i == 3 else "running") for i in range(10)]
    assert {last.state for last in lasts} == {"QUEUED"}
    assert len({last.application for last in lasts}) == 1
    assert _apps(kube) == []  # nothing before the window closes
    await _settle(runner, 1)
    (app,) = _apps(kube)
    assert app["metadata"]["name"] == lasts[0].application
    assert app["metadata"]["labels"][LABEL_BATCH] == "true"
    members = _members(app)
    assert sorted(members) == sorted(f"c-s{i}" for i in range(10))
    for i, last in enumerate(lasts):
        member = members[f"c-s{i}"]
        assert member.output_configmap == ("ns", last.verdict_config_map)
        assert member.bootstrap == "kafka:9092"
        assert member.desired_state == ("paused" if i == 3 else "running")
    assert len({m.output_configmap for m in members.values()}) == 10
    owners = app["metadata"]["ownerReferences"]
    assert sorted(o["uid"] for o in owners) == sorted(f"u-s{i}" for i in range(10))
    assert not any(o["controller"] for o in owners)
    await runner.batches.close()


async def test_other_namespaces_clusters_and_credentials_get_their_own_application() -> None:
    kube = FakeKube()
    runner = _runner(kube)
    await _request(runner, "a")
    await _request(runner, "b", namespace="other")
    await _request(runner, "c", cluster=_cluster("elsewhere:9092"))
    secret = ConnectClusterSpec.model_validate(
        {
            "restUrl": "http://connect:8083",
            "kafka": {"bootstrapServers": "kafka:9092", "configFrom": {"sasl.password": {"name": "s", "key": "k"}}},
        }
    )
    await _request(runner, "d", cluster=secret)
    await _settle(runner, 4)
    apps = _apps(kube)
    assert sorted(sorted(_members(app)) for app in apps) == [["c-a"], ["c-b"], ["c-c"], ["c-d"]]
    other = next(app for app in apps if "c-b" in _members(app))
    assert other["metadata"]["namespace"] == "other"
    assert _members(other)["c-b"].output_configmap[0] == "other"
    await runner.batches.close()


async def test_a_newer_change_supersedes_the_waiting_check() -> None:
    kube = FakeKube()
    runner = _runner(kube)
    first = await _request(runner, "a", generation=1)
    second = await _request(runner, "a", generation=2, state="paused")
    await _request(runner, "b")
    assert first.application == second.application
    await _settle(runner, 1)
    (app,) = _apps(kube)
    members = _members(app)
    assert sorted(members) == ["c-a", "c-b"]
    assert members["c-a"].desired_state == "paused"
    assert members["c-a"].output_configmap == ("ns", second.verdict_config_map)
    await runner.batches.close()


async def test_a_full_batch_goes_at_once_and_the_next_opens() -> None:
    kube = FakeKube()
    runner = _runner(kube, max_connectors=2)
    lasts = [await _request(runner, f"s{i}") for i in range(5)]
    assert len({last.application for last in lasts}) == 3
    await _settle(runner, 3)
    assert sorted(len(_members(app)) for app in _apps(kube)) == [1, 2, 2]
    await runner.batches.close()


async def test_the_cap_holds_batches_until_a_running_one_ends() -> None:
    kube = FakeKube()
    runner = _runner(kube, max_running=1)
    first = await _request(runner, "a")
    await _settle(runner, 1)
    second = await _request(runner, "b", namespace="other")
    await asyncio.sleep(WINDOW + 0.3)
    assert len(_apps(kube)) == 1  # the second waits: one is running
    late = await _request(runner, "c", namespace="other")
    assert late.application == second.application  # a waiting batch still takes members
    kube.objects[("ns", SPARK_PLURAL, first.application)]["status"] = {"applicationState": {"state": "COMPLETED"}}
    await _settle(runner, 2)
    assert sorted(sorted(_members(app)) for app in _apps(kube)) == [["c-a"], ["c-b", "c-c"]]
    assert runner.batches.peak_running == 1
    await runner.batches.close()


async def test_the_cap_holds_when_batches_are_due_at_once() -> None:
    """Batches whose windows close together: the first takes the slot, the others wait for it
    (checking for a free slot and creating across an await let every one through)."""
    kube = FakeKube()
    runner = _runner(kube, max_running=1)
    lasts = [await _request(runner, name, namespace=f"ns-{name}") for name in ("a", "b", "c")]
    await _settle(runner, 1)
    await asyncio.sleep(WINDOW + 0.3)
    assert [app["metadata"]["name"] for app in _apps(kube)] == [lasts[0].application]
    for i, last in enumerate(lasts[:2]):
        kube.objects[(f"ns-{'abc'[i]}", SPARK_PLURAL, last.application)]["status"] = {
            "applicationState": {"state": "COMPLETED"}
        }
        await _settle(runner, i + 2)
        assert len(_apps(kube)) == i + 2
    assert runner.batches.peak_running == 1
    await runner.batches.close()


async def test_a_withdrawn_member_is_not_checked_and_an_empty_batch_not_launched() -> None:
    kube = FakeKube()
    runner = _runner(kube)
    await _request(runner, "a")
    runner.batches.withdraw("u-a")
    await asyncio.sleep(WINDOW + 0.2)
    assert _apps(kube) == []
    assert runner.batches.launched == 0
    await runner.batches.close()


async def test_each_member_reads_its_own_verdict_and_a_failed_part_fails_only_itself() -> None:
    kube = FakeKube()
    runner = _runner(kube)
    good, bad = await _request(runner, "good"), await _request(runner, "bad")
    queued, result = await runner.poll("ns", good, CheckSpec())
    assert (queued.state, result) == ("QUEUED", None)
    await _settle(runner, 1)
    launched, _ = await runner.poll("ns", good, CheckSpec())
    assert launched.state == "PENDING"  # launched; the spark-operator has not written a state yet
    kube.objects[("ns", SPARK_PLURAL, good.application)]["status"] = {"applicationState": {"state": "COMPLETED"}}
    verdict: dict[str, Any] = {
        "verdict": "HEALTHY",
        "lag": {"total": 0},
        "balance": None,
        "headline": {"totalLag": 0},
        "reasons": [],
    }
    for last, document in (
        (good, verdict),
        (bad, {"connector": "c-bad", "verdict": None, "error": "KafkaException: x"}),
    ):
        assert last.verdict_config_map is not None
        kube.config_maps[("ns", last.verdict_config_map)] = client.V1ConfigMap(
            data={"verdict.json": json.dumps(document)}
        )
    done, conditions = await runner.poll("ns", launched, CheckSpec())
    assert (done.state, done.verdict) == ("COMPLETED", "HEALTHY")
    assert conditions is not None
    assert conditions.lag[:2] == (True, "LagOK")
    failed, conditions = await runner.poll("ns", bad, CheckSpec())
    assert failed.state == "FAILED"
    assert failed.reasons == ["KafkaException: x"]
    assert conditions is not None
    assert conditions.lag[:2] == (None, "CheckFailed")
    await runner.batches.close()


async def test_a_refused_batch_is_not_submitted_for_every_member() -> None:
    kube = FakeKube()
    kube.fail_next("create_object", KubeObjectMissing("sparkapplications.sparkoperator.k8s.io is not served"))
    runner = _runner(kube)
    last = await _request(runner, "a")
    await asyncio.sleep(WINDOW + 0.2)
    updated, conditions = await runner.poll("ns", last, CheckSpec())
    assert updated.state == "NOT_SUBMITTED"
    assert "spark-operator" in updated.reasons[0]
    assert conditions is not None
    assert conditions.lag[1] == "CheckNotSubmitted"
    await runner.batches.close()


async def test_a_queued_check_of_a_gone_process_is_lost_unless_its_application_exists() -> None:
    kube = FakeKube()
    before = _runner(kube)
    last = await _request(before, "a")
    await before.batches.close()  # the process stops before the window closes
    after = _runner(kube)
    assert await after.lost("ns", last, "u-a")
    launched = _runner(kube)
    relaunched = await _request(launched, "a")
    await _settle(launched, 1)
    assert not await after.lost("ns", relaunched, "u-a")  # another process launched it: followed
    await launched.batches.close()
