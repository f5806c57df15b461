"""Resyncs observe a worker group with one expanded listing, shared by its Connectors (issue 17).

What must hold: with nothing to do, a resync of N Connectors costs one Connect call, not 2N; the
listing only ever decides "nothing to do" (anything to do is decided again on the connector's
own reads, so a listing up to half a period old never causes a write); it is not shared across
namespaces; and a worker that cannot answer it is read one connector at a time, without asking
for the listing again before the period is over.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from connectops.adapters.connect_rest import ConnectResponseTooLarge
from connectops.reconcilers import clusters
from tests.doubles.connect import FILE_SOURCE, Call
from tests.reconcilers.world import CLUSTER, NAMESPACE, URL, World, make_world

pytestmark = pytest.mark.timeout(30)

RESYNC = 60.0
NAMES = ("alpha", "beta", "gamma")


def spec(name: str) -> dict[str, Any]:
    return {
        "clusterRef": {"name": CLUSTER},
        "class": FILE_SOURCE,
        "config": {"file": f"/data/{name}.txt", "topic": name},
    }


class Clock:
    """The monotonic clock of clusters.py (the listing's age) moved on by the test, and only it."""

    def __init__(self) -> None:
        import time

        self._real = time.monotonic
        self.offset = 0.0

    def monotonic(self) -> float:
        return self._real() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(clusters, "time", fake)
    return fake


async def population(world: World, namespace: str = NAMESPACE) -> dict[str, dict[str, Any]]:
    """The Connectors created and reconciled once each; their bodies by name; calls forgotten."""
    bodies = {}
    for name in NAMES:
        world.body = {}
        world.apply(spec(name), name=f"{namespace}-{name}" if namespace != NAMESPACE else name)
        world.body["metadata"]["namespace"] = namespace
        world.body["metadata"]["uid"] = f"uid-{namespace}-{name}"
        world.body["spec"]["connectorName"] = name if namespace == NAMESPACE else f"{namespace}-{name}"
        outcome = await world.reconcile()
        assert outcome.error is None, outcome.error
        bodies[name] = world.body
    world.connect.calls.clear()
    world.events.clear()
    return bodies


async def resync(world: World, body: dict[str, Any]) -> None:
    world.body = body
    outcome = await world.reconcile(periodic=True)
    assert outcome.error is None, outcome.error


def methods(world: World) -> list[tuple[str, tuple[Any, ...]]]:
    return [(c.method, c.args) for c in world.connect.calls if c.method not in ("server_info",)]


async def test_a_resync_of_every_connector_is_one_call(clock: Clock) -> None:
    world = make_world(resync_seconds=RESYNC)
    bodies = await population(world)
    for name in NAMES:
        await resync(world, bodies[name])
    assert methods(world) == [("list_expanded", ())]
    assert world.connect.writes() == []
    # what each status says is the listing's, as the single reads would give it
    assert {b["status"]["connectorState"] for b in bodies.values()} == {"RUNNING"}
    assert {b["status"]["tasksRunning"] for b in bodies.values()} == {"1/1"}

    # the next period reads the listing again, once
    clock.offset += RESYNC / 2
    for name in NAMES:
        await resync(world, bodies[name])
    assert methods(world) == [("list_expanded", ()), ("list_expanded", ())]


async def test_drift_in_the_listing_is_corrected_from_the_connectors_own_reads(clock: Clock) -> None:
    world = make_world(resync_seconds=RESYNC)
    bodies = await population(world)
    world.connect.connectors["beta"].config["topic"] = "elsewhere"  # by hand, behind the operator
    for name in NAMES:
        await resync(world, bodies[name])
    assert world.connect.connectors["beta"].config["topic"] == "beta"
    assert world.connect.writes() == [Call("put_config", ("beta", world.connect.connectors["beta"].config))]
    # one listing for all three; only the drifted one read alone (before deciding), and settled
    singles = {c.args[0] for c in world.connect.calls if c.method in ("get_config", "get_status")}
    assert singles == {"beta"}
    assert [c.method for c in world.connect.calls].count("list_expanded") == 1
    assert ("Warning", "DriftCorrected") in world.event_reasons()


async def test_a_stale_listing_never_causes_a_write(clock: Clock) -> None:
    world = make_world(resync_seconds=RESYNC)
    bodies = await population(world)
    world.connect.connectors["beta"].config["topic"] = "elsewhere"
    await resync(world, bodies["alpha"])  # the listing is read now and shows beta drifted
    world.connect.connectors["beta"].config["topic"] = "beta"  # someone put it back meanwhile
    await resync(world, bodies["beta"])
    assert world.connect.writes() == []
    assert world.event_reasons() == []
    assert [c.method for c in world.connect.calls] == ["list_expanded", "get_config", "get_status"]


async def test_a_listing_is_never_shared_across_namespaces(clock: Clock) -> None:
    world = make_world(resync_seconds=RESYNC)
    other = "tenant-b"
    world.kube.add_connect_cluster(other, CLUSTER, {"restUrl": URL})
    mine, theirs = await population(world), await population(world, other)
    for body in [*mine.values(), *theirs.values()]:
        await resync(world, body)
    # the same worker, two ConnectCluster objects (each with its own credentials): two listings
    assert [c.method for c in world.connect.calls] == ["list_expanded", "list_expanded"]
    assert world.connect.writes() == []


async def test_a_worker_that_cannot_list_is_read_one_by_one_and_asked_once_per_period(clock: Clock) -> None:
    world = make_world(resync_seconds=RESYNC)
    bodies = await population(world)
    too_large = ConnectResponseTooLarge("list connectors expanded: the answer is larger than 32 MiB; not read")
    world.connect.fail_next("list_expanded", too_large)
    world.connect.connectors["gamma"].config["topic"] = "elsewhere"
    for name in NAMES:
        await resync(world, copy.deepcopy(bodies[name]))
    reads = [c for c in world.connect.calls if c.method in ("get_config", "get_status")]
    assert sorted({c.args[0] for c in reads}) == sorted(NAMES)
    assert [c.method for c in world.connect.calls].count("list_expanded") == 1
    assert world.connect.connectors["gamma"].config["topic"] == "gamma"
    clock.offset += RESYNC / 2
    world.connect.calls.clear()
    await resync(world, bodies["alpha"])
    assert [c.method for c in world.connect.calls] == ["list_expanded"]


async def test_a_connector_missing_from_the_listing_is_read_alone(clock: Clock) -> None:
    """A worker leaves out a connector it cannot describe at that moment: absent from the listing
    is not proof of absence."""
    world = make_world(resync_seconds=RESYNC)
    bodies = await population(world)
    await resync(world, bodies["alpha"])
    world.connect.calls.clear()
    cluster = await world.reconciler._clusters.resolve(NAMESPACE, CLUSTER)
    cluster.forget_listed("beta")
    await resync(world, bodies["beta"])
    assert [c.method for c in world.connect.calls] == ["get_config", "get_status"]
    assert world.connect.writes() == []


def slow(call: Any) -> Any:
    import asyncio

    async def answer(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.01)
        return await call(*args, **kwargs)

    return answer


async def test_at_start_up_every_connector_shares_one_answer_of_each_kind() -> None:
    """Every object resumes at once at start-up: one ``GET /``, one plugin list, one listing,
    not one per Connector (the apply benchmark saw 1,000 ``GET /`` before the first answer)."""
    import asyncio

    world = make_world(resync_seconds=RESYNC)
    fake = world.connect
    for method in ("server_info", "list_plugins", "list_expanded"):
        # a worker takes time to answer: the other callers arrive before the first answer
        setattr(fake, method, slow(getattr(fake, method)))
    cluster = await world.reconciler._clusters.resolve(NAMESPACE, CLUSTER)
    await asyncio.gather(
        *(cluster.capabilities(60.0) for _ in range(20)),
        *(cluster.plugins(60.0) for _ in range(20)),
        *(cluster.listing(RESYNC / 2) for _ in range(20)),
    )
    assert sorted(c.method for c in world.connect.calls) == ["list_expanded", "list_plugins", "server_info"]


async def test_a_listing_keeps_only_the_connectors_this_namespace_names(clock: Clock) -> None:
    """A worker shared by many teams lists every team's connectors: only the ones this
    namespace's objects name are kept (what the operator holds is bounded by its objects)."""
    world = make_world(resync_seconds=RESYNC)
    bodies = await population(world)
    for other in ("stranger-1", "stranger-2"):
        world.connect.seed(other, {"connector.class": FILE_SOURCE, "file": "/x", "topic": other})
    world.body = bodies["alpha"]
    await world.reconcile(periodic=True, listed=lambda name: name in NAMES)
    cluster = await world.reconciler._clusters.resolve(NAMESPACE, CLUSTER)
    kept = await cluster.listing(RESYNC / 2)
    assert kept is not None
    assert sorted(kept) == sorted(NAMES)
    assert [c.method for c in world.connect.calls] == ["list_expanded"]


async def test_a_listing_never_clears_the_restart_count(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI25: a task that fails again after each restart is RUNNING for a moment; a listing taken
    then said Ready, the count of automatic restarts was cleared at each resync, and the task was
    restarted 8 times where maxRestarts said 2. Clearing the count is decided on fresh reads."""
    world = make_world(resync_seconds=RESYNC)
    world.apply({**spec("orders"), "autoRestart": {"maxRestarts": 2, "backoff": {"initialSeconds": 60}}})
    await world.reconcile()
    world.connect.fail_task("orders", 0, sticky=True)
    await world.reconcile(periodic=True)  # the failure seen: its restart is due 60 s later
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 60)
    await world.reconcile(periodic=True)
    assert world.status["autoRestart"]["count"] == 1
    # the listing of the next period is taken while the task runs for a moment…
    world.connect.connectors["orders"].task_failures.clear()
    clock.offset += RESYNC / 2
    cluster = await world.reconciler._clusters.resolve(NAMESPACE, CLUSTER)
    assert (await cluster.listing(RESYNC / 2)) is not None
    # …and it has failed again by the time the Connector's resync comes
    world.connect.fail_task("orders", 0, sticky=True)
    await world.reconcile(periodic=True)
    assert world.status["autoRestart"]["count"] == 1
    assert world.reasons()["Ready"] == ("False", "TasksFailed")


async def test_a_slow_listing_is_not_asked_again_sooner_than_it_took(clock: Clock) -> None:
    """Connect builds the listing in time quadratic in its connectors (50 s here, as at 10,000):
    kept half a period only, a restart's resumes still at work when it expired asked again, and
    the worker spent its time listing. It is kept at least as long as it took to answer."""
    world = make_world(resync_seconds=RESYNC)
    await population(world)
    fake = world.connect
    answer = fake.list_expanded

    async def fifty_seconds(*args: Any, **kwargs: Any) -> Any:
        clock.offset += 50.0
        return await answer(*args, **kwargs)

    fake.list_expanded = fifty_seconds  # type: ignore[method-assign]
    cluster = await world.reconciler._clusters.resolve(NAMESPACE, CLUSTER)
    fake.calls.clear()
    assert await cluster.listing(RESYNC / 2) is not None
    clock.offset += 40.0  # past half a period (30 s), not yet as long as the listing took
    assert await cluster.listing(RESYNC / 2) is not None
    assert [c.method for c in fake.calls] == ["list_expanded"]
    clock.offset += 11.0  # 51 s after its answer
    await cluster.listing(RESYNC / 2)
    assert [c.method for c in fake.calls] == ["list_expanded", "list_expanded"]


async def test_a_listing_asked_before_the_claims_are_read_keeps_what_they_name_once_read(clock: Clock) -> None:
    """A start asks for the listing while it still reads the Connectors' claims: filtered when
    Connect answered, the connectors of objects read after that would be dropped (and each then
    read alone). The answer waits for the claims; its age is the answer's."""
    world = make_world(resync_seconds=RESYNC)
    await population(world)
    cluster = await world.reconciler._clusters.resolve(NAMESPACE, CLUSTER)
    named: set[str] = {"alpha"}  # the claims read so far
    claims_read = asyncio.Event()
    asked = asyncio.create_task(cluster.listing(RESYNC / 2, named.__contains__, settled=claims_read))
    for _ in range(100):
        await asyncio.sleep(0)
        if world.connect.calls:
            break
    await asyncio.sleep(0.05)
    assert [c.method for c in world.connect.calls] == ["list_expanded"]
    assert not asked.done()  # answered, and held until the claims are read
    named.update({"beta", "gamma"})
    claims_read.set()
    kept = await asked
    assert kept is not None
    assert sorted(kept) == sorted(NAMES)
    # shared as any listing is: the resumes that follow ask Connect nothing more
    assert await cluster.listing(RESYNC / 2, named.__contains__) is not None
    assert [c.method for c in world.connect.calls] == ["list_expanded"]
