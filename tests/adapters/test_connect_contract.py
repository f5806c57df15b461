"""One contract, two implementations: every scenario runs against ``FakeConnect`` (the in-memory
double the reconciler tests use) and against ``ConnectClient`` talking to the real Kafka Connect
4.3 worker, and asserts the same observable answers from both: return values, states, configs
and the types of the errors. When the real worker changes its mind, the fake's half still passes
and the real half fails, which is the signal to fix the double.

Waiting: the real worker applies writes asynchronously (a rebalance, then the tasks), the fake at
once; scenarios poll with :func:`eventually`, which returns immediately for the fake.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from connectops.adapters.connect_rest import (
    ConnectApi,
    ConnectClient,
    ConnectConflict,
    ConnectNotFound,
    ConnectorState,
    ConnectRejected,
    ConnectUnavailable,
)
from connectops.planning.connector import parse_version
from tests.doubles.connect import (
    FILE_SINK,
    FILE_SOURCE,
    JSON_CONVERTER,
    MSG_ALTERED,
    MSG_RESET,
    VERSIONED_SOURCE,
    FakeConnect,
)

pytestmark = pytest.mark.timeout(120)

_T = TypeVar("_T")


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.e2e)])
def worker_url(request: pytest.FixtureRequest) -> str | None:
    """None for the double; the real worker's URL (started once per session) otherwise."""
    if request.param == "fake":
        return None
    return str(request.getfixturevalue("connect").url)


@pytest.fixture
async def api(worker_url: str | None) -> AsyncIterator[ConnectApi]:
    if worker_url is None:
        yield FakeConnect()
        return
    # more patience with the group's rebalances than the operator's defaults: each create or
    # delete on this one-worker group rebalances, and the scenarios write right after
    client = ConnectClient(worker_url, timeout=15, rebalance_retries=8, rebalance_delay=0.25)
    created_before = set(await client.list_connectors())
    try:
        yield client
    finally:
        for name in set(await client.list_connectors()) - created_before:
            await client.delete(name)
        await client.aclose()


async def eventually(read: Callable[[], Awaitable[_T]], ok: Callable[[_T], bool], timeout: float = 30) -> _T:
    deadline = time.monotonic() + timeout
    while True:
        value = await read()
        if ok(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.2)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def source(name: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(tmp_path / "in.txt"), "topic": name, **extra}


def sink(name: str, file: Path, **extra: str) -> dict[str, str]:
    return {"connector.class": FILE_SINK, "tasks.max": "1", "file": str(file), "topics": name, **extra}


def summary(state: ConnectorState | None) -> tuple[str, list[str]] | None:
    return None if state is None else (state.state, [t.state for t in state.tasks])


async def status_of(api: ConnectApi, name: str, want: tuple[str, list[str]]) -> tuple[str, list[str]] | None:
    async def read() -> tuple[str, list[str]] | None:
        return summary(await api.get_status(name))

    return await eventually(read, lambda s: s == want)


# -- the worker ---------------------------------------------------------------------------------


async def test_worker_answers(api: ConnectApi) -> None:
    info = await api.server_info()
    assert parse_version(info.version) >= (3, 9, 0)
    assert info.kafka_cluster_id
    health = await api.health()
    assert (health.status, health.message) == (
        "healthy",
        "Worker has completed startup and is ready to handle requests.",
    )
    plugins = await api.list_plugins()
    assert {(FILE_SOURCE, "source"), (FILE_SINK, "sink")} <= {(p.class_name, p.type) for p in plugins}
    # connectorsOnly=false: converters too, a class that is both kinds listed once per kind
    assert {(JSON_CONVERTER, "converter"), (JSON_CONVERTER, "header_converter")} <= {
        (p.class_name, p.type) for p in plugins
    }
    # KIP-891: one entry per installed version of a class
    assert sorted(p.version or "" for p in plugins if p.class_name == VERSIONED_SOURCE) == ["1.0.0", "2.0.0"]


