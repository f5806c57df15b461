"""The fault-injecting proxy (tests/env/faultproxy.py) in front of the real Kafka Connect worker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.env.faultproxy import STALE_CONFIG_MESSAGE, FaultProxy, FaultRule
from tests.env.servers import ConnectWorker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def proxy(connect: ConnectWorker) -> Iterator[FaultProxy]:
    with FaultProxy(connect.url) as p:
        yield p


def test_pass_through(proxy: FaultProxy, connect: ConnectWorker) -> None:
    # The plugin list, not /connectors: the session's operator may be deleting an earlier
    # test's connector between the two reads.
    params = {"connectorsOnly": "false"}
    direct = httpx.get(f"{connect.url}/connector-plugins", params=params, timeout=10)
    via = httpx.get(f"{proxy.url}/connector-plugins", params=params, timeout=10)
    assert via.status_code == direct.status_code == 200
    assert via.json() == direct.json()
    assert via.headers["content-type"].startswith("application/json")
    [seen] = proxy.requests
    assert (seen.method, seen.path, seen.query) == ("GET", "/connector-plugins", "connectorsOnly=false")
    assert (seen.fault, seen.upstream_status, seen.status) == (None, 200, 200)


def test_raw_path_and_body_forwarded(proxy: FaultProxy) -> None:
    name = f"fp {uuid.uuid4().hex[:6]}"  # a space: percent-encoded on the wire
    config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "topic": "t"}
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        put = client.put(f"/connectors/{name}/config", json=config)
        assert put.status_code == 201, put.text
        got = client.get(f"/connectors/{name}/config")
        assert got.status_code == 200
        assert got.json()["topic"] == "t"
        assert client.delete(f"/connectors/{name}").status_code == 204
    paths = [r.path for r in proxy.requests]
    encoded = name.replace(" ", "%20")
    assert paths == [f"/connectors/{encoded}/config"] * 2 + [f"/connectors/{encoded}"]
    assert [r.upstream_status for r in proxy.requests] == [201, 200, 204]


def test_stale_config_409_twice_then_passes(proxy: FaultProxy) -> None:
    rule = proxy.add_rule(FaultRule.stale_config(method="GET", path=r"^/connectors$", times=2))
    statuses = []
    for _ in range(3):
        resp = httpx.get(f"{proxy.url}/connectors", timeout=10)
        statuses.append(resp.status_code)
        if resp.status_code == 409:
            assert resp.json() == {"error_code": 409, "message": STALE_CONFIG_MESSAGE}
    assert statuses == [409, 409, 200]
    assert (rule.matched, rule.fired) == (3, 2)
    assert proxy.counters() == {rule.name: (3, 2)}
    log = proxy.requests
    assert [r.fault for r in log] == ["status", "status", None]
    assert [r.upstream_status for r in log] == [None, None, 200]  # the 409s never reached Connect


def test_rule_matching_by_method_and_path(proxy: FaultProxy) -> None:
    proxy.add_rule(FaultRule.status(503, method="PUT", path=r"/config$"))
    assert httpx.get(f"{proxy.url}/connectors", timeout=10).status_code == 200
    assert httpx.get(f"{proxy.url}/connector-plugins", timeout=10).status_code == 200
    resp = httpx.put(f"{proxy.url}/connectors/x/config", json={}, timeout=10)
    assert resp.status_code == 503
    assert resp.json()["error_code"] == 503


def test_drop_makes_the_client_fail(proxy: FaultProxy) -> None:
    proxy.add_rule(FaultRule("drop", path=r"^/connectors$", times=1))
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{proxy.url}/connectors", timeout=10)
    assert httpx.get(f"{proxy.url}/connectors", timeout=10).status_code == 200
    assert [(r.fault, r.status) for r in proxy.requests] == [("drop", None), (None, 200)]


def test_timeout_holds_the_connection(proxy: FaultProxy) -> None:
    proxy.add_rule(FaultRule("timeout", seconds=30, times=1))
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{proxy.url}/connectors", timeout=httpx.Timeout(10, read=1.0))
    assert 0.9 < time.monotonic() - started < 5
    # Other connections are served meanwhile.
    assert httpx.get(f"{proxy.url}/connectors", timeout=10).status_code == 200


def test_delay_is_measured(proxy: FaultProxy) -> None:
    proxy.add_rule(FaultRule("delay", seconds=0.8, path=r"^/connectors$"))
    started = time.monotonic()
    resp = httpx.get(f"{proxy.url}/connectors", timeout=10)
    elapsed = time.monotonic() - started
    assert resp.status_code == 200
    assert 0.8 <= elapsed < 3
    [seen] = proxy.requests
    assert (seen.fault, seen.upstream_status, seen.status) == ("delay", 200, 200)
    assert seen.seconds >= 0.8


def test_max_in_flight_counts_concurrent_requests(proxy: FaultProxy) -> None:
    import concurrent.futures

    # /connector-plugins is answered outside the herder: never a 409 from another test's rebalance
    proxy.add_rule(FaultRule("delay", seconds=0.5, path=r"^/connector-plugins$"))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda _: httpx.get(f"{proxy.url}/connector-plugins", timeout=10).status_code, range(4))
        )
    assert answers == [200] * 4
    assert proxy.max_in_flight == 4
    proxy.reset()
    assert proxy.max_in_flight == 0


def test_fault_after_upstream_still_reaches_connect(proxy: FaultProxy, connect: ConnectWorker) -> None:
    name = f"fp-after-{uuid.uuid4().hex[:6]}"
    config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "topic": "t"}
    proxy.add_rule(FaultRule.status(500, method="PUT", after_upstream=True, times=1))
    resp = httpx.put(f"{proxy.url}/connectors/{name}/config", json=config, timeout=30)
    assert resp.status_code == 500
    [seen] = proxy.requests
    assert (seen.upstream_status, seen.status) == (201, 500)
    # The change happened anyway.
    assert httpx.get(f"{connect.url}/connectors/{name}/config", timeout=10).status_code == 200
    assert httpx.delete(f"{connect.url}/connectors/{name}", timeout=30).status_code == 204


def _statuses_with_seed(proxy: FaultProxy, seed: int, count: int) -> list[int]:
    proxy.reset()
    proxy.add_rule(FaultRule.status(503, probability=0.5, seed=seed))
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        return [client.get("/connectors").status_code for _ in range(count)]


def test_probability_with_seed_is_reproducible(proxy: FaultProxy) -> None:
    first = _statuses_with_seed(proxy, seed=42, count=20)
    second = _statuses_with_seed(proxy, seed=42, count=20)
    assert first == second
    assert set(first) == {200, 503}  # 20 draws at p=0.5: both outcomes (true for seed 42)
    [rule] = proxy.rules
    assert rule.matched == 20
    assert rule.fired == first.count(503)


def test_rules_change_at_runtime(proxy: FaultProxy) -> None:
    rule = proxy.add_rule(FaultRule.status(500))
    assert httpx.get(f"{proxy.url}/connectors", timeout=10).status_code == 500
    proxy.remove_rule(rule)
    assert httpx.get(f"{proxy.url}/connectors", timeout=10).status_code == 200


def test_rule_validation() -> None:
    with pytest.raises(ValueError, match="probability"):
        FaultRule("status", probability=1.5)
    with pytest.raises(ValueError, match="kind"):
        FaultRule("explode")  # type: ignore[arg-type]
