"""Connections go to the address that was checked: the guarded transport resolves the host once
per connection, puts every address to the guard, connects to one it passed, and keeps the URL's
host for the Host header, SNI and certificate verification."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from connectops.adapters.addresses import GuardedTransport, api_server_endpoints
from connectops.adapters.connect_rest import ConnectAddressRefused, ConnectClient, ConnectUnavailable
from connectops.planning.urls import ApiServer, UrlPolicy

pytestmark = pytest.mark.timeout(60)

ROOT = {"version": "4.1.0", "commit": "abc", "kafka_cluster_id": "cluster-1"}


class Worker:
    """A one-endpoint Connect stand-in on 127.0.0.1: what each connection asked for."""

    def __init__(self) -> None:
        self.connections = 0
        self.hosts: list[str] = []
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                self.hosts += [line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("host:")]
                body = json.dumps(ROOT).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def worker(tls: ssl.SSLContext | None = None) -> AsyncIterator[Worker]:
    w = Worker()
    server = await asyncio.start_server(w.serve, "127.0.0.1", 0, ssl=tls)
    w.port = server.sockets[0].getsockname()[1]
    try:
        yield w
    finally:
        server.close()
        await server.wait_closed()


def resolver(answers: dict[str, list[str]], asked: list[str]) -> Callable[[str, int], Awaitable[list[str]]]:
    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[host]

    return resolve


async def test_a_name_is_connected_to_at_the_address_checked() -> None:
    asked: list[str] = []
    checked: list[tuple[str, int, str]] = []

    def guard(host: str, port: int, address: str) -> str | None:
        checked.append((host, port, address))
        return None

    async with worker() as w:
        transport = GuardedTransport(guard, resolver=resolver({"connect.test": ["127.0.0.1"]}, asked))
        async with ConnectClient(f"http://connect.test:{w.port}", transport=transport) as client:
            for _ in range(3):
                assert (await client.server_info()).kafka_cluster_id == "cluster-1"
    assert checked == [("connect.test", w.port, "127.0.0.1")]
    assert asked == ["connect.test"]  # once per connection, not per request (keep-alive)
    assert w.connections == 1
    assert w.hosts == [f"connect.test:{w.port}"] * 3  # the URL's host, not the address


async def test_a_refused_address_is_never_connected_to() -> None:
    policy = UrlPolicy.build([], [ApiServer("127.0.0.1", 6443)])
    async with worker() as w:
        url = f"http://rebound.test:{w.port}"
        # one good address and one refused: every address is checked before any is tried
        answers = {"rebound.test": ["127.0.0.1", "169.254.169.254"]}
        transport = GuardedTransport(policy.guard(url), resolver=resolver(answers, []))
        async with ConnectClient(url, transport=transport, read_retry_delay=0.01) as client:
            with pytest.raises(ConnectAddressRefused) as refused:
                await client.server_info()
            with pytest.raises(ConnectAddressRefused):
                await client.health()
    assert refused.value.reason == "URLNotAllowed"
    assert not refused.value.retryable
    assert "169.254.169.254" in str(refused.value)
    assert "settings.allowedRestUrls" in str(refused.value)
    assert w.connections == 0


async def test_the_client_guards_its_own_transport() -> None:
    async with worker() as w:
        url = f"http://127.0.0.1:{w.port}"
        # the API server, as if it listened here: refused as the connection is made
        policy = UrlPolicy.build([], [ApiServer("127.0.0.1", w.port)])
        async with ConnectClient(url, address_guard=policy.guard(url)) as client:
            with pytest.raises(ConnectAddressRefused):
                await client.server_info()
        allowed = UrlPolicy.build([])
        async with ConnectClient(url, address_guard=allowed.guard(url)) as client:
            assert (await client.server_info()).version == "4.1.0"
    assert w.connections == 1


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}"),
            *("-addext", f"subjectAltName=DNS:{name}"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_is_verified_against_the_urls_name_not_the_address(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path, "connect.test")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    answers = {"connect.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}
    async with worker(served) as w:
        trusted = ssl.create_default_context(cafile=str(cert))
        ok = GuardedTransport(lambda *_: None, verify=trusted, resolver=resolver(answers, []))
        async with ConnectClient(f"https://connect.test:{w.port}", transport=ok) as client:
            assert (await client.server_info()).version == "4.1.0"
        # the same address under a name the certificate does not hold: refused by verification
        wrong = GuardedTransport(lambda *_: None, verify=trusted, resolver=resolver(answers, []))
        async with ConnectClient(f"https://other.test:{w.port}", transport=wrong, read_retries=0) as client:
            with pytest.raises(ConnectUnavailable, match="certificate"):
                await client.server_info()
    assert w.hosts == [f"connect.test:{w.port}"]


def test_the_api_servers_endpoints_come_from_the_kube_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    found = api_server_endpoints("https://localhost:6443")
    assert ("localhost", 6443) in found
    assert ("127.0.0.1", 6443) in found  # what the name resolves to now
    assert ("10.96.0.1", 443) in found
    assert api_server_endpoints("https://[::1]:6443")[0] == ("::1", 6443)
