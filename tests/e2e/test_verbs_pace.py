"""Annotation verbs act when they are written, with the operator at its production resync.

The session's operator resyncs every 3 s, where a verb that waited for the next resync would
still act within seconds. This one runs ``connectops run`` on the production defaults (a resync
every 60 s): a restart token, and the removal of ``connectops.io/reconcile: paused`` with a
change pending, must reach Connect within 5 s of the apply. What reached Connect is read from a
pass-through proxy in front of the real worker, and the change from the worker itself.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from unittest import mock

from connectops.settings import load
from tests.e2e.conftest import ConnectREST, K8s, OperatorProcess, wait_for
from tests.e2e.test_restart_pace import PRODUCTION, production  # noqa: F401 (a fixture)
from tests.e2e.test_verbs import _apply, _restarts, proxied_source
from tests.env.faultproxy import FaultProxy
from tests.env.servers import ConnectWorker

#: the promise: a verb reaches Connect within this long of its apply, whatever the resync
WITHIN = 5.0


def _config_puts(proxy: FaultProxy, connector: str) -> list[float]:
    return [
        r.received_at
        for r in proxy.requests
        if r.method == "PUT" and r.path == f"/connectors/{connector}/config" and r.upstream_status == 200
    ]


def _restart_times(proxy: FaultProxy, connector: str) -> list[float]:
    return [
        r.received_at
        for r in proxy.requests
        if r.method == "POST" and r.path.startswith(f"/connectors/{connector}/") and "restart" in r.path
    ]


def test_a_restart_token_and_a_lifted_pause_reach_connect_within_seconds_at_the_production_resync(
    production: tuple[K8s, OperatorProcess],  # noqa: F811
    connect: ConnectWorker,
    tmp_path: Path,
) -> None:
    k8s, operator = production
    with mock.patch.dict(os.environ, PRODUCTION):
        assert load().resync_seconds == 60.0, "the operator under test must resync at the production default"
    operator.start(env=PRODUCTION)
    with FaultProxy(connect.url) as proxy:
        name, spec = proxied_source(k8s, connect, proxy, tmp_path, "pace")
        started = time.time()

        # a restart token: acted on at once, and once
        applied = time.time()
        _apply(k8s, name, spec, {"connectops.io/restart": "t1"})
        wait_for(lambda: len(_restart_times(proxy, name)) == 1, 30, "the restart reached Connect")
        took = _restart_times(proxy, name)[0] - applied
        print(f"restart token -> Connect: {took:.2f} s", file=sys.__stdout__)
        assert took <= WITHIN, f"the restart reached Connect {took:.2f} s after the apply"
        assert _restarts(proxy, name) == [f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false"]
        wait_for(lambda: (k8s.get("connectors", name)["status"].get("verbs") or {}).get("restart") == "t1", 30, "t1")

        # paused: a change waits, however long; lifting the pause applies it at once
        paused = {"connectops.io/restart": "t1", "connectops.io/reconcile": "paused"}
        _apply(k8s, name, spec, paused)
        changed = {**spec, "config": {**spec["config"], "batch.size": "7"}}
        _apply(k8s, name, changed, paused)
        time.sleep(WITHIN + 1)
        assert _config_puts(proxy, name) == [], "a paused Connector's change reached Connect"
        assert "batch.size" not in ConnectREST(connect).config(name)
        lifted = time.time()
        _apply(k8s, name, changed, {"connectops.io/restart": "t1"})
        wait_for(lambda: bool(_config_puts(proxy, name)), 30, "the pending change reached Connect")
        took = _config_puts(proxy, name)[0] - lifted
        print(f"pause lifted -> pending change at Connect: {took:.2f} s", file=sys.__stdout__)
        assert took <= WITHIN, f"the pending change reached Connect {took:.2f} s after the pause was lifted"
        assert ConnectREST(connect).config(name).get("batch.size") == "7"  # the worker's own config

        # all of it before the operator's first resync could have come by, and nothing twice
        assert time.time() - started < 60, "the test outlived a resync period: it proves nothing about the pace"
        assert len(_restart_times(proxy, name)) == 1
        assert len(_config_puts(proxy, name)) == 1
        k8s.delete("connectors", name)
        wait_for(lambda: not k8s.exists("connectors", name), 60, f"{name} deleted")
