"""A fault-injecting HTTP reverse proxy for tests, put in front of a real Kafka Connect REST API.

The proxy runs an asyncio server on loopback in a background thread (its own event loop), so
synchronous tests and the operator under test can both talk to ``proxy.url``::

    with FaultProxy(connect.url) as proxy:
        proxy.add_rule(FaultRule.stale_config(method="PUT", path=r"^/connectors/[^/]+/config$", times=2))
        ...  # point the ConnectCluster at proxy.url
        assert proxy.rules[0].fired == 2

Every request is forwarded as received: method, raw request target (path and query with their
percent-encoding untouched), headers (hop-by-hop ones excepted) and body; the upstream response
goes back unchanged (its body is not decoded, so ``Content-Encoding`` stays valid).

Fault rules are evaluated in order for each request; the first rule that *matches* (method and
path regex) and *fires* (its ``times`` budget is not spent and, with a ``probability``, its seeded
RNG says yes) decides what happens:

* ``status``: answer ``status_code`` with a JSON body (by default Connect's error shape,
  ``{"error_code": N, "message": "..."}``) instead of forwarding;
* ``delay``: wait ``seconds``, then forward (a slow worker);
* ``drop``: close the connection without any response;
* ``timeout``: keep the connection open without answering for ``seconds``, then close it.

With ``after_upstream=True`` the request is forwarded first and the fault applies to the way back:
the change reached Connect, but the client sees a 5xx, a dropped connection, a hang or a delay
(the "did my PUT happen?" case).

A matching rule draws from its RNG once per matching request, whether it fires or not, so a seeded
probabilistic rule gives the same decisions for the same request sequence. Rules, counters and the
request log are guarded by one lock: tests may change rules while requests are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, Self

import httpx

FaultKind = Literal["status", "delay", "drop", "timeout", "trickle", "huge", "rewrite"]

#: Kafka Connect's answer while a rebalance or a concurrent config change is in progress.
STALE_CONFIG_MESSAGE: Final = (
    "Cannot complete request momentarily due to stale configuration (typically caused by a concurrent config change)"
)

# RFC 9110 section 7.6.1 plus the de-facto ones: never forwarded by a proxy.
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_MAX_HEADER_BYTES: Final = 64 * 1024
_REASONS: Final = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    409: "Conflict",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class _BadRequestError(Exception):
    """The client sent something this proxy cannot parse as HTTP/1.1."""


@dataclass
class FaultRule:
    """One fault: what it matches, what it does, and how often.

    ``method`` (case-insensitive) and ``path`` (a regex, ``re.search`` against the raw path as
    received, percent-encoding included, query excluded) are optional; an unset one matches
    everything. ``times`` fires the first N matching requests; ``probability`` fires each matching
    request with that chance, drawn from ``random.Random(seed)``; both unset: every match fires.
    ``matched`` and ``fired`` count what happened (updated by the proxy under its lock).
    """

    kind: FaultKind
    method: str | None = None
    path: str | None = None
    status_code: int = 500
    body: Any = None
    seconds: float = 0.0
    times: int | None = None
    probability: float | None = None
    seed: int | None = None
    after_upstream: bool = False
    #: for ``huge``: send Content-Length (False: the body ends when the connection closes)
    declared_length: bool = True
    #: for ``rewrite``: what the client gets instead of the worker's (decoded JSON) answer
    rewrite: Callable[[Any], Any] | None = None
    name: str = ""
    matched: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False)
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("status", "delay", "drop", "timeout", "trickle", "huge", "rewrite"):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be within [0, 1], got {self.probability}")
        if self.times is not None and self.times < 0:
            raise ValueError(f"times must be >= 0, got {self.times}")
        if self.seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {self.seconds}")
        self._pattern = re.compile(self.path) if self.path is not None else None
        self._rng = random.Random(self.seed)
        if not self.name:
            self.name = f"{self.kind}:{self.method or '*'}:{self.path or '*'}"

    # Convenience constructors for the faults Connect really produces -------------------------

    @classmethod
    def status(cls, status_code: int, message: str | None = None, **kwargs: Any) -> FaultRule:
        """Answer ``status_code`` with Connect's error body ``{"error_code", "message"}``."""
        text = message if message is not None else _REASONS.get(status_code, "injected fault")
        return cls("status", status_code=status_code, body={"error_code": status_code, "message": text}, **kwargs)

    @classmethod
    def trickle(cls, seconds: float, **kwargs: Any) -> FaultRule:
        """A slow-loris answer: headers, then one byte every ``seconds``, forever."""
        return cls("trickle", seconds=seconds, **kwargs)

    @classmethod
    def huge(cls, mib: int, *, declared_length: bool = True, **kwargs: Any) -> FaultRule:
        """A 200 whose body is ``mib`` MiB (of JSON whitespace), as fast as the client reads;
        ``declared_length=False`` sends no Content-Length, so only counting the bytes finds it."""
        return cls("huge", status_code=mib, declared_length=declared_length, **kwargs)

    @classmethod
    def rewritten(cls, rewrite: Callable[[Any], Any], **kwargs: Any) -> FaultRule:
        """The worker's own answer, forwarded, with its JSON body passed through ``rewrite``
        (a real answer's shape, made larger or stranger than a test's worker can make it)."""
        return cls("rewrite", rewrite=rewrite, after_upstream=True, **kwargs)

    @classmethod
    def stale_config(cls, **kwargs: Any) -> FaultRule:
        """Connect's 409 during a rebalance / concurrent config change."""
        return cls.status(409, STALE_CONFIG_MESSAGE, **kwargs)

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self._pattern is None or self._pattern.search(path) is not None

    def _decide(self) -> bool:
        """Called (under the proxy lock) for a matching request: does the rule fire now?"""
        self.matched += 1
        # Draw even when the budget is spent, so decisions depend only on the request sequence.
        lucky = self._rng.random() < self.probability if self.probability is not None else True
        if self.times is not None and self.fired >= self.times:
            return False
        if lucky:
            self.fired += 1
        return lucky


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the proxy saw it, and what became of it."""

    method: str
    path: str  # raw, as received
    query: str  # raw, without '?'
    fault: FaultKind | None  # None: passed through untouched
    rule: str | None  # name of the rule that fired
    upstream_status: int | None  # None: not forwarded, or the upstream failed
    status: int | None  # what the client got; None: no response (drop, timeout)
    seconds: float
    error: str | None = None  # upstream transport error, if any
    received_at: float = 0.0  # wall clock (time.time()) when the request arrived
    #: SHA-256 of the Authorization header (None: none sent): which credentials a request carried,
    #: without the proxy keeping them
    auth_digest: str | None = None


def auth_digest(headers: Iterable[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if name.lower() == "authorization":
            return hashlib.sha256(value.encode("latin-1")).hexdigest()
    return None


@dataclass
class _Request:
    method: str
    target: bytes
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool

    @property
    def path(self) -> str:
        return self.target.split(b"?", 1)[0].decode("latin-1")

    @property
    def query(self) -> str:
        parts = self.target.split(b"?", 1)
        return parts[1].decode("latin-1") if len(parts) > 1 else ""


@dataclass
class _Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class FaultProxy:
    """HTTP/1.1 reverse proxy to ``upstream`` (e.g. ``http://127.0.0.1:8083``) with fault rules."""

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        upstream_timeout: float = 60.0,
    ) -> None:
        self.upstream = httpx.URL(upstream)
        self.host = host
        self._port = port
        self.upstream_timeout = upstream_timeout
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._log: list[RecordedRequest] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        # Requests being served right now and the most seen at once: how a benchmark shows the
        # operator's bound on concurrent Connect calls holds.
        self._in_flight = 0
        self._max_in_flight = 0

    # Lifecycle ---------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("proxy not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("proxy already started")
        self._thread = threading.Thread(target=self._run, name=f"faultproxy->{self.upstream}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("fault proxy did not start within 10 s")
        if self._start_error is not None:
            raise RuntimeError(f"fault proxy failed to start: {self._start_error}") from self._start_error
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=15)
        thread.join(timeout=15)
        self._thread = None
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # Rules and records (thread-safe) -----------------------------------------------------------

    def add_rule(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def set_rules(self, rules: Iterable[FaultRule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def remove_rule(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]

    def clear_rules(self) -> None:
        self.set_rules(())

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def counters(self) -> dict[str, tuple[int, int]]:
        """``{rule name: (matched, fired)}``."""
        with self._lock:
            return {r.name: (r.matched, r.fired) for r in self._rules}

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    def reset(self) -> None:
        """Drop every rule and every recorded request."""
        with self._lock:
            self._rules = []
            self._log.clear()
            # counts again from zero: a request still finishing (its answer already sent) is not news
            self._max_in_flight = 0

    def _choose(self, method: str, path: str) -> FaultRule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path) and rule._decide():
                    return rule
        return None

    def _record(self, entry: RecordedRequest) -> None:
        with self._lock:
            self._log.append(entry)

    # Event loop side ---------------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:
            self._start_error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _startup(self) -> None:
        self._client = httpx.AsyncClient(
            timeout=self.upstream_timeout,
            follow_redirects=False,
            # The proxy answers one request per client connection at a time; keep the pool modest.
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._server = await asyncio.start_server(self._serve_connection, self.host, self._port)
        self._port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=5)
        if self._client is not None:
            await self._client.aclose()
        assert self._loop is not None
        self._loop.call_soon(self._loop.stop)

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except _BadRequestError as exc:
                    body = json.dumps({"error_code": 400, "message": f"fault proxy: {exc}"}).encode()
                    await _write_response(writer, _Response(400, [("Content-Type", "application/json")], body))
                    return
                if request is None:  # the client closed the connection between requests
                    return
                keep_open = await self._handle(request, writer)
                if not keep_open or not request.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            # Shutdown cancels open connections. Ending the task normally, rather than as
            # cancelled, keeps Python 3.11's stream callback (task.exception() on a cancelled
            # task raises) from printing a traceback for each of them.
            return
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @property
    def in_flight(self) -> int:
        """Requests this proxy is serving now (one whose client went away still counts until the
        upstream answers it)."""
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests this proxy was serving at the same moment since start or reset."""
        with self._lock:
            return self._max_in_flight

    async def _handle(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection must be closed afterwards."""
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            return await self._serve(request, writer)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _serve(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        started = time.monotonic()
        received_at = time.time()
        rule = self._choose(request.method, request.path)
        upstream: _Response | None = None
        error: str | None = None

        def record(status: int | None) -> None:
            self._record(
                RecordedRequest(
                    method=request.method,
                    path=request.path,
                    query=request.query,
                    fault=rule.kind if rule is not None else None,
                    rule=rule.name if rule is not None else None,
                    upstream_status=upstream.status if upstream is not None else None,
                    status=status,
                    seconds=time.monotonic() - started,
                    error=error,
                    received_at=received_at,
                    auth_digest=auth_digest(request.headers),
                )
            )

        forward = rule is None or rule.kind == "delay" or rule.after_upstream
        if rule is not None and rule.kind == "delay" and not rule.after_upstream:
            await asyncio.sleep(rule.seconds)
        if forward:
            try:
                upstream = await self._forward(request)
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"

        if rule is None or rule.kind == "delay":
            if rule is not None and rule.after_upstream:
                await asyncio.sleep(rule.seconds)
            response = upstream if upstream is not None else _bad_gateway(error)
            record(response.status)
            await _write_response(writer, response)
            return True
        if rule.kind == "status":
            body = json.dumps(rule.body).encode() if rule.body is not None else b""
            headers = [("Content-Type", "application/json")] if rule.body is not None else []
            record(rule.status_code)
            await _write_response(writer, _Response(rule.status_code, headers, body))
            return True
        if rule.kind == "rewrite" and rule.rewrite is not None:
            if upstream is None:
                response = _bad_gateway(error)
            else:
                body = json.dumps(rule.rewrite(json.loads(upstream.body))).encode()
                response = _Response(upstream.status, [("Content-Type", "application/json")], body)
            record(response.status)
            await _write_response(writer, response)
            return True
        if rule.kind == "timeout":
            record(None)
            await asyncio.sleep(rule.seconds)
            return False
        if rule.kind == "trickle":
            # slow-loris: headers at once, then one body byte every `seconds`: never idle long
            # enough for a per-read timeout, never done
            record(200)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
            await writer.drain()
            with contextlib.suppress(ConnectionError):
                for _ in range(1_000_000):
                    writer.write(b" ")
                    await writer.drain()
                    await asyncio.sleep(rule.seconds)
            return False
        if rule.kind == "huge":
            # a body of `status_code` MiB of JSON whitespace, streamed as fast as the client reads
            size = rule.status_code << 20
            record(200)
            length = f"Content-Length: {size}" if rule.declared_length else "Connection: close"
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}\r\n\r\n"
            writer.write(head.encode())
            chunk = b" " * (1 << 20)
            with contextlib.suppress(ConnectionError):
                for _ in range(rule.status_code):
                    writer.write(chunk)
                    await writer.drain()
            return False
        # drop: close at once; SO_LINGER is not touched, the client sees EOF before any byte.
        record(None)
        return False

    async def _forward(self, request: _Request) -> _Response:
        assert self._client is not None
        url = self.upstream.copy_with(raw_path=request.target)
        headers = [
            (k, v)
            for k, v in request.headers
            if k.lower() not in _HOP_BY_HOP and k.lower() not in ("host", "content-length")
        ]
        headers.append(("Host", self.upstream.netloc.decode("ascii")))
        upstream_request = self._client.build_request(
            request.method, url, headers=headers, content=request.body or None
        )
        response = await self._client.send(upstream_request, stream=True)
        try:
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        finally:
            await response.aclose()
        out_headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"
        ]
        return _Response(response.status_code, out_headers, body)


def _bad_gateway(error: str | None) -> _Response:
    body = json.dumps({"error_code": 502, "message": f"fault proxy: upstream failed: {error}"}).encode()
    return _Response(502, [("Content-Type", "application/json")], body)


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise _BadRequestError("truncated request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise _BadRequestError("request head too large") from exc
    if len(head) > _MAX_HEADER_BYTES:
        raise _BadRequestError("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError as exc:
        raise _BadRequestError(f"malformed request line {lines[0]!r}") from exc
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequestError(f"malformed header line {line!r}")
        headers.append((name.strip(), value.strip()))
    lookup = {k.lower(): v for k, v in headers}
    if "chunked" in lookup.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        length = int(lookup.get("content-length", "0") or "0")
        body = await reader.readexactly(length) if length else b""
    connection = lookup.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return _Request(method, target.encode("latin-1"), headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            # Trailers (ignored) up to the empty line.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def _write_response(writer: asyncio.StreamWriter, response: _Response) -> None:
    reason = _REASONS.get(response.status, "Status")
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    lines += [f"{k}: {v}" for k, v in response.headers]
    # 1xx, 204 and 304 carry no body, hence no Content-Length either.
    if response.status >= 200 and response.status not in (204, 304):
        lines.append(f"Content-Length: {len(response.body)}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
    await writer.drain()