# -- plugin versions (KIP-891) ------------------------------------------------------------------


def versioned(name: str, **extra: str) -> dict[str, str]:
    return {"connector.class": VERSIONED_SOURCE, "tasks.max": "1", "topic": name, **extra}


async def running_version(api: ConnectApi, name: str) -> tuple[str | None, list[str | None]] | None:
    async def read() -> ConnectorState | None:
        return await api.get_status(name)

    state = await eventually(read, lambda s: s is not None and s.state == "RUNNING" and len(s.tasks) == 1)
    return None if state is None else (state.version, [t.version for t in state.tasks])


@pytest.mark.parametrize(
    ("pin", "runs"),
    [(None, "2.0.0"), ("1.0.0", "1.0.0"), ("[1.0,2.0)", "1.0.0"), ("[1.0,)", "2.0.0"), ("latest", "2.0.0")],
)
async def test_the_pinned_version_runs(api: ConnectApi, pin: str | None, runs: str) -> None:
    name = unique("pinned")
    pinned = {"connector.plugin.version": pin} if pin is not None else {}
    await api.create(name, versioned(name, **pinned))
    assert await running_version(api, name) == (runs, [runs])
    # no pin: Connect stores no version key of its own (the operator's drift check relies on it)
    assert await api.get_config(name) == {**versioned(name, **pinned), "name": name}


async def test_a_version_nothing_matches_is_a_validation_error(api: ConnectApi) -> None:
    name = unique("unpinnable")
    config = {**versioned(name, **{"connector.plugin.version": "[3.0,)"}), "name": name}
    result = await api.validate(VERSIONED_SOURCE, config)
    # reported on the class and on the version key alike
    assert sorted(result.errors) == ["connector.class", "connector.plugin.version"]
    assert result.errors["connector.plugin.version"] == [
        f"Plugin {VERSIONED_SOURCE} not found that matches the version range [3.0,), available versions: [1.0.0, 2.0.0]"
    ]
    # a bare version is exact ([1.5,1.5] in Maven's terms), not Maven's soft "anything, 1.5 preferred"
    exact = await api.validate(VERSIONED_SOURCE, {**config, "connector.plugin.version": "1.5"})
    assert "version range [1.5,1.5]" in exact.errors["connector.plugin.version"][0]
    # the write is refused; Connect 4.3 answers some of these with a 500 (a NullPointerException
    # building the error), which a client takes for an outage: why the operator checks first
    with pytest.raises((ConnectRejected, ConnectUnavailable)):
        await api.create(name, config)
    assert await api.get_status(name) is None


async def test_the_expanded_listing_answers_what_the_single_reads_answer(api: ConnectApi, tmp_path: Path) -> None:
    """What a resync observes with one call must be what the two reads per connector answer."""
    running, paused = unique("listed"), unique("listed-paused")
    await api.create(running, source(running, tmp_path))
    await api.create(paused, source(paused, tmp_path), "PAUSED")
    await status_of(api, running, ("RUNNING", ["RUNNING"]))
    await status_of(api, paused, ("PAUSED", []))
    listing = await api.list_expanded()
    for name in (running, paused):
        assert listing[name].config == await api.get_config(name)
        assert listing[name].state == await api.get_status(name)
    assert {running, paused} <= set(listing)
    await api.delete(paused)
    assert paused not in await eventually(api.list_expanded, lambda found: paused not in found)


async def test_a_missing_connector(api: ConnectApi) -> None:
    name = unique("missing")
    assert await api.get_config(name) is None
    assert await api.get_status(name) is None
    assert await api.get_connector(name) is None
    assert name not in await api.list_connectors()
    assert await api.delete(name) is False
    for call in (
        lambda: api.pause(name),
        lambda: api.resume(name),
        lambda: api.stop(name),
        lambda: api.restart(name, include_tasks=True, only_failed=True),
        lambda: api.restart(name, include_tasks=False, only_failed=False),
        lambda: api.restart_task(name, 0),
        lambda: api.get_offsets(name),
        lambda: api.patch_offsets(name, [{"partition": {"filename": "x"}, "offset": {"position": 1}}]),
        lambda: api.delete_offsets(name),
    ):
        with pytest.raises(ConnectNotFound):
            await call()


