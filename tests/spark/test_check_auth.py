"""``--connect-auth-env`` / ``--metrics-auth-env``: the job reads the REST API's and the metrics
endpoints' basic auth from its environment (the driver pod's env, filled by the kubelet from the
ConnectCluster's Secrets), never from its arguments, and no text it writes repeats a password.

Run as ``main`` runs in the driver, against a stand-in for one worker that refuses any request
without the right credentials: a source connector's check reads its REST API and scrapes its
metrics, and needs no Kafka and no Spark.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest

from connectops_check.cli import main

NAME = "feed"
CONNECT = ("ops", "connect-pw-1")
METRICS = ("scraper", "metrics-pw-2")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class _Worker(BaseHTTPRequestHandler):
    """A FileStreamSource's REST answers, and its worker's metrics, each behind its own login."""

    seen: ClassVar[list[tuple[str, str]]] = []
    base = f"/connectors/{quote(NAME, safe='')}"
    routes: ClassVar[dict[str, Any]] = {
        "/": {"version": "4.1.0", "commit": "x", "kafka_cluster_id": "c"},
        base: {"name": NAME, "type": "source", "config": {"connector.class": "FileStreamSource"}},
        f"{base}/status": {
            "name": NAME,
            "connector": {"state": "RUNNING", "worker_id": "w"},
            "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w"}],
            "type": "source",
        },
        f"{base}/offsets": {"offsets": []},
    }

    def do_GET(self) -> None:
        given = self.headers.get("Authorization") or ""
        self.seen.append((self.path, given))
        wanted = METRICS if self.path == "/metrics" else CONNECT
        if given != _basic(*wanted):
            self._send(401, b'{"error_code": 401, "message": "Unauthorized"}', "application/json")
        elif self.path == "/metrics":
            self._send(200, b"# no figures\n", "text/plain")
        else:
            self._send(200, json.dumps(self.routes[self.path]).encode(), "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def worker() -> Iterator[str]:
    _Worker.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def _arguments(url: str, output: Path) -> list[str]:
    # what the operator writes: env var names only
    return [
        *("--bootstrap=unused:9092", f"--connect-url={url}", f"--metrics-url={url}/metrics"),
        "--connect-auth-env=CONNECTOPS_CONNECT_USERNAME:CONNECTOPS_CONNECT_PASSWORD",
        "--metrics-auth-env=CONNECTOPS_METRICS_USERNAME:CONNECTOPS_METRICS_PASSWORD",
        *(f"--connector={NAME}", "--samples", "2", "--interval", "0.1s", f"--output={output}"),
    ]


def test_the_job_authenticates_from_its_environment(
    worker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, value in zip(("CONNECTOPS_CONNECT_USERNAME", "CONNECTOPS_CONNECT_PASSWORD"), CONNECT, strict=True):
        monkeypatch.setenv(variable, value)
    for variable, value in zip(("CONNECTOPS_METRICS_USERNAME", "CONNECTOPS_METRICS_PASSWORD"), METRICS, strict=True):
        monkeypatch.setenv(variable, value)
    output = tmp_path / "verdict.json"
    assert main(_arguments(worker, output)) == 0
    verdict = output.read_text()
    assert "401" not in verdict
    assert json.loads(verdict)["connector"] == NAME
    scrapes = [auth for path, auth in _Worker.seen if path == "/metrics"]
    assert scrapes == [_basic(*METRICS)] * 2
    assert all(auth == _basic(*CONNECT) for path, auth in _Worker.seen if path != "/metrics")


def test_a_wrong_password_is_named_by_its_variable_never_shown(
    worker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CONNECTOPS_CONNECT_USERNAME", CONNECT[0])
    monkeypatch.setenv("CONNECTOPS_CONNECT_PASSWORD", CONNECT[1])
    monkeypatch.setenv("CONNECTOPS_METRICS_USERNAME", METRICS[0])
    monkeypatch.setenv("CONNECTOPS_METRICS_PASSWORD", "wrong-password-3")
    output = tmp_path / "verdict.json"
    # a URL with user-info (an operator before these flags, or one written by hand): masked too
    arguments = [
        a.replace("--metrics-url=http://", "--metrics-url=http://u:hunter22@") for a in _arguments(worker, output)
    ]
    assert main(arguments) == 0
    written = output.read_text() + capsys.readouterr().out
    assert "metrics http://[redacted]@127.0.0.1" in written
    assert "401" in written  # the scrape failed, and the verdict notes it
    for secret in ("wrong-password-3", "hunter22", CONNECT[1]):
        assert secret not in written
    # a variable that is not set: an argument error naming it, exit 2
    monkeypatch.delenv("CONNECTOPS_METRICS_PASSWORD")
    with pytest.raises(SystemExit) as exited:
        main(_arguments(worker, output))
    assert exited.value.code == 2
    assert "CONNECTOPS_METRICS_PASSWORD" in capsys.readouterr().err
