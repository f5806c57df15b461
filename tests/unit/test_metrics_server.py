"""The metrics endpoint: the per-object gauges written in pieces (``ObjectMetrics.render``) are,
byte for byte, what prometheus_client renders of the same objects through its own machinery (the
collector interface), whole and filtered by ``name[]``; the HTTP endpoint serves both parts."""

from __future__ import annotations

import random
import socket

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from connectops import metrics, metrics_server
from connectops.object_metrics import (
    CONNECT_STATES,
    CONNECTOR_FAMILIES,
    OBJECTS,
    PHASES,
    RESET_FAMILIES,
    VERDICTS,
    ObjectMetrics,
)


def populated(seed: int, connectors: int, resets: int) -> ObjectMetrics:
    """Objects with every kind of value: unknown states, missing figures, big and fractional
    numbers, and names that need escaping (the API server would refuse them; the format must not)."""
    rng = random.Random(seed)
    metrics = ObjectMetrics()
    odd = ['a"b', "back\\slash", "new\nline", "ünï"]
    for i in range(connectors):
        ns = rng.choice(["team-a", "team-b", *odd])
        status = {
            "connectorState": rng.choice([*CONNECT_STATES, "SOMETHING_NEW", None]),
            "conditions": [{"type": "Ready", "status": rng.choice(["True", "False"])}],
            "tasks": [
                {"id": t, "state": rng.choice(["RUNNING", "FAILED", "PAUSED"])} for t in range(rng.randint(0, 3))
            ],
            "autoRestart": {"count": rng.randint(0, 5)},
        }
        if rng.random() < 0.7:
            status["lastCheck"] = {
                "application": f"check-{i}",
                "verdict": rng.choice([*VERDICTS, "SOMETHING_NEW"]),
                "headline": {
                    "totalLag": rng.choice([None, 0, 7, 1.5, 123456789012, True]),
                    "timeLagSeconds": rng.choice([None, 0.25, 139.5, 1e-7]),
                },
            }
        spec = {"state": rng.choice(["running", "paused", "stopped", "bogus"])}
        metrics.observe_connector(ns, f"c-{i}-{rng.choice(odd)}", spec, status, uid=f"u{i}", drift=rng.random() < 0.3)
    for i in range(resets):
        phase = rng.choice([*PHASES, "Weird"])
        steps = [
            {
                "name": "lock",
                "state": "Done",
                "startedAt": "2026-11-29T10:00:00Z",
                "finishedAt": "2026-11-29T10:00:01Z",
            },
            {"name": "stop", "state": "Running", "startedAt": "2026-11-29T10:00:01.500Z"},
        ]
        metrics.observe_reset(
            "team-a", f"r-{i}", {"phase": phase, "steps": steps if rng.random() < 0.8 else []}, uid=f"r{i}"
        )
    return metrics


def by_prometheus_client(metrics: ObjectMetrics, names: set[str] | None = None) -> bytes:
    registry = CollectorRegistry(auto_describe=True)  # as prometheus_client.REGISTRY, where it was
    registry.register(metrics)
    return generate_latest(registry.restricted_registry(names) if names is not None else registry)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_render_writes_what_prometheus_client_writes(seed: int, chunk: int) -> None:
    metrics = populated(seed, connectors=60, resets=6)
    # duration gauges read the clock: both renderings in the same second of a finished reset only
    for view in metrics.resets.values():
        if view.started_at is not None and view.finished_at is None:
            view.finished_at = view.started_at + 1.5
    assert b"".join(metrics.render(chunk=chunk)) == by_prometheus_client(metrics)


def test_render_filtered_by_name_writes_what_the_filtered_registry_writes() -> None:
    metrics = populated(11, connectors=40, resets=3)
    for view in metrics.resets.values():
        view.finished_at = (view.started_at or 0) + 2
    no_series = ObjectMetrics()  # families with no series: dropped when filtered, as there
    no_series.observe_connector("ns", "c", {}, {}, uid="u")
    every = [family.name for family, _ in (*CONNECTOR_FAMILIES, *RESET_FAMILIES)]
    for names in [{every[0]}, {every[2], every[8], every[-1]}, set(every), {"connectops_reconciles_total"}, set()]:
        for m in (metrics, no_series):
            assert b"".join(m.render(names, chunk=5)) == by_prometheus_client(m, names), names


def test_an_empty_collector_writes_every_family_header_as_prometheus_client_does() -> None:
    empty = ObjectMetrics()
    assert b"".join(empty.render()) == by_prometheus_client(empty)
    assert b"".join(empty.render()).count(b"# TYPE ") == len(CONNECTOR_FAMILIES) + len(RESET_FAMILIES)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_endpoint_serves_the_registry_and_the_objects_and_filters_by_name() -> None:
    ns = f"metrics-server-{random.randrange(10**9)}"
    OBJECTS.observe_connector(ns, "c1", {"state": "running"}, {"connectorState": "RUNNING"}, uid=f"{ns}-1")
    server = metrics_server.serve(_free_port(), "127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        answer = httpx.get(url, timeout=10)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        families = {f.name: f for f in text_string_to_metric_families(answer.text)}
        assert metrics.RECONCILES._name in families  # the registry's (a counter: named without _total)
        assert "process_resident_memory_bytes" in families
        mine = [s for s in families["connectops_connector_state"].samples if s.labels["namespace"] == ns]
        assert {s.labels["state"]: s.value for s in mine}["RUNNING"] == 1.0
        assert sum(s.value for s in mine) == 1.0
        filtered = httpx.get(url, params={"name[]": ["connectops_connector_ready"]}, timeout=10).text
        names = {f.name for f in text_string_to_metric_families(filtered)}
        assert names == {"connectops_connector_ready"}
        assert httpx.head(url, timeout=10).status_code == 200
    finally:
        server.shutdown()
        server.server_close()
        OBJECTS.forget("Connector", ns, "c1", uid=f"{ns}-1")