# -- validation ---------------------------------------------------------------------------------


async def test_validation(api: ConnectApi, tmp_path: Path) -> None:
    good = {**source("v", tmp_path), "name": "v"}
    assert (await api.validate(FILE_SOURCE, good)).error_count == 0
    # an alias resolves like the full name; keys the connector does not know are not errors
    assert (await api.validate("FileStreamSource", {**good, "connector.class": "FileStreamSource"})).error_count == 0
    assert (await api.validate(FILE_SOURCE, {**good, "no.such.key": "x"})).error_count == 0
    # override keys pass under the worker's policy "All"
    assert (await api.validate(FILE_SOURCE, {**good, "producer.override.linger.ms": "5"})).error_count == 0

    without_topic = {k: v for k, v in good.items() if k != "topic"}
    result = await api.validate(FILE_SOURCE, without_topic)
    assert result.error_count == 1
    assert result.errors == {"topic": ['Missing required configuration "topic" which has no default value.']}

    result = await api.validate(FILE_SOURCE, {**good, "tasks.max": "0"})
    assert set(result.errors) == {"tasks.max"}
    assert result.errors["tasks.max"] == ["Invalid value 0 for configuration tasks.max: Value must be at least 1"]

    result = await api.validate(FILE_SINK, {"connector.class": FILE_SINK, "name": "s", "file": str(tmp_path / "o")})
    assert set(result.errors) == {"topics", "topics.regex"}
    assert result.error_count == 2

    with pytest.raises(ConnectRejected):
        await api.validate("org.example.NoSuchConnector", {**good, "connector.class": "org.example.NoSuchConnector"})


# -- lifecycle ----------------------------------------------------------------------------------


async def test_create_update_states_delete(api: ConnectApi, tmp_path: Path) -> None:
    """KIP-980's initial state, then every target state. A connector created PAUSED never ran, so
    it has no task configs yet: PAUSED with no tasks (not paused tasks) until its first resume."""
    name = unique("life")
    config = sink(name, tmp_path / "o.txt", **{"tasks.max": "2"})
    await api.create(name, config, "PAUSED")
    # the worker stores the config as sent, with the name added
    assert await api.get_config(name) == {**config, "name": name}
    assert await status_of(api, name, ("PAUSED", [])) == ("PAUSED", [])
    with pytest.raises(ConnectConflict):
        await api.create(name, config)
    assert name in await api.list_connectors()

    # a config write keeps the target state
    changed = {**config, "batch.size": "100"}
    await api.put_config(name, changed)
    assert await api.get_config(name) == {**changed, "name": name}
    assert await status_of(api, name, ("PAUSED", [])) == ("PAUSED", [])

    await api.resume(name)  # a sink makes tasks.max tasks
    assert await status_of(api, name, ("RUNNING", ["RUNNING", "RUNNING"])) == ("RUNNING", ["RUNNING", "RUNNING"])
    info = await api.get_connector(name)
    assert info is not None
    assert (info["name"], info["type"], info["config"]) == (name, "sink", {**changed, "name": name})
    assert [t["task"] for t in info["tasks"]] == [0, 1]
    await api.pause(name)
    assert await status_of(api, name, ("PAUSED", ["PAUSED", "PAUSED"])) == ("PAUSED", ["PAUSED", "PAUSED"])
    await api.stop(name)
    assert await status_of(api, name, ("STOPPED", [])) == ("STOPPED", [])
    await api.resume(name)
    assert await status_of(api, name, ("RUNNING", ["RUNNING", "RUNNING"])) == ("RUNNING", ["RUNNING", "RUNNING"])

    assert await api.delete(name) is True
    assert await eventually(lambda: api.get_config(name), lambda c: c is None) is None
    # the status goes a moment after the config: Connect reads the deletion back from its status
    # topic (on Apache Kafka a stale UNASSIGNED status can still answer just after the config 404s)
    assert await eventually(lambda: api.get_status(name), lambda s: s is None) is None


async def test_invalid_writes_are_refused(api: ConnectApi, tmp_path: Path) -> None:
    name = unique("bad")
    without_topic = {k: v for k, v in source(name, tmp_path).items() if k != "topic"}
    with pytest.raises(ConnectRejected, match="contains the following 1 error"):
        await api.create(name, without_topic)
    with pytest.raises(ConnectRejected):
        await api.put_config(name, without_topic)
    with pytest.raises(ConnectRejected, match="doesn't match connector name"):
        await api.put_config(name, {**source(name, tmp_path), "name": "other"})
    assert await api.get_config(name) is None


# -- restarts -----------------------------------------------------------------------------------


async def test_a_task_that_fails_on_start(api: ConnectApi, tmp_path: Path) -> None:
    """FileStreamSink writing to a directory: its task fails in start(), after every restart too,
    until a config write gives it a file."""
    name = unique("fails")
    # PUT .../config creates a connector that does not exist yet, running
    await api.put_config(name, sink(name, tmp_path))
    failed = await status_of(api, name, ("RUNNING", ["FAILED"]))
    assert failed == ("RUNNING", ["FAILED"])
    state = await api.get_status(name)
    assert state is not None
    assert state.tasks[0].trace
    assert "ConnectException" in state.tasks[0].trace

    await api.restart(name, include_tasks=True, only_failed=True)
    assert await status_of(api, name, ("RUNNING", ["FAILED"])) == ("RUNNING", ["FAILED"])
    await api.restart_task(name, 0)
    assert await status_of(api, name, ("RUNNING", ["FAILED"])) == ("RUNNING", ["FAILED"])
    with pytest.raises(ConnectNotFound):
        await api.restart_task(name, 7)

    await api.put_config(name, sink(name, tmp_path / "out.txt"))
    assert await status_of(api, name, ("RUNNING", ["RUNNING"])) == ("RUNNING", ["RUNNING"])
    await api.restart(name, include_tasks=False, only_failed=False)
    await api.restart(name, include_tasks=True, only_failed=False)
    assert await status_of(api, name, ("RUNNING", ["RUNNING"])) == ("RUNNING", ["RUNNING"])


# -- offsets (KIP-875) --------------------------------------------------------------------------


async def test_offsets_change_only_when_stopped(api: ConnectApi, tmp_path: Path) -> None:
    name = unique("offsets")
    await api.create(name, source(name, tmp_path, **{"tasks.max": "2"}), "STOPPED")
    assert await status_of(api, name, ("STOPPED", [])) == ("STOPPED", [])
    assert await api.get_offsets(name) == []
    partition = {"filename": str(tmp_path / "in.txt")}
    assert await api.patch_offsets(name, [{"partition": partition, "offset": {"position": 5}}]) == MSG_ALTERED
    altered = [{"partition": partition, "offset": {"position": 5}}]
    assert await eventually(lambda: api.get_offsets(name), lambda o: o == altered, timeout=10) == altered
    assert await api.delete_offsets(name) == MSG_RESET
    assert await eventually(lambda: api.get_offsets(name), lambda o: o == [], timeout=10) == []

    await api.pause(name)  # never ran: no task configs to pause
    assert await status_of(api, name, ("PAUSED", [])) == ("PAUSED", [])
    await api.resume(name)  # FileStreamSource makes one task whatever tasks.max says
    assert await status_of(api, name, ("RUNNING", ["RUNNING"])) == ("RUNNING", ["RUNNING"])
    assert await api.get_offsets(name) == []  # readable in any state
    with pytest.raises(ConnectRejected, match="STOPPED state"):
        await api.patch_offsets(name, [{"partition": partition, "offset": {"position": 1}}])
    with pytest.raises(ConnectRejected, match="STOPPED state"):
        await api.delete_offsets(name)
